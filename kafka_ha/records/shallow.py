"""Walk a record buffer entry by entry, reading headers only (no decompression).

An *entry* is one top-level unit of a log: a magic 0/1 message (possibly a
compressed wrapper) or a v2 record batch.  This is the broker's view of its
data: appends, reads, recovery and index building all step over entries
without looking inside them.

>>> from kafka_ha.records.builder import Record, build_v2_batch
>>> buf = build_v2_batch([Record(b"k", b"v")] * 3, base_offset=10, timestamp_ms=5)
>>> [(e.magic, e.first_offset, e.last_offset, e.record_count) for e in iter_entries(buf)]
[(2, 10, 12, 3)]
>>> list(iter_entries(buf[:-1]))          # a partial trailing entry is not yielded
[]
>>> valid_length(buf + buf[:20]) == len(buf)   # the caller learns the valid length
True
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

from .errors import CorruptRecordError
from .format import (ATTRIBUTES_OFFSET, CODEC_MASK, CODEC_NONE, LEGACY_PREFIX, LENGTH,
                     LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V0, MAGIC_V1, MAGIC_V2, V0_KEY_OFFSET,
                     V0_MIN_SIZE, V1_KEY_OFFSET, V1_MIN_SIZE, V1_TIMESTAMP, V1_TIMESTAMP_OFFSET,
                     V2_ATTRIBUTES_OFFSET, V2_HEADER, V2_MIN_BATCH_LENGTH, crc32,
                     crc32c)


class Entry(NamedTuple):
    """Header facts of one entry at ``buf[position:position + size]``."""

    position: int
    size: int                      # total bytes, including the 12-byte offset+size prefix
    magic: int
    first_offset: int | None       # None for a magic 0/1 compressed wrapper
    last_offset: int
    partition_leader_epoch: int    # v2 only, else -1
    max_timestamp: int             # v1/v2, else -1
    record_count: int | None       # None for a magic 0/1 compressed wrapper
    attributes: int = 0
    # v2 only (idempotent producers), else -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK


def _min_size(magic: int) -> int:
    return (V0_MIN_SIZE, V1_MIN_SIZE, V2_MIN_BATCH_LENGTH)[magic]


def iter_entries(buf, start: int = 0) -> Iterator[Entry]:
    """Yield the whole entries of ``buf`` from ``start``; stop at a partial tail.

    Raises :class:`CorruptRecordError` for a size or magic that no valid entry
    can have: then the rest of the buffer cannot be walked at all.
    """
    end = len(buf)
    pos = start
    while pos + LOG_OVERHEAD <= end:
        offset, size = LEGACY_PREFIX.unpack_from(buf, pos)
        if size < V0_MIN_SIZE:
            raise CorruptRecordError(f"entry at position {pos} (offset {offset}) has size {size}, "
                                     f"below the minimum {V0_MIN_SIZE}")
        total = LOG_OVERHEAD + size
        if pos + total > end:
            return                                         # partial trailing entry
        yield read_header(buf, pos)
        pos += total


def read_header(buf, pos: int, position: int | None = None) -> Entry:
    """The :class:`Entry` whose header starts at ``buf[pos]``.

    Needs only the header bytes (``min(entry size, 61)`` of them), not the
    whole entry, so a file scan can step over large entries without reading
    them.  ``position`` is reported instead of ``pos`` when given (the entry's
    position in a file rather than in ``buf``).
    """
    offset, size = LEGACY_PREFIX.unpack_from(buf, pos)
    where = pos if position is None else position
    if size < V0_MIN_SIZE:
        raise CorruptRecordError(f"entry at position {where} (offset {offset}) has size {size}, "
                                 f"below the minimum {V0_MIN_SIZE}")
    magic = buf[pos + MAGIC_OFFSET]
    if magic == MAGIC_V2:
        if size < V2_MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"v2 batch at position {where} has batch length {size}, "
                                     f"below the minimum {V2_MIN_BATCH_LENGTH}")
        (base, _, epoch, _, _, attributes, last_delta, _, max_ts,
         producer_id, producer_epoch, base_sequence, count) = V2_HEADER.unpack_from(buf, pos)
        return Entry(where, LOG_OVERHEAD + size, MAGIC_V2, base, base + last_delta, epoch, max_ts,
                     count, attributes, producer_id, producer_epoch, base_sequence)
    if magic != MAGIC_V0 and magic != MAGIC_V1:
        raise CorruptRecordError(f"entry at position {where} (offset {offset}) has unknown magic {magic}")
    if size < _min_size(magic):
        raise CorruptRecordError(f"magic {magic} message at position {where} (offset {offset}) "
                                 f"has size {size}, below the minimum {_min_size(magic)}")
    attributes = buf[pos + ATTRIBUTES_OFFSET]
    ts = V1_TIMESTAMP.unpack_from(buf, pos + V1_TIMESTAMP_OFFSET)[0] if magic == MAGIC_V1 else -1
    if attributes & CODEC_MASK == CODEC_NONE:
        return Entry(where, LOG_OVERHEAD + size, magic, offset, offset, -1, ts, 1, attributes)
    return Entry(where, LOG_OVERHEAD + size, magic, None, offset, -1, ts, None, attributes)


def valid_length(buf, start: int = 0) -> int:
    """End position of the last whole entry (``start`` if there is none)."""
    end = start
    for entry in iter_entries(buf, start):
        end = entry.end
    return end


def legacy_key_value_bounds(buf, entry: Entry) -> tuple[int, int, int, int]:
    """``(key_start, key_len, value_start, value_len)`` of a magic 0/1 message.

    Lengths are -1 for null.  Raises :class:`CorruptRecordError` if the two
    length fields do not add up to the message size.
    """
    pos = entry.position + (V1_KEY_OFFSET if entry.magic == MAGIC_V1 else V0_KEY_OFFSET)
    end = entry.end
    (key_len,) = LENGTH.unpack_from(buf, pos)
    value_len_pos = pos + 4 + max(key_len, 0)
    if key_len < -1 or value_len_pos + 4 > end:
        raise CorruptRecordError(f"message at position {entry.position} (offset {entry.last_offset}) "
                                 f"has an invalid key length {key_len}")
    (value_len,) = LENGTH.unpack_from(buf, value_len_pos)
    if value_len < -1 or value_len_pos + 4 + max(value_len, 0) != end:
        raise CorruptRecordError(f"message at position {entry.position} (offset {entry.last_offset}) "
                                 f"has key/value lengths {key_len}/{value_len} that do not match its size")
    return pos + 4, key_len, value_len_pos + 4, value_len


def validate_entry(buf, entry: Entry) -> None:
    """Check the CRC and the internal sizes of one entry; raise CorruptRecordError.

    magic 0/1: CRC-32 over magic..end and key/value lengths adding up to the
    size.  v2: CRC-32C over attributes..end, ``lastOffsetDelta == count - 1``
    and a positive count.
    """
    pos, end = entry.position, entry.end
    if entry.magic == MAGIC_V2:
        _, _, _, _, stored, *_ = V2_HEADER.unpack_from(buf, pos)
        if entry.record_count is None or entry.record_count <= 0 or \
                entry.last_offset - entry.first_offset != entry.record_count - 1:
            raise CorruptRecordError(
                f"v2 batch at position {pos} (base offset {entry.first_offset}) has lastOffsetDelta "
                f"{entry.last_offset - entry.first_offset} for {entry.record_count} records")
        actual = crc32c(memoryview(buf)[pos + V2_ATTRIBUTES_OFFSET:end])
    else:
        stored = LENGTH.unpack_from(buf, pos + 12)[0] & 0xFFFFFFFF
        legacy_key_value_bounds(buf, entry)
        actual = crc32(memoryview(buf)[pos + MAGIC_OFFSET:end])
    if stored != actual:
        where = entry.first_offset if entry.magic == MAGIC_V2 else entry.last_offset
        raise CorruptRecordError(f"magic {entry.magic} entry at position {pos} (offset {where}) "
                                 f"has CRC {stored:#010x}, computed {actual:#010x}")
