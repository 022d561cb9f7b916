"""Validate produce and replication payloads and assign offsets (broker side).

:func:`assign_offsets` is the leader's append path.  It follows the rewrite
table below (Kafka's ``LogValidator``): batches are opaque
except where the format forces work:

==================  ===============================================================
magic 0/1, plain    each entry's offset field, in place (no CRC covers it)
magic 0, compressed decompress, absolute inner offsets, recompress, new wrapper CRC
magic 1, compressed decompress only to count n; wrapper offset = absolute last offset.
                    Inner offsets must be relative 0..n-1 and the wrapper CreateTime,
                    else the wrapper is rebuilt that way (as Kafka does)
magic 2             baseOffset and partitionLeaderEpoch in place (outside the CRC)
==================  ===============================================================

Every entry's CRC is checked first; nothing is returned unless all pass.  The
records inside each v2 batch are then walked (``v2_check``), decompressing a
compressed batch no further than ``max.message.bytes``: a CRC proves only that
the bytes are the producer's, not that its counts and lengths are true.
:func:`validate_follower_records` is the follower's path: offsets are already
assigned, so only CRCs and contiguity are checked.

>>> from kafka_ha.records.builder import Record, build_v2_batch
>>> a = assign_offsets(build_v2_batch([Record(None, b"x")] * 4, timestamp_ms=7), 100, 3, 1 << 20)
>>> a.first_offset, a.last_offset, a.count, a.max_timestamp, a.shallow_count
(100, 103, 4, 7, 1)
>>> next(iter_entries(a.buffer))[3:6]
(100, 103, 3)
"""
from __future__ import annotations

from typing import NamedTuple

from .builder import encode_legacy_message
from .compression import compress, decompress
from .errors import CorruptRecordError, OffsetMismatchError, RecordTooLargeError, UnsupportedCompressionError
from .format import (CODEC_MASK, CODEC_NAMES, CODEC_NONE, CODEC_ZSTD, CONTROL_MASK,
                     MAGIC_V1, MAGIC_V2, OFFSET_FIELD, PARTITION_LEADER_EPOCH_OFFSET,
                     TIMESTAMP_TYPE_MASK, V2_EPOCH, V2_HEADER_SIZE)
from .shallow import Entry, iter_entries, legacy_key_value_bounds, validate_entry
from .v2_check import check_v2_records


class Assigned(NamedTuple):
    buffer: bytearray | bytes      # the entries with their offsets assigned, ready to write
    first_offset: int
    last_offset: int
    count: int                     # records (inner messages of compressed wrappers count)
    max_timestamp: int
    shallow_count: int             # top-level entries


class FollowerRecords(NamedTuple):
    valid_bytes: int               # whole entries; a partial trailing entry is dropped
    first_offset: int
    last_offset: int               # first_offset - 1 when nothing is valid
    max_timestamp: int
    shallow_count: int
    epochs: list                   # [(partition_leader_epoch, start_offset)] where v2 epochs change


def _checked_entries(buf, max_batch_bytes: int | None) -> list[Entry]:
    """All entries of ``buf``, CRC-checked; the buffer must hold whole entries only."""
    entries = list(iter_entries(buf))
    end = entries[-1].end if entries else 0
    if end != len(buf):
        raise CorruptRecordError(f"record set of {len(buf)} bytes ends with a truncated entry "
                                 f"at position {end}")
    for entry in entries:
        validate_entry(buf, entry)
        if max_batch_bytes is not None and entry.size > max_batch_bytes:
            raise RecordTooLargeError(f"entry at position {entry.position} is {entry.size} bytes, "
                                      f"larger than the maximum {max_batch_bytes}")
    return entries


def _check_codec(entry: Entry, allow_zstd: bool) -> None:
    codec = entry.codec
    if codec not in CODEC_NAMES or (codec == CODEC_ZSTD and (entry.magic < MAGIC_V2 or not allow_zstd)):
        # zstd: Kafka rejects it below Produce v7 (KIP-110); we advertise Produce v0-2.
        raise UnsupportedCompressionError(f"entry at position {entry.position}: compression codec "
                                          f"{codec} is not supported for magic {entry.magic}")
    if entry.magic == MAGIC_V2 and entry.attributes & CONTROL_MASK:
        raise CorruptRecordError(f"batch at position {entry.position}: clients may not write control batches")


def assign_offsets(records, next_offset: int, leader_epoch: int, max_batch_bytes: int,
                   allow_zstd: bool = False) -> Assigned:
    """Assign offsets from ``next_offset`` to a producer's record set (see module doc).

    Raises :class:`CorruptRecordError` (empty, truncated, bad CRC or sizes),
    :class:`RecordTooLargeError`, :class:`UnsupportedCompressionError`.
    """
    buf = memoryview(records)
    if not len(buf):
        raise CorruptRecordError("empty record set")
    entries = _checked_entries(buf, max_batch_bytes)
    offset, count, max_ts = next_offset, 0, -1
    plan = []              # (entry, replacement bytes or None, offset to patch in or None)
    for entry in entries:
        _check_codec(entry, allow_zstd)
        if entry.magic == MAGIC_V2:
            _check_v2_batch(buf, entry, max_batch_bytes)
            plan.append((entry, None, offset))
            n, ts = entry.record_count, entry.max_timestamp
        elif entry.codec == CODEC_NONE:
            plan.append((entry, None, offset))
            n, ts = 1, entry.max_timestamp
        else:
            replacement, n, ts = _assign_legacy_compressed(buf, entry, offset, max_batch_bytes)
            plan.append((entry, replacement, None if replacement else offset + n - 1))
        offset += n
        count += n
        max_ts = max(max_ts, ts)
    return Assigned(_apply(buf, plan, leader_epoch), next_offset, offset - 1, count, max_ts, len(entries))


def _check_v2_batch(buf, entry: Entry, max_batch_bytes: int) -> None:
    records = buf[entry.position + V2_HEADER_SIZE:entry.end]
    if entry.codec != CODEC_NONE:
        records = decompress(entry.codec, records, MAGIC_V2, max_bytes=max_batch_bytes)
    check_v2_records(records, entry.record_count, f"batch at position {entry.position}")


def _apply(buf, plan, leader_epoch: int) -> bytearray:
    if all(replacement is None for _, replacement, _ in plan):
        out = bytearray(buf)                       # one copy; patches go in place
        positions = [entry.position for entry, _, _ in plan]
    else:
        out, positions = bytearray(), []
        for entry, replacement, _ in plan:
            positions.append(len(out))
            out += replacement if replacement is not None else buf[entry.position:entry.end]
    for pos, (entry, _, new_offset) in zip(positions, plan):
        if new_offset is None:
            continue
        OFFSET_FIELD.pack_into(out, pos, new_offset)
        if entry.magic == MAGIC_V2:
            V2_EPOCH.pack_into(out, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
    return out


def inner_entries(buf, wrapper: Entry, max_bytes: int | None = None) -> tuple[bytes, list[Entry]]:
    """Decompress a magic 0/1 wrapper: ``(inner_buffer, inner_entries)``, all CRC-checked;
    more than ``max_bytes`` inside raises :class:`RecordTooLargeError`."""
    _, _, value_start, value_len = legacy_key_value_bounds(buf, wrapper)
    if value_len < 0:
        raise CorruptRecordError(f"compressed wrapper at position {wrapper.position} has a null value")
    inner = decompress(wrapper.codec, buf[value_start:value_start + value_len], wrapper.magic,
                       max_bytes=max_bytes)
    entries = _checked_entries(inner, None)
    if not entries:
        raise CorruptRecordError(f"compressed wrapper at position {wrapper.position} is empty")
    for entry in entries:
        if entry.magic != wrapper.magic or entry.codec != CODEC_NONE:
            raise CorruptRecordError(
                f"compressed wrapper at position {wrapper.position} (magic {wrapper.magic}) holds an "
                f"inner message of magic {entry.magic} with codec {entry.codec}")
    return inner, entries


def _assign_legacy_compressed(buf, wrapper: Entry, next_offset: int, max_bytes: int):
    """``(replacement wrapper or None, n, max_timestamp)`` for a magic 0/1 wrapper."""
    inner, entries = inner_entries(buf, wrapper, max_bytes)
    n = len(entries)
    max_ts = max(e.max_timestamp for e in entries)
    if wrapper.magic == MAGIC_V1:
        relative = all(e.last_offset == i for i, e in enumerate(entries))
        if relative and not wrapper.attributes & TIMESTAMP_TYPE_MASK:
            return None, n, max_ts
        first_inner = 0
    else:
        first_inner = next_offset          # magic 0 stores absolute inner offsets
    rewritten = bytearray(inner)
    for i, entry in enumerate(entries):
        OFFSET_FIELD.pack_into(rewritten, entry.position, first_inner + i)
    value = compress(wrapper.codec, bytes(rewritten), wrapper.magic)
    attributes = wrapper.attributes & CODEC_MASK               # CreateTime
    wrapper_ts = max_ts if wrapper.magic == MAGIC_V1 else -1
    return encode_legacy_message(next_offset + n - 1, wrapper.magic, attributes, None, value,
                                 wrapper_ts), n, max_ts


def validate_follower_records(buf, expected_first_offset: int, allow_gaps: bool = False) -> FollowerRecords:
    """CRC-check replicated entries and check they continue the log at ``expected_first_offset``.

    With ``allow_gaps`` an entry may start beyond the previous one's end (Kafka's
    rule for followers): compaction removes whole batches from a leader's log, and
    a follower that fetches across them sees the gap; ``first_offset`` is then the
    first entry's own first offset.

    A partial trailing entry is ignored (``valid_bytes`` says where the whole
    entries end).  Raises :class:`CorruptRecordError` or
    :class:`OffsetMismatchError`.  A compressed magic 0/1 wrapper only knows
    its last offset, so for it only "beyond the previous entry" is checked.
    """
    view = memoryview(buf)
    entries = list(iter_entries(view))
    prev_last, max_ts, epochs = expected_first_offset - 1, -1, []
    for entry in entries:
        validate_entry(view, entry)
        first = entry.first_offset
        gap_ok = allow_gaps and first is not None and first > prev_last
        if (first is not None and first != prev_last + 1 and not gap_ok) or entry.last_offset <= prev_last:
            raise OffsetMismatchError(
                f"entry at position {entry.position} covers offsets {first}..{entry.last_offset}, "
                f"expected to start at {prev_last + 1}")
        if entry.magic == MAGIC_V2 and (not epochs or epochs[-1][0] != entry.partition_leader_epoch):
            epochs.append((entry.partition_leader_epoch, first))
        prev_last = entry.last_offset
        max_ts = max(max_ts, entry.max_timestamp)
    valid = entries[-1].end if entries else 0
    first_offset = expected_first_offset
    if allow_gaps and entries and entries[0].first_offset is not None:
        first_offset = entries[0].first_offset
    return FollowerRecords(valid, first_offset, prev_last, max_ts, len(entries), epochs)
