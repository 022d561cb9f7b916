"""Writing to and reading back a ``__consumer_offsets`` partition.

Writes are one v2 batch handed to the broker's append path as a produce with
acks=-1 would be (the broker passes that path in: ``AppendAcksAll``): on the
leader's log, then a wait until the HW passes it, so a commit that was answered
survives the leader's loss.  Reads replay a partition's log into what
``OffsetsState`` holds, in chunks, yielding to the event loop between them.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from kafka_ha.clock import monotonic_ms
from kafka_ha.coordinator import offsets_records as rec
from kafka_ha.coordinator.placement import OFFSETS_TOPIC
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.primitives import ProtocolError
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.records.errors import RecordsError
from kafka_ha.records.reader import decode_records
from kafka_ha.records.shallow import iter_entries

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 1 << 20
SLICE_MS = 20    # longest stretch of decoding between two yields to the event loop

# What a failed append means to a group client (Kafka's GroupMetadataManager
# maps produce errors the same way): retry elsewhere, or the commit is too big.
_COMMIT_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_FOR_PARTITION: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def client_error(append_error: int) -> int:
    """The error a group client gets for a failed append to the offsets topic."""
    if append_error == ErrorCode.NONE:
        return ErrorCode.NONE
    return _COMMIT_ERRORS.get(append_error, ErrorCode.UNKNOWN_SERVER_ERROR)


# (partition, batch, timeout in seconds) -> the append's error code, after the HW passed it.
AppendAcksAll = Callable[[TopicPartition, bytes, float], int]


def batch_of(records: list[tuple[bytes, bytes | None]]) -> bytes:
    """Key/value records as one batch for an offsets partition."""
    return build_v2_batch([Record(key, value) for key, value in records])


class OffsetsState:
    """Groups and offsets as the log has them: the last record per key wins, a
    tombstone removes."""

    def __init__(self) -> None:
        self.groups: dict[str, dict | None] = {}
        self.offsets: dict[str, dict[tuple[str, int], rec.OffsetValue]] = {}

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        k = rec.decode_key(key)
        if isinstance(k, rec.OffsetKey):
            group_offsets = self.offsets.setdefault(k.group, {})
            if value is None:
                group_offsets.pop((k.topic, k.partition), None)
            else:
                group_offsets[(k.topic, k.partition)] = rec.decode_offset_value(value)
        elif value is None:
            self.groups.pop(k.group, None)
            self.offsets.pop(k.group, None)   # a deleted group's offsets go with it
        else:
            self.groups[k.group] = rec.decode_group_value(value)


def load(hosted: Any, partition: int, still_wanted: Callable[[], bool],
         pause: Callable[[], None]) -> OffsetsState | None:
    """Replay one offsets partition from its log start to its log end; None if the
    partition left (``still_wanted`` turned false) on the way.  A record that does not
    decode is logged and skipped: one bad record must not keep a group's coordinator
    from starting.  ``hosted.get(tp)``: the partition (its ``log``) or None; ``pause()``
    lets the event loop serve I/O between chunks."""
    p = hosted.get(TopicPartition(OFFSETS_TOPIC, partition))
    if p is None:
        return None
    state = OffsetsState()
    log_ = p.log
    position, end = log_.log_start_offset, log_.log_end_offset
    while position < end:
        if not still_wanted():
            return None
        data = log_.read(position, READ_CHUNK_BYTES, max_offset=end).to_bytes()
        if not data:
            break
        sliced_at = monotonic_ms()
        for record in _decode(data, position):
            if monotonic_ms() - sliced_at >= SLICE_MS:
                # A chunk of small commits is thousands of records: decode them in slices.
                pause()
                sliced_at = monotonic_ms()
            try:
                state.apply(record.key, record.value)
            except (ValueError, ProtocolError) as e:
                log.error("Skipping an undecodable record at offset %d of %s-%d: %s",
                          record.offset, OFFSETS_TOPIC, partition, e)
        # The batches' last offsets, not the records': a compacted batch may end in a gap.
        last = max((e.last_offset for e in _entries(data)), default=position - 1)
        if last < position:
            break   # nothing whole fitted: cannot happen below the log end, but never loop
        position = last + 1
        pause()
    return state


def _entries(data: bytes) -> Iterable:
    try:
        yield from iter_entries(memoryview(data))
    except RecordsError:
        return


def _decode(data: bytes, position: int) -> Iterable:
    try:
        yield from decode_records(data, min_offset=position)
    except RecordsError as e:
        log.error("Stopping the load of an offsets partition at a corrupt batch: %s", e)
