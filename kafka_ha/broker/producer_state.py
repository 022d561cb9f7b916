"""Per-partition state of idempotent producers (Kafka's ProducerStateManager, simplified).

For each producer id: the metadata of its last five batches in this partition
(their sequence and offset ranges, all of the producer's current epoch).  The
leader checks each idempotent batch against it before appending
(:func:`check_batch`, a pure decision); leader and followers record every
idempotent batch they append (:meth:`ProducerStates.record`), so a new
leader knows the producers as well as the old one did.

Kafka 2.x semantics, for a batch of producer id ``pid >= 0``:

- its epoch is below the producer's: INVALID_PRODUCER_EPOCH (a fenced producer);
- same epoch, sequence range equal to one of the last five batches: a retry
  of a batch already written -- answered with that batch's offsets, nothing
  appended;
- a new epoch, or a producer this partition has never seen: it must start at
  sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER for a known producer and
  UNKNOWN_PRODUCER_ID for an unknown one (its state may have gone with the
  log's start, and the client knows how to recover from that);
- same epoch: the first sequence must follow the last one (wrapping after
  2**31 - 1), else OUT_OF_ORDER_SEQUENCE_NUMBER.

Transactions are out of scope: there are no control batches, and no epoch bumps
other than what producers' batches carry.
"""
from __future__ import annotations

from collections import deque
from typing import Iterable, NamedTuple

from kafka_ha.protocol.errors import ErrorCode

MAX_CACHED_BATCHES = 5      # Kafka's ProducerStateEntry.NumBatchesToRetain
MAX_SEQUENCE = (1 << 31) - 1
NO_PRODUCER_ID = -1


class ProducerBatch(NamedTuple):
    """The producer fields of one v2 batch header, and its record count."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    timestamp: int = -1     # the batch's max timestamp

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.record_count - 1)


class BatchMetadata(NamedTuple):
    """A batch appended to the log: what a retry of it is answered with."""

    producer_epoch: int
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int = -1


class Decision(NamedTuple):
    """``error`` NONE and ``duplicate`` None: append.  ``duplicate``: answer with its
    offsets and append nothing.  Any other ``error``: refuse the batch."""

    error: int
    duplicate: BatchMetadata | None = None
    message: str = ""


APPEND = Decision(ErrorCode.NONE)


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap to 0 after 2**31 - 1 (Kafka's DefaultRecordBatch.incrementSequence).

    >>> increment_sequence(5, 3), increment_sequence(MAX_SEQUENCE, 1)
    (8, 0)
    """
    if sequence > MAX_SEQUENCE - increment:
        return increment - (MAX_SEQUENCE - sequence) - 1
    return sequence + increment


def check_batch(batches: tuple[BatchMetadata, ...], batch: ProducerBatch) -> Decision:
    """What the leader does with ``batch`` given its producer's cached ``batches``
    (oldest first; empty for a producer this partition does not know).

    >>> check_batch((), ProducerBatch(7, 0, 0, 10)).error.name
    'NONE'
    >>> check_batch((), ProducerBatch(7, 0, 10, 10)).error.name
    'UNKNOWN_PRODUCER_ID'
    >>> last = (BatchMetadata(0, 0, 9, 100, 109),)
    >>> check_batch(last, ProducerBatch(7, 0, 0, 10)).duplicate.first_offset
    100
    >>> check_batch(last, ProducerBatch(7, 0, 11, 1)).error.name
    'OUT_OF_ORDER_SEQUENCE_NUMBER'
    """
    pid = batch.producer_id
    if pid < 0:
        return APPEND
    if not batches:
        if batch.base_sequence != 0:
            return Decision(ErrorCode.UNKNOWN_PRODUCER_ID, message=(
                f"found no record of producer id {pid} in this partition; its first batch "
                f"(epoch {batch.producer_epoch}) has sequence {batch.base_sequence}, not 0"))
        return APPEND
    epoch = batches[-1].producer_epoch
    if batch.producer_epoch < epoch:
        return Decision(ErrorCode.INVALID_PRODUCER_EPOCH, message=(
            f"producer id {pid} wrote with epoch {batch.producer_epoch}, but epoch {epoch} "
            f"has already written to this partition"))
    if batch.producer_epoch != epoch:
        if batch.base_sequence != 0:
            return Decision(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message=(
                f"producer id {pid}: new epoch {batch.producer_epoch} starts at sequence "
                f"{batch.base_sequence}, not 0"))
        return APPEND
    last_sequence = batch.last_sequence
    for cached in batches:
        if cached.first_sequence == batch.base_sequence and cached.last_sequence == last_sequence:
            return Decision(ErrorCode.NONE, cached)
    expected = increment_sequence(batches[-1].last_sequence, 1)
    if batch.base_sequence != expected:
        return Decision(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message=(
            f"producer id {pid} epoch {epoch}: sequence {batch.base_sequence} does not follow "
            f"the last one written, {batches[-1].last_sequence} (expected {expected})"))
    return APPEND


class ProducerStates:
    """The producers of one partition's log: producer id -> its last batches."""

    def __init__(self) -> None:
        self._producers: dict[int, deque[BatchMetadata]] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def batches(self, producer_id: int) -> tuple[BatchMetadata, ...]:
        return tuple(self._producers.get(producer_id, ()))

    def last_batches(self) -> Iterable[tuple[int, BatchMetadata]]:
        """Each producer id and its last batch (what a snapshot keeps)."""
        return ((pid, entry[-1]) for pid, entry in self._producers.items())

    def load(self, producer_id: int, last: BatchMetadata) -> None:
        """A producer as a snapshot remembers it: its last batch only."""
        self._producers[producer_id] = deque((last,), maxlen=MAX_CACHED_BATCHES)

    def check_all(self, batches: list[ProducerBatch]) -> Decision:
        """The decision for a record set's batches, taken in order as if each earlier
        one were appended: the first error refuses them all, and the first duplicate
        answers for them all (nothing is appended), as Kafka 2.x does."""
        pending: dict[int, tuple[BatchMetadata, ...]] = {}
        for batch in batches:
            if batch.producer_id < 0:
                continue
            cached = pending.get(batch.producer_id, self.batches(batch.producer_id))
            decision = check_batch(cached, batch)
            if decision is not APPEND:
                return decision
            # Offsets are not known yet: the checks that follow use sequences only.
            pending[batch.producer_id] = _with_batch(cached, _metadata(batch, -1))
        return APPEND

    def record(self, batch: ProducerBatch, first_offset: int) -> None:
        """An idempotent batch was appended at ``first_offset`` (as leader or follower)."""
        if batch.producer_id < 0:
            return
        entry = self._producers.get(batch.producer_id)
        if entry is None or (entry and entry[-1].producer_epoch != batch.producer_epoch):
            # A new epoch: its sequences start over, the old epoch's batches are no retries.
            entry = self._producers[batch.producer_id] = deque(maxlen=MAX_CACHED_BATCHES)
        entry.append(_metadata(batch, first_offset))

    def record_all(self, appended: Iterable[tuple[ProducerBatch, int]]) -> None:
        for batch, first_offset in appended:
            self.record(batch, first_offset)

    def expire(self, now_ms: int, max_idle_ms: int) -> int:
        """Forget the producers whose last batch is ``max_idle_ms`` old or older (by its
        timestamp; one without a timestamp stays); returns how many went.  A forgotten
        producer's next batch gets UNKNOWN_PRODUCER_ID unless it starts at sequence 0.

        >>> states = ProducerStates()
        >>> states.record(ProducerBatch(1, 0, 0, 1, timestamp=1000), 0)
        >>> states.record(ProducerBatch(2, 0, 0, 1, timestamp=5000), 1)
        >>> states.expire(now_ms=6000, max_idle_ms=5000), len(states)
        (1, 1)
        """
        idle = [pid for pid, entry in self._producers.items()
                if 0 <= entry[-1].timestamp <= now_ms - max_idle_ms]
        for pid in idle:
            del self._producers[pid]
        return len(idle)

    def truncate(self, log_end_offset: int) -> bool:
        """Forget the batches at or beyond ``log_end_offset`` (the log was truncated).

        Returns False if that leaves a producer without any batch: what it wrote
        before them is no longer cached, and the state must be rebuilt from the
        log.  Otherwise each producer keeps its batches below the new end (its
        last sequence and epoch are right again; fewer retries are recognized
        until it has written five more batches).
        """
        for pid, entry in list(self._producers.items()):
            if entry[-1].last_offset < log_end_offset:
                continue
            kept = [m for m in entry if m.last_offset < log_end_offset]
            if not kept:
                return False
            self._producers[pid] = deque(kept, maxlen=MAX_CACHED_BATCHES)
        return True


def _metadata(batch: ProducerBatch, first_offset: int) -> BatchMetadata:
    return BatchMetadata(batch.producer_epoch, batch.base_sequence, batch.last_sequence,
                         first_offset, first_offset + batch.record_count - 1, batch.timestamp)


def _with_batch(cached: tuple[BatchMetadata, ...], new: BatchMetadata) -> tuple[BatchMetadata, ...]:
    if cached and cached[-1].producer_epoch != new.producer_epoch:
        cached = ()
    return (cached + (new,))[-MAX_CACHED_BATCHES:]
