"""The leader's timestamp rules for appended records (Kafka's LogValidator):
``message.timestamp.type`` and ``message.timestamp.difference.max.ms``.

- CreateTime (the default): the producer's timestamps are kept; a record whose
  timestamp is further than ``message.timestamp.difference.max.ms`` from the
  leader's clock is refused with INVALID_TIMESTAMP.  The check reads every
  record of a v2 batch (decompressing it), and a magic 1 entry's timestamp (for a
  compressed one, its wrapper's); with no bound set, the default, it reads nothing.
- LogAppendTime: the leader stamps its clock.  A v2 batch gets the time as its
  max_timestamp and the timestamp-type attribute bit set (its records keep
  their deltas, which readers then ignore); a magic 1 entry gets the time and
  the bit too.  Both fields are under the entry's CRC, so it is recomputed.

>>> from kafka_ha.records.builder import Record, build_v2_batch
>>> from kafka_ha.records.reader import decode_records
>>> buf = bytearray(build_v2_batch([Record(None, b"a"), Record(None, b"b")], timestamp_ms=5))
>>> stamp_log_append_time(buf, 1234)
>>> [(r.timestamp_ms, r.timestamp_type) for r in decode_records(buf)]
[(1234, 1), (1234, 1)]
>>> timestamp_problem(build_v2_batch([Record(None, b"a")], timestamp_ms=5), 10_000, 1000)
'timestamp 5 of the entry at position 0 is more than 1000 ms away from the broker time 10000'
"""
from __future__ import annotations

import struct

from .format import (CRC_OFFSET, MAGIC_V0, MAGIC_V1, MAGIC_V2, MAX_TIMESTAMP_OFFSET,
                     TIMESTAMP_TYPE_MASK, V1_TIMESTAMP, V1_TIMESTAMP_OFFSET, V2_ATTRIBUTES_OFFSET,
                     V2_CRC_OFFSET, crc32, crc32c)
from .errors import InvalidTimestampError
from .reader import decode_records
from .shallow import iter_entries

CREATE_TIME_NAME, LOG_APPEND_TIME_NAME = "CreateTime", "LogAppendTime"
TIMESTAMP_TYPES = (CREATE_TIME_NAME, LOG_APPEND_TIME_NAME)
_V2_ATTRIBUTES = struct.Struct(">h")
_U32 = struct.Struct(">I")
_LEGACY_ATTRIBUTES_OFFSET = 17   # magic 0/1: i8 attributes after crc and magic
_NO_BOUND = (1 << 63) - 1         # message.timestamp.difference.max.ms's default


def timestamp_problem(buf, now_ms: int, max_difference_ms: int) -> str | None:
    """Why a CreateTime record set breaks ``message.timestamp.difference.max.ms``, or None.
    Magic 0 entries have no timestamp and always pass; without a bound (Kafka's default,
    Long.MAX_VALUE) nothing is read."""
    if max_difference_ms >= _NO_BOUND:
        return None
    for entry in iter_entries(memoryview(buf)):
        if entry.magic == MAGIC_V0:
            continue
        stamps = (entry.max_timestamp,)
        if entry.magic == MAGIC_V2:
            # Every record's, as Kafka's LogValidator checks: one between the first and the
            # largest may be the one out of bounds.
            stamps = (r.timestamp_ms for r in decode_records(memoryview(buf)[entry.position:entry.end],
                                                             check_crc=False))
        for ts in stamps:
            if abs(ts - now_ms) > max_difference_ms:
                return (f"timestamp {ts} of the entry at position {entry.position} is more than "
                        f"{max_difference_ms} ms away from the broker time {now_ms}")
    return None


def stamp_log_append_time(buf: bytearray, now_ms: int) -> None:
    """Give every magic 1/2 entry of ``buf`` the timestamp ``now_ms`` as LogAppendTime, in place."""
    view = memoryview(buf)
    for entry in list(iter_entries(view)):
        pos = entry.position
        if entry.magic == MAGIC_V2:
            attributes = _V2_ATTRIBUTES.unpack_from(buf, pos + V2_ATTRIBUTES_OFFSET)[0]
            _V2_ATTRIBUTES.pack_into(buf, pos + V2_ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
            V1_TIMESTAMP.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
            _U32.pack_into(buf, pos + V2_CRC_OFFSET, crc32c(view[pos + V2_ATTRIBUTES_OFFSET:entry.end]))
        elif entry.magic == MAGIC_V1:
            buf[pos + _LEGACY_ATTRIBUTES_OFFSET] |= TIMESTAMP_TYPE_MASK
            V1_TIMESTAMP.pack_into(buf, pos + V1_TIMESTAMP_OFFSET, now_ms)
            _U32.pack_into(buf, pos + CRC_OFFSET, crc32(view[pos + CRC_OFFSET + 4:entry.end]))
    view.release()


def apply_timestamp_type(buffer: bytearray, max_timestamp: int, log_append_time: bool,
                         max_difference_ms: int, now_ms: int) -> tuple[int, int]:
    """The leader's step after assigning offsets: ``(max_timestamp, log_append_time)`` of the
    appended set, the latter -1 for CreateTime (the Produce response's log_append_time_ms).
    Raises :class:`InvalidTimestampError` for a CreateTime set out of bounds."""
    if log_append_time:
        stamp_log_append_time(buffer, now_ms)
        return now_ms, now_ms
    problem = timestamp_problem(buffer, now_ms, max_difference_ms)
    if problem:
        raise InvalidTimestampError(problem)
    return max_timestamp, -1
