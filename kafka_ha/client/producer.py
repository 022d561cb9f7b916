"""The producer: ``send()`` queues a record and returns a future; a sender greenlet ships batches.

Per leader broker the sender keeps up to ``max_in_flight_requests_per_connection``
Produce v2 requests in flight (pipelined on one connection, as Kafka's
producer does), each carrying the ready head batch of every partition that
broker leads.  Retriable failures put the batch back into its partition queue
ahead of newer batches and mark the metadata stale; the next loop refreshes it
before resending.  With 1 request in flight a retry can never be overtaken by
later records; with more (Kafka's default, 5) a newer batch already in flight
may be written before a retried one, as in Kafka without idempotence.  A
dropped connection fails every request drained for it, sent or not, so those
are all retried in order.

Works in gevent programs and in plain scripts: the sender runs whenever the
caller blocks on the producer (``future.get()``, ``flush()``, ``close()``,
a full buffer) or on any other gevent I/O; ``send()`` also yields briefly
each time a batch fills up, so a tight loop keeps the network busy.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Callable

import gevent
from gevent.event import Event

from kafka_ha.clock import now_ms
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records.builder import Record
from kafka_ha.records.format import codec_id

from .accumulator import ProducerBatch, RecordAccumulator
from .cluster import ClusterMetadata, MetadataSnapshot
from .errors import (FatalError, KafkaConnectionError, KafkaError, KafkaNotSentError,
                     KafkaTimeoutError, KafkaUnreachableError, error_for)
from .future import RecordFuture
from .partitioner import DefaultPartitioner, Partitioner

log = logging.getLogger(__name__)

PRODUCE_VERSION = 2
# zstd batches go in Produce v7 (KIP-110): brokers refuse them in older requests.
ZSTD_PRODUCE_VERSION = 7


def produce_version(compression: str) -> int:
    """The Produce version this producer sends with ``compression``.

    >>> produce_version("gzip"), produce_version("zstd")
    (2, 7)
    """
    return ZSTD_PRODUCE_VERSION if compression == "zstd" else PRODUCE_VERSION


def parse_acks(acks: int | str) -> int:
    """``0``, ``1``, ``-1`` or ``"all"`` (as ints or strings) to the wire value.

    >>> [parse_acks(a) for a in (0, "1", "all", "-1")]
    [0, 1, -1, -1]
    """
    value = -1 if str(acks).strip().lower() == "all" else int(acks)
    if value not in (-1, 0, 1):
        raise ValueError(f"acks must be 0, 1, -1 or all, not {acks!r}")
    return value


class Producer:
    """A batching producer (Kafka's KafkaProducer, without idempotence or transactions).

    Configuration mirrors Kafka's producer configs: ``acks`` (0, 1, -1/"all"),
    ``compression`` ("none", "gzip", or a codec the records package has),
    ``linger_ms``, ``batch_size`` (bytes), ``retries`` and ``retry_backoff_ms``
    (a request that could not even connect does not use up a retry),
    ``request_timeout_ms`` (also the Produce ``timeout_ms``), ``buffer_memory``
    and ``max_block_ms`` (how long ``send()`` may block for metadata or
    buffer space), ``delivery_timeout_ms`` (the overall bound per record).
    """

    def __init__(self, bootstrap_servers: str, acks: int | str = 1, compression: str = "none",
                 linger_ms: float = 5, batch_size: int = 16384, retries: int = 5,
                 retry_backoff_ms: int = 100, request_timeout_ms: int = 30000,
                 partitioner: Partitioner | None = None, client_id: str = "kafka-ha-producer",
                 buffer_memory: int = 33554432, max_block_ms: int = 60000,
                 delivery_timeout_ms: int = 120000,
                 max_in_flight_requests_per_connection: int = 5) -> None:
        self.acks = parse_acks(acks)
        codec_id(compression)  # fail now, not inside the sender
        self.compression = compression
        self.retries = retries
        self.request_timeout_ms = request_timeout_ms
        self.buffer_memory = buffer_memory
        self.max_block_s = max_block_ms / 1000.0
        self.delivery_timeout_s = delivery_timeout_ms / 1000.0
        self.retry_backoff_s = retry_backoff_ms / 1000.0
        self.cluster = ClusterMetadata(bootstrap_servers, client_id, request_timeout_ms,
                                       retry_backoff_ms)
        self._partitioner = partitioner or DefaultPartitioner()
        self._acc = RecordAccumulator(batch_size, linger_ms / 1000.0, self.retry_backoff_s,
                                      max_in_flight_requests_per_connection)
        self.max_in_flight = max_in_flight_requests_per_connection
        self._topics: set[str] = set()
        self._in_flight: dict[int, int] = {}  # broker -> Produce requests in flight
        self._wakeup = Event()
        self._drained = Event()               # set whenever nothing is queued or in flight
        self._drained.set()
        self._flushing = 0
        self._closing = False
        self._metadata_stale = False
        self._next_metadata_at = 0.0
        self._sender: gevent.Greenlet | None = None
        self._finished: deque[tuple[ProducerBatch, Callable[[ProducerBatch], None]]] = deque()

    # -- public API ---------------------------------------------------------------

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
             partition: int | None = None, timestamp_ms: int | None = None,
             headers: tuple = ()) -> RecordFuture:
        """Queue one record; the future resolves to ``RecordMetadata(partition, offset)``.

        Failures (unknown topic, timeouts, exhausted retries) are reported
        through the future, never raised here, except for misuse (wrong types,
        a closed producer).
        """
        for name, field in (("key", key), ("value", value)):
            if field is not None and not isinstance(field, (bytes, bytearray, memoryview)):
                raise TypeError(f"{name} must be bytes or None, not {type(field).__name__}")
        if self._closing:
            raise KafkaError(None, "cannot send after the producer is closed")
        future = RecordFuture()
        try:
            tp = TopicPartition(topic, self._choose_partition(topic, key, partition))
            self._wait_for_buffer_space()
        except KafkaError as exc:
            future.set_exception(exc)
            return future
        stamp = now_ms() if timestamp_ms is None else timestamp_ms
        record = Record(None if key is None else bytes(key),
                        None if value is None else bytes(value), stamp, headers)
        self._drained.clear()
        opened, full = self._acc.append(tp, record, future, time.monotonic())
        self._ensure_sender()
        if opened or full:
            self._wakeup.set()  # arm the linger timer, or send the full batch
        if full or self._acc.linger_s <= 0:
            gevent.sleep(0)     # let the sender start the request while we keep appending
        return future

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids, waiting up to max_block_ms for metadata."""
        return list(self._snapshot_for(topic).partitions_for(topic) or ())

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued and wait until each record is acknowledged or failed.

        May be called from a produce callback (callbacks run after their broker
        was released), though that callback then holds up the ones after it.
        """
        self._flushing += 1
        try:
            self._ensure_sender()
            self._wakeup.set()
            if not self._drained.wait(timeout):
                raise KafkaTimeoutError(f"flush did not complete within {timeout} s")
        finally:
            self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush, stop the sender and close the connections; unsent records fail after ``timeout``."""
        if self._closing and self._sender is None:
            return
        self._closing = True
        self._wakeup.set()
        if self._sender is not None:
            self._sender.join(timeout)
            if not self._sender.dead:
                self._abort(KafkaError(None, "producer closed before the record was sent"))
                self._sender.kill(block=True, timeout=1)
            self._sender = None
        self.cluster.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- partition choice and metadata --------------------------------------------

    def _choose_partition(self, topic: str, key: bytes | None, partition: int | None) -> int:
        snap = self._snapshot_for(topic)
        partitions = snap.partitions_for(topic) or ()
        if partition is not None:
            if partition not in partitions:
                raise FatalError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"topic {topic!r} has no partition {partition} "
                                 f"(partitions: {list(partitions)})")
            return partition
        return self._partitioner(topic, None if key is None else bytes(key), partitions,
                                 snap.available_partitions_for(topic))

    def _snapshot_for(self, topic: str) -> MetadataSnapshot:
        if topic not in self._topics:
            self._topics.add(topic)
        snap = self.cluster.snapshot
        if snap.partitions_for(topic) is None:
            snap = self.cluster.wait_for_topics(self._topics, self.max_block_s)
        return snap

    def _wait_for_buffer_space(self) -> None:
        deadline = time.monotonic() + self.max_block_s
        while self._acc.buffered_bytes >= self.buffer_memory:
            self._ensure_sender()
            self._wakeup.set()
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"buffer_memory ({self.buffer_memory} bytes) still full "
                                        f"after {self.max_block_s:g} s")
            gevent.sleep(0.001)

    # -- the sender -----------------------------------------------------------------

    def _ensure_sender(self) -> None:
        if self._sender is None or self._sender.dead:
            self._sender = gevent.spawn(self._run_sender)

    def _run_sender(self) -> None:
        while True:
            self._wakeup.clear()
            now = time.monotonic()
            expired = self._acc.expired(now, self.delivery_timeout_s)
            if expired:
                # Callbacks must not run in (and possibly block) the sender loop itself.
                gevent.spawn(self._fail_all, expired, KafkaTimeoutError(
                    f"record(s) expired after {self.delivery_timeout_s:g} s without being sent"))
            if self._acc.is_empty() and not self._finished:
                self._drained.set()
                if self._closing:
                    return
            delay = self._send_ready(now)
            self._wakeup.wait(delay)

    def _send_ready(self, now: float) -> float | None:
        """Start a request for every broker with ready batches; return the next wake-up delay."""
        if self._metadata_stale and now >= self._next_metadata_at:
            self._refresh_metadata(now)
        leader_of = self.cluster.snapshot.leader_for
        flushing = self._flushing > 0 or self._closing
        blocked = {n: self.cluster.reconnect_delay(n, now) for n in self.cluster.snapshot.brokers}
        blocked = {n: wait for n, wait in blocked.items() if wait > 0}
        busy = {node for node, count in self._in_flight.items() if count >= self.max_in_flight}
        ready, delay = self._acc.drain(now, leader_of, busy | blocked.keys(), flushing)
        if blocked:
            delay = min([*blocked.values(), *([] if delay is None else [delay])])
        for node, batches in ready.items():
            self._in_flight[node] = self._in_flight.get(node, 0) + 1
            gevent.spawn(self._produce, node, batches, self._socket_in_use(node))
        if self._acc.waiting_for_leader(leader_of):
            self._metadata_stale = True
            wait = max(self._next_metadata_at - now, self.retry_backoff_s)
            delay = wait if delay is None else min(delay, wait)
        return delay

    def _socket_in_use(self, node: int) -> int | None:
        # The request goes on this socket or not at all (see _produce).
        try:
            return self.cluster.socket_generation(node)
        except KafkaError:
            return None

    def _refresh_metadata(self, now: float) -> None:
        self._next_metadata_at = now + self.retry_backoff_s
        try:
            self.cluster.refresh(self._topics)
            self._metadata_stale = False
        except KafkaError as exc:
            log.warning("metadata refresh failed (will retry): %s", exc)

    def _produce(self, node: int, batches: list[ProducerBatch], on_socket: int | None) -> None:
        """Send ``batches`` on the socket that was in use when they were drained.

        A pipelined request that did not reach that socket before it dropped is
        not sent on the next one: the batches before it failed with the old
        socket and wait out their retry backoff, and sending it now would write
        it ahead of them.  It fails too, and all are retried in order.
        """
        try:
            body = self._request_body(batches)
            if self.acks == 0:
                self.cluster.send_only(node, ApiKey.PRODUCE, produce_version(self.compression), body)
                for batch in batches:
                    self._finish(batch, lambda b: b.complete(-1))
            else:
                response = self.cluster.request(node, ApiKey.PRODUCE, produce_version(self.compression), body,
                                                timeout_s=self.request_timeout_ms / 1000.0 + 1.0,
                                                on_socket=on_socket)
                self._handle_response(node, batches, response)
        except (KafkaUnreachableError, KafkaNotSentError) as exc:
            # Never sent, so this try does not count against `retries` (as in Kafka, where
            # only sent requests do); delivery_timeout_ms bounds the wait for the broker.
            for batch in batches:
                batch.attempts -= 1
                self._retry_or_fail(batch, exc)
        except KafkaError as exc:
            for batch in batches:
                self._retry_or_fail(batch, exc)
        except Exception as exc:  # a bug: fail loudly, but never leave futures hanging
            log.exception("producer request to broker %d failed unexpectedly", node)
            for batch in batches:
                self._retry_or_fail(batch, FatalError(ErrorCode.UNKNOWN_SERVER_ERROR, repr(exc)))
        finally:
            left = self._in_flight.pop(node) - 1
            if left:
                self._in_flight[node] = left
            self._wakeup.set()
        self._resolve_finished()

    def _request_body(self, batches: list[ProducerBatch]) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for batch in batches:
            topics.setdefault(batch.tp.topic, []).append(
                {"index": batch.tp.partition, "records": batch.payload(self.compression)})
        return {"transactional_id": None, "acks": self.acks, "timeout_ms": self.request_timeout_ms,
                "topic_data": [{"name": t, "partition_data": p} for t, p in topics.items()]}

    def _handle_response(self, node: int, batches: list[ProducerBatch],
                         response: dict[str, Any]) -> None:
        results = {(t["name"], p["index"]): p for t in response["responses"]
                   for p in t["partition_responses"]}
        for batch in batches:
            result = results.get(batch.tp)
            if result is None:
                self._retry_or_fail(batch, FatalError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"broker {node} did not answer for {batch.tp}"))
            elif result["error_code"] == ErrorCode.NONE:
                # bind now: the callbacks run after the loop, when ``base`` would
                # hold the last partition's offset
                self._finish(batch, lambda b, base=result["base_offset"]: b.complete(base))
            else:
                self._retry_or_fail(batch, error_for(
                    result["error_code"], f"producing to {batch.tp} on broker {node}"))

    def _retry_or_fail(self, batch: ProducerBatch, exc: KafkaError) -> None:
        if exc.needs_metadata_refresh or isinstance(exc, KafkaConnectionError):
            self._metadata_stale = True
        if exc.retriable and batch.attempts <= self.retries and not self._aborted(batch):
            log.info("retrying %d record(s) for %s (attempt %d): %s",
                     batch.count, batch.tp, batch.attempts + 1, exc)
            self._acc.requeue(batch, time.monotonic())
        else:
            self._finish(batch, lambda b: b.fail(exc))

    def _aborted(self, batch: ProducerBatch) -> bool:
        return time.monotonic() - batch.created >= self.delivery_timeout_s

    def _finish(self, batch: ProducerBatch, resolve: Callable[[ProducerBatch], None]) -> None:
        # Release the partition now, but resolve the futures (running user callbacks, which
        # may send or even wait) only after the broker is released: see _resolve_finished.
        self._acc.done(batch)
        self._finished.append((batch, resolve))

    def _resolve_finished(self) -> None:
        while self._finished:
            batch, resolve = self._finished.popleft()
            resolve(batch)
        self._wakeup.set()  # flush() waits until every future is resolved, too

    def _abort(self, exc: KafkaError) -> None:
        self._fail_all(self._acc.abort_all(), exc)

    @staticmethod
    def _fail_all(batches: list[ProducerBatch], exc: KafkaError) -> None:
        for batch in batches:
            batch.fail(exc)
