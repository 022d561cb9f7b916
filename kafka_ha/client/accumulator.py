"""The producer's per-partition batch queues and the rule for when a batch may go.

No I/O and no clock of its own (``now`` is passed in), so the batching and
ordering rules are testable with plain asserts:

- records for a partition are appended to the last open batch, closed when
  ``batch_size`` would be exceeded (the first record always fits);
- a batch goes to its leader in a request with the ready head batch of every
  other partition that broker leads; ``max_in_flight`` such requests may be
  outstanding per broker (the producer's max.in.flight.requests.per.connection);
- with ``max_in_flight`` 1 a partition has at most **one batch in flight**
  (Kafka mutes it), so a retry can never be overtaken; with more, a failed
  batch goes back into its queue in creation order, ahead of everything newer,
  and nothing queued behind it leaves before it -- but a newer batch already in
  flight may still be written first (Kafka's behaviour without idempotence);
- a head batch is ready when it is full, has lingered ``linger_s``, is a
  retry whose backoff passed, or the producer is flushing.

>>> acc = RecordAccumulator(batch_size=100, linger_s=0.005, retry_backoff_s=0.1)
>>> tp = TopicPartition("t", 0)
>>> acc.append(tp, Record(None, b"x" * 10), None, now=0.0)
(True, False)
>>> acc.drain(0.001, lambda tp: 1, busy=set(), flushing=False)
({}, 0.004)
>>> ready, _ = acc.drain(0.006, lambda tp: 1, busy=set(), flushing=False)
>>> [(node, [b.tp for b in batches]) for node, batches in ready.items()]
[(1, [TopicPartition(topic='t', partition=0)])]
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator

from kafka_ha.clock import now_ms
from kafka_ha.model import TopicPartition
from kafka_ha.records.builder import Record, assemble_v2_batch, encode_v2_record

from .errors import KafkaError
from .future import RecordFuture, RecordMetadata

# A v2 batch header is 61 bytes; a record adds at most ~21 bytes of varints
# and attributes around its key, value and headers (Kafka's estimate).
BATCH_OVERHEAD = 61
RECORD_OVERHEAD = 21


def record_size(record: Record) -> int:
    size = RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")
    if record.headers:      # most records have none: skip making an iterator (a GC-tracked object)
        for h_key, h_value in record.headers:
            size += len(h_key) + len(h_value or b"") + 2
    return size


@dataclass(eq=False)
class ProducerBatch:
    """One partition's batch: records are encoded as they are appended.

    Kafka's MemoryRecordsBuilder does the same.  The batch keeps only bytes
    (which the cyclic GC does not track) and the futures.  Before, it held each
    ``Record`` tuple until the batch was drained, and with tens of thousands of
    records buffered, the GC's full passes over them took 20-30% of the
    producer's CPU at peak throughput.
    """
    tp: TopicPartition
    created: float
    encoded: list[bytes] = field(default_factory=list)   # encode_v2_record output, in order
    futures: list[RecordFuture | None] = field(default_factory=list)
    size: int = BATCH_OVERHEAD
    closed: bool = False
    attempts: int = 0
    retry_at: float = 0.0
    sequence: int = 0                  # creation order: requeues keep it
    base_timestamp: int = 0            # the first record's: the others are deltas from it
    max_timestamp: int = 0
    _payload: bytes | None = None

    @property
    def count(self) -> int:
        return len(self.futures)

    def try_append(self, record: Record, future: RecordFuture | None, limit: int,
                   added: int) -> bool:
        """Add ``record`` (``added`` = its :func:`record_size`) unless the batch is full.

        A record without a timestamp gets the current time, as in
        :func:`build_v2_batch` (the producer stamps every record in ``send``).
        """
        if self.closed or (self.futures and self.size + added > limit):
            self.closed = True
            return False
        stamp = now_ms() if record.timestamp_ms is None else record.timestamp_ms
        if not self.futures:
            self.base_timestamp = self.max_timestamp = stamp
        elif stamp > self.max_timestamp:
            self.max_timestamp = stamp
        self.encoded.append(encode_v2_record(record, len(self.futures), stamp - self.base_timestamp))
        self.futures.append(future)
        self.size += added
        return True

    def payload(self, compression: str) -> bytes:
        """The v2 batch bytes, built once: a retry resends exactly the same data."""
        if self._payload is None:
            self.closed = True
            self._payload = assemble_v2_batch(b"".join(self.encoded), self.count,
                                              self.base_timestamp, self.max_timestamp, compression)
            self.encoded = []
        return self._payload

    def complete(self, base_offset: int) -> None:
        for i, future in enumerate(self.futures):
            if future is not None:
                offset = base_offset + i if base_offset >= 0 else -1
                future.set_result(RecordMetadata(self.tp.partition, offset))

    def fail(self, exc: KafkaError) -> None:
        for future in self.futures:
            if future is not None:
                future.set_exception(exc)


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_s: float, retry_backoff_s: float,
                 max_in_flight: int = 1) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max.in.flight.requests.per.connection must be at least 1, "
                             f"not {max_in_flight}")
        self.batch_size = batch_size
        self.linger_s = linger_s
        self.retry_backoff_s = retry_backoff_s
        self.buffered_bytes = 0
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._in_flight: dict[TopicPartition, int] = {}   # batches sent, not yet done/requeued
        self._mute_in_flight = max_in_flight == 1
        self._sequence = 0

    def append(self, tp: TopicPartition, record: Record, future: RecordFuture | None,
               now: float) -> tuple[bool, bool]:
        """Queue ``record``; return ``(opened, full)``.

        ``opened``: a new batch was started (the sender must arm its linger
        timer); ``full``: a batch of ``tp`` just became complete (send it now).
        """
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        added = record_size(record)
        opened = not queue or not queue[-1].try_append(record, future, self.batch_size, added)
        if opened:
            self._sequence += 1
            queue.append(ProducerBatch(tp, now, sequence=self._sequence))
            queue[-1].try_append(record, future, self.batch_size, added)
        self.buffered_bytes += added
        full = (opened and len(queue) > 1) or queue[-1].size >= self.batch_size
        return opened, full

    def drain(self, now: float, leader_of: Callable[[TopicPartition], int | None],
              busy: set[int], flushing: bool) -> tuple[dict[int, list[ProducerBatch]], float | None]:
        """Take the ready head batches, grouped by leader; return them and the next wake-up delay.

        ``busy``: brokers that already have as many requests in flight as
        allowed.  Partitions whose leader is unknown are left queued (the
        caller learns that from :meth:`waiting_for_leader`).  Taken batches
        are in flight until :meth:`done` or :meth:`requeue`.
        """
        ready: dict[int, list[ProducerBatch]] = {}
        delay: float | None = None
        for tp, queue in self._queues.items():
            if not queue or (self._mute_in_flight and tp in self._in_flight):
                continue
            batch = queue[0]
            wait = self._wait_left(batch, len(queue) > 1, now, flushing)
            node = leader_of(tp)
            if wait > 0:
                delay = wait if delay is None else min(delay, wait)
            elif node is not None and node not in busy:
                queue.popleft()
                batch.attempts += 1
                self._in_flight[tp] = self._in_flight.get(tp, 0) + 1
                ready.setdefault(node, []).append(batch)
        return ready, delay

    def waiting_for_leader(self, leader_of: Callable[[TopicPartition], int | None]) -> bool:
        return any(q and tp not in self._in_flight and leader_of(tp) is None
                   for tp, q in self._queues.items())

    def requeue(self, batch: ProducerBatch, now: float) -> None:
        """Put a failed batch back into its queue, to retry after the backoff.

        It goes ahead of every newer batch: batches of one request fail
        together (a leader change, a dropped connection) and come back in
        order, whatever order their failures are handled in.
        """
        batch.retry_at = now + self.retry_backoff_s
        queue = self._queues.setdefault(batch.tp, deque())
        at = next((i for i, queued in enumerate(queue) if queued.sequence > batch.sequence),
                  len(queue))
        queue.insert(at, batch)
        self._sent_back(batch.tp)

    def done(self, batch: ProducerBatch) -> None:
        """The batch left the producer for good (acknowledged or failed)."""
        self._sent_back(batch.tp)
        self.buffered_bytes -= batch.size - BATCH_OVERHEAD
        queue = self._queues.get(batch.tp)
        if queue is not None and not queue:
            del self._queues[batch.tp]

    def _sent_back(self, tp: TopicPartition) -> None:
        left = self._in_flight.get(tp, 0) - 1
        if left > 0:
            self._in_flight[tp] = left
        else:
            self._in_flight.pop(tp, None)

    def _drop_empty_queues(self) -> None:
        self._queues = {tp: q for tp, q in self._queues.items() if q}

    def expired(self, now: float, timeout_s: float) -> list[ProducerBatch]:
        """Remove and return queued batches older than ``timeout_s``.

        A partition with a batch in flight is left alone: its queue is next in
        line once that request returns, and expiring behind it gains nothing.
        """
        old = []
        for tp, queue in self._queues.items():
            if tp in self._in_flight:
                continue
            while queue and now - queue[0].created >= timeout_s:
                old.append(queue.popleft())
        for batch in old:
            self.buffered_bytes -= batch.size - BATCH_OVERHEAD
        self._drop_empty_queues()
        return old

    def abort_all(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (in-flight ones finish on their own)."""
        batches = list(self)
        for queue in self._queues.values():
            queue.clear()
        for batch in batches:
            self.buffered_bytes -= batch.size - BATCH_OVERHEAD
        self._drop_empty_queues()
        return batches

    def is_empty(self) -> bool:
        return not self._in_flight and not any(self._queues.values())

    def __iter__(self) -> Iterator[ProducerBatch]:
        return (b for queue in self._queues.values() for b in queue)

    def _wait_left(self, batch: ProducerBatch, full: bool, now: float, flushing: bool) -> float:
        if batch.attempts:
            return batch.retry_at - now
        if full or flushing or batch.size >= self.batch_size:
            return 0.0
        return batch.created + self.linger_s - now
