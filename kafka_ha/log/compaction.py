"""Log compaction's decisions, and the rewriting of one batch: pure functions.

A compacted log keeps, for every key, at least its last record.  The cleaner
(:mod:`.cleaner`) works on a log in passes, Kafka's way:

- The *clean* section ``[log start, first dirty)`` was compacted by an earlier
  pass; the *dirty* section ``[first dirty, first uncleanable)`` was not.  The
  first uncleanable offset is a segment boundary: the active segment, anything
  at or above the high watermark, and segments holding records younger than
  ``min.compaction.lag.ms`` are never touched (:func:`first_uncleanable_offset`).
- The log to clean is the one with the largest dirty ratio
  ``dirty / (clean + dirty)`` at or above its ``min.cleanable.dirty.ratio``
  (:func:`choose_log_to_clean`).
- A map ``key -> last offset`` is built over the dirty section; then every
  segment below the first uncleanable offset is rewritten keeping a record
  only if no later record of its key is in the map (:func:`keep_record`).
- A tombstone (a null value) is kept by the pass that first sees it, so that
  consumers reading the dirty section learn of the delete; it goes in a later
  pass once ``delete.retention.ms`` has passed since a pass cleaned past it
  (:func:`tombstone_horizon`, KIP-534's rule, on the broker's clock).

Rewriting keeps every kept record at its offset, and a batch's leader epoch,
attributes, timestamps and producer fields (:func:`rewrite_batch`).  Offsets
of removed records leave gaps, which followers and consumers step over (Kafka's
rule).  Control batches and magic 0/1 entries are kept whole.
"""
from __future__ import annotations

import struct
from typing import Callable, NamedTuple, Sequence

from kafka_ha.records.compression import compress, decompress
from kafka_ha.records.format import (CONTROL_MASK, LOG_OVERHEAD, MAGIC_V2, TIMESTAMP_TYPE_MASK,
                                     V2_ATTRIBUTES_OFFSET, V2_CRC_OFFSET, V2_HEADER, V2_HEADER_SIZE, crc32c)
from kafka_ha.records.errors import CorruptRecordError
from kafka_ha.records.shallow import Entry, iter_entries, validate_entry
from kafka_ha.records.varint import decode_varint, encode_varint

# What one key costs in the cleaner's offset map besides the key's bytes: a Python
# bytes object, an int and a dict slot (Kafka's map, of 16-byte hashes, costs 24 bytes;
# ours holds the keys themselves, so that no hash collision can ever drop a record).
MAP_ENTRY_OVERHEAD = 100


def map_entry_cost(key: bytes) -> int:
    """Bytes of log.cleaner.dedupe.buffer.size that ``key`` takes in the offset map.

    >>> map_entry_cost(b"12345")
    105
    """
    return len(key) + MAP_ENTRY_OVERHEAD


class LogToClean(NamedTuple):
    """A log's cleanable state: bytes in its clean and dirty sections, and its threshold."""

    key: object                    # the caller's handle (a TopicPartition)
    clean_bytes: int
    dirty_bytes: int
    min_ratio: float

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def choose_log_to_clean(candidates: Sequence[LogToClean]) -> LogToClean | None:
    """The dirtiest log with some dirty bytes and a ratio at or above its threshold.

    >>> a, b = LogToClean("a", 100, 100, 0.5), LogToClean("b", 10, 90, 0.95)
    >>> choose_log_to_clean([a, b]).key, choose_log_to_clean([a, LogToClean("c", 0, 0, 0.0)]).key
    ('a', 'a')
    >>> choose_log_to_clean([LogToClean("d", 60, 40, 0.5)]) is None
    True
    """
    ready = [c for c in candidates if c.dirty_bytes > 0 and c.ratio >= c.min_ratio]
    return max(ready, key=lambda c: c.ratio, default=None)


def first_uncleanable_offset(bases: Sequence[int], newest_timestamp: Callable[[int], int],
                             high_watermark: int, now_ms: int, min_lag_ms: int) -> int:
    """The base offset of the first segment the cleaner must leave alone.

    ``bases`` are every segment's base offset, the active one last; segment
    ``i`` may be cleaned if it is closed, wholly below the high watermark
    (the next base <= HW) and, with a compaction lag, its newest record is at
    least ``min_lag_ms`` old (``newest_timestamp(i)``, asked only then).

    >>> first_uncleanable_offset([0, 10, 20, 30], lambda i: 0, 25, 0, 0)   # 20.. holds 25
    20
    >>> first_uncleanable_offset([0, 10, 20, 30], lambda i: [5, 50, 0][i], 99, 60, 20)
    10
    >>> first_uncleanable_offset([7], lambda i: 0, 99, 0, 0)                # only the active one
    7
    """
    end = 0
    while end + 1 < len(bases) and bases[end + 1] <= high_watermark and \
            (min_lag_ms <= 0 or now_ms - newest_timestamp(end) >= min_lag_ms):
        end += 1
    return bases[end]


def group_segments(bases: Sequence[int], sizes: Sequence[int], count: int, max_bytes: int,
                   max_span: int = 2**31 - 1) -> list[tuple[int, int]]:
    """Runs ``[i, j)`` of the first ``count`` segments, each cleaned into one segment:
    consecutive segments while their sizes add up to at most ``max_bytes`` (segment.bytes)
    and their offsets span at most ``max_span`` (the index holds 32-bit relative offsets).
    Compacted segments shrink, so later passes merge what earlier ones left small.

    >>> group_segments([0, 10, 20, 30, 40], [60, 30, 50, 20, 0], 4, 100)
    [(0, 2), (2, 4)]
    >>> group_segments([0, 10, 20], [1, 1, 0], 2, 100, max_span=15)
    [(0, 1), (1, 2)]
    """
    groups, i = [], 0
    while i < count:
        j, total = i + 1, sizes[i]
        while j < count and total + sizes[j] <= max_bytes and bases[j + 1] - 1 - bases[i] <= max_span:
            total += sizes[j]
            j += 1
        groups.append((i, j))
        i = j
    return groups


def section_sizes(bases: Sequence[int], sizes: Sequence[int], first_dirty: int,
                  uncleanable: int) -> tuple[int, int]:
    """``(clean, dirty)`` bytes below ``uncleanable``: a segment ending at or below
    ``first_dirty`` is clean, one ending above it dirty.

    >>> section_sizes([0, 10, 20, 30], [100, 100, 100, 5], first_dirty=10, uncleanable=30)
    (100, 200)
    """
    clean = dirty = 0
    for i in range(len(bases) - 1):
        if bases[i + 1] > uncleanable:
            break
        if bases[i + 1] <= first_dirty:
            clean += sizes[i]
        else:
            dirty += sizes[i]
    return clean, dirty


def tombstone_horizon(passes: Sequence[tuple[int, int]], now_ms: int, delete_retention_ms: int) -> int:
    """Below which offset tombstones may go: the furthest end offset of a pass that ended
    at least ``delete_retention_ms`` ago (``passes``: ``(end offset, time)`` of a log's
    passes since the broker started, or since the log was last truncated; 0 if none).

    Segment modification times would not do: merged segments take the newest one's,
    so while data keeps coming the tombstones of a small compacted log would never
    age (Kafka's KAFKA-8522).

    >>> tombstone_horizon([(100, 1_000), (250, 5_000), (400, 9_000)], 10_000, 5_000)
    250
    >>> tombstone_horizon([(100, 8_000)], 10_000, 5_000)
    0
    """
    return max((end for end, at in passes if at <= now_ms - delete_retention_ms), default=0)


def keep_record(offset: int, key: bytes | None, tombstone: bool, latest_offset: int | None,
                tombstone_expired: bool) -> bool:
    """Whether a compacting pass keeps a record.

    ``latest_offset``: the key's last offset in the dirty section (None if it
    has none there).  Keyless records are kept: Kafka refuses them for
    compacted topics, but a log compacted after its policy changed may hold some.

    >>> keep_record(5, b"k", False, 9, False), keep_record(9, b"k", False, 9, False)
    (False, True)
    >>> keep_record(3, b"k", True, None, False), keep_record(3, b"k", True, None, True)
    (True, False)
    >>> keep_record(3, None, False, None, True)
    True
    """
    if key is None:
        return True
    if latest_offset is not None and offset < latest_offset:
        return False
    return not (tombstone and tombstone_expired)


class BatchRecord(NamedTuple):
    """One record of a v2 batch: its absolute offset, key, whether its value is null,
    and what a rewritten batch needs to encode it again under another base offset."""

    offset: int
    key: bytes | None
    tombstone: bool
    attributes: int
    timestamp_delta: int
    rest: memoryview               # key, value and headers as encoded (a view of the batch body)


def _parse(body, base: int, count: int, full: bool) -> list:
    """The records of a decompressed batch body: BatchRecords, or with ``full=False``
    only ``(key, offset)`` of the keyed ones (the offset map needs no more)."""
    decode = decode_varint
    view = memoryview(body)
    records, pos, size = [], 0, len(body)
    for _ in range(count):
        length, pos = decode(body, pos)
        end = pos + length
        if length < 1 or end > size:
            raise CorruptRecordError(f"record of {length} bytes overruns the batch at offset {base}")
        attributes = body[pos]
        timestamp_delta, pos = decode(body, pos + 1)
        offset_delta, rest = decode(body, pos)
        key_len, pos = decode(body, rest)
        key = body[pos:pos + key_len] if key_len >= 0 else None
        if full:
            value_len, _ = decode(body, pos + max(key_len, 0))
            records.append(BatchRecord(base + offset_delta, key, value_len < 0, attributes, timestamp_delta,
                                       view[rest:end]))
        elif key is not None:
            records.append((key, base + offset_delta))
        pos = end
    return records


def _body(buf, entry: Entry) -> tuple[bytes, int]:
    """The decompressed records of a batch, after its CRC is checked: the cleaner must
    neither trust a damaged batch's keys nor give its data a fresh, valid CRC."""
    validate_entry(buf, entry)
    count = V2_HEADER.unpack_from(buf, entry.position)[-1]
    return decompress(entry.codec, memoryview(buf)[entry.position + V2_HEADER_SIZE:entry.end]), count


def batch_records(buf, entry: Entry) -> list[BatchRecord]:
    """The records of the v2 batch ``entry`` in ``buf`` (decompressed as needed)."""
    body, count = _body(buf, entry)
    return _parse(body, entry.first_offset, count, True)


def compactable(entry: Entry) -> bool:
    """v2 data batches are compacted record by record; other entries are kept whole."""
    return entry.magic == MAGIC_V2 and not entry.attributes & CONTROL_MASK


def keyed_offsets(buf, entry: Entry) -> list[tuple[bytes, int]]:
    """``(key, offset)`` of every keyed record of a compactable entry, for the offset map."""
    if not compactable(entry):
        return []
    body, count = _body(buf, entry)
    return _parse(body, entry.first_offset, count, False)


def require_keys(buf, where: str) -> None:
    """Raise CorruptRecordError (CORRUPT_MESSAGE to the producer) if a record set for a
    compacted log holds a data record without a key, as Kafka does: compaction could
    never replace or delete it."""
    for entry in iter_entries(buf):
        if compactable(entry):
            body, count = _body(buf, entry)
            if len(_parse(body, entry.first_offset, count, False)) < count:
                raise CorruptRecordError(f"Compacted topic cannot accept message without key in topic "
                                         f"partition {where}.")


def contiguous_runs(records: Sequence[BatchRecord]) -> list[list[BatchRecord]]:
    """Kept records split where offsets jump.

    >>> [[r.offset for r in run] for run in contiguous_runs(
    ...     [BatchRecord(o, None, False, 0, 0, b"") for o in (3, 4, 6, 9, 10)])]
    [[3, 4], [6], [9, 10]]
    """
    runs: list[list[BatchRecord]] = []
    for record in records:
        if runs and runs[-1][-1].offset + 1 == record.offset:
            runs[-1].append(record)
        else:
            runs.append([record])
    return runs


def rewrite_batch(buf, entry: Entry, keep: Callable[[BatchRecord], bool]) -> tuple[bytes | None, bool]:
    """``(bytes, changed)``: the entry with only the records ``keep`` accepts.

    An entry that keeps all (or is not compactable) comes back as it was; one
    that keeps none as None.  Otherwise each run of consecutive kept offsets
    becomes a batch of its own, based at the run's first offset: every batch
    stays dense (``lastOffsetDelta == count - 1``), which this broker's
    validation and old clients insist on, and every record keeps its offset.
    The runs keep the batch's leader epoch, attributes (codec, timestamp type,
    transactional flag), base timestamp and producer id and epoch; the base
    sequence moves with the run's first offset, as the producer numbered them.
    """
    original = bytes(memoryview(buf)[entry.position:entry.end])
    if not compactable(entry):
        return original, False
    records = batch_records(buf, entry)
    kept = [r for r in records if keep(r)]
    if len(kept) == len(records):
        return original, False
    if not kept:
        return None, True
    (base, _, epoch, magic, _, attributes, _, base_ts, max_ts,
     producer_id, producer_epoch, base_sequence, _) = V2_HEADER.unpack_from(buf, entry.position)
    batches = []
    for run in contiguous_runs(kept):
        first = run[0].offset
        body = b"".join(_encode(r, r.offset - first) for r in run)
        body = compress(entry.codec, body, MAGIC_V2)
        run_max_ts = max_ts if attributes & TIMESTAMP_TYPE_MASK else \
            base_ts + max(r.timestamp_delta for r in run)
        sequence = base_sequence + (first - base) if base_sequence >= 0 else base_sequence
        header = bytearray(V2_HEADER.pack(first, V2_HEADER_SIZE - LOG_OVERHEAD + len(body), epoch, magic, 0,
                                          attributes, len(run) - 1, base_ts, run_max_ts, producer_id,
                                          producer_epoch, sequence, len(run)))
        struct.pack_into(">I", header, V2_CRC_OFFSET, crc32c(bytes(header[V2_ATTRIBUTES_OFFSET:]) + body))
        batches.append(bytes(header) + body)
    return b"".join(batches), True


def _encode(record: BatchRecord, offset_delta: int) -> bytes:
    body = b"".join((bytes((record.attributes,)), encode_varint(record.timestamp_delta),
                     encode_varint(offset_delta), record.rest))
    return encode_varint(len(body)) + body
