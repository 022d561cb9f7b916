"""Down-conversion of fetched log data for readers of an older message format.

Format promises of the Fetch versions: Fetch v0/v1 readers get magic 0, v2/v3
readers magic <= 1, v4+ readers magic 2.  The log stores v2 batches only
(:mod:`.convert`), so a consumer fetching with v0-v3 gets its data rewritten
here, as Kafka's ``RecordsUtil.downConvert`` does.  Followers never come here:
they always get the log's bytes.

Per entry of the fetched data, in log order:

- an entry whose magic is at most the target passes through unchanged;
- a control batch (transaction marker) is dropped;
- an uncompressed batch becomes one legacy message per record, with its
  absolute offset.  Records below the fetch offset are dropped (a legacy
  reader expects no earlier offsets from an uncompressed set; librdkafka
  relies on it);
- a compressed batch becomes one compressed wrapper with the same codec
  holding all its records.  magic 1: inner offsets relative (0..n-1, gaps
  kept), wrapper offset = absolute last offset; magic 0: absolute inner
  offsets (Kafka never assigns magic 0 offsets in place).  zstd has no legacy form:
  :class:`UnsupportedCompressionError` (Kafka answers
  UNSUPPORTED_COMPRESSION_TYPE to such readers too);
- keys, values and (magic 1) timestamps and the timestamp type are kept.  A
  LogAppendTime batch gives every message and the wrapper its max timestamp
  and bit 3 of the attributes, as Kafka's builder does.  Headers are dropped:
  legacy messages cannot carry them (Kafka drops them too).

Size: conversion may grow the data (a legacy message has ~25 more bytes of
overhead than a v2 record).  The result stops before the first converted
entry that would take it past ``max_bytes`` (the caller passes the size of
the data it read, i.e. what the fetch limits allowed), except that the first
entry is always included so that the reader can make progress: the answer is
at most ``max(max_bytes, size of its first entry)``, Kafka's bound for
down-converted data (``LazyDownConversionRecords``), though here only whole
entries are sent.  Conversion stops there too, so a small limit costs little.

A partial trailing entry (cut by the fetch size) is never converted: it is
dropped.  If the data holds no whole entry at all (the first entry is larger
than a pre-KIP-74 reader's ``partition_max_bytes``), the bytes are returned
unchanged, as Kafka does: a legacy reader sees an entry larger than what it
received and reports it as too large (kafka-python: RecordTooLargeError),
which an empty answer would not trigger.

>>> from kafka_ha.records.builder import Record, build_v2_batch
>>> from kafka_ha.records.reader import decode_records
>>> v2 = build_v2_batch([Record(b"k", b"v%d" % i, 1000 + i) for i in range(3)], base_offset=10)
>>> legacy = down_convert(v2, 1, fetch_offset=11)
>>> [(e.magic, e.last_offset) for e in iter_entries(legacy)]
[(1, 11), (1, 12)]
>>> [(r.offset, r.timestamp_ms, r.value) for r in decode_records(legacy)]
[(11, 1001, b'v1'), (12, 1002, b'v2')]
>>> down_convert(v2, 2) is v2
True
"""
from __future__ import annotations

from typing import Iterator

from .builder import encode_legacy_message
from .compression import compress
from .errors import UnsupportedCompressionError
from .format import (CODEC_NONE, CODEC_ZSTD, CONTROL_MASK, LOG_APPEND_TIME, MAGIC_V0, MAGIC_V1,
                     MAGIC_V2, TIMESTAMP_TYPE_MASK)
from .reader import decode_records
from .shallow import Entry, iter_entries

_NO_LIMIT = 1 << 62


def magic_for_fetch_version(version: int) -> int:
    """The highest magic a Fetch ``version`` reader understands (Kafka's format promise).

    >>> [magic_for_fetch_version(v) for v in range(6)]
    [0, 0, 1, 1, 2, 2]
    """
    return MAGIC_V0 if version <= 1 else MAGIC_V1 if version <= 3 else MAGIC_V2


def down_convert(buf, to_magic: int, fetch_offset: int = 0, max_bytes: int | None = None,
                 check_crc: bool = True, max_inflate: int | None = None):
    """``buf`` with every entry above ``to_magic`` rewritten in ``to_magic``.

    A compressed entry holding more than ``max_inflate`` bytes raises
    RecordTooLargeError instead of being inflated (a stored bomb costs no memory).

    Returns ``buf`` itself when there is nothing to convert (no entry above
    ``to_magic``, or no whole entry at all), else new ``bytes``.  With
    ``check_crc`` a corrupt stored entry raises CorruptRecordError instead of
    being re-checksummed into a valid-looking legacy message.
    """
    if to_magic not in (MAGIC_V0, MAGIC_V1, MAGIC_V2):
        raise ValueError(f"cannot convert to magic {to_magic}")
    view = memoryview(buf)
    entries = list(iter_entries(view))
    if not entries or all(entry.magic <= to_magic for entry in entries):
        return buf
    limit = _NO_LIMIT if max_bytes is None else max_bytes
    out: list = []
    size = 0
    for entry in entries:
        if entry.magic <= to_magic:
            pieces: Iterator = iter((view[entry.position:entry.end],))
        else:
            pieces = _convert_entry(view, entry, to_magic, fetch_offset, check_crc, max_inflate)
        for piece in pieces:
            if out and size + len(piece) > limit:
                return b"".join(out)
            out.append(piece)
            size += len(piece)
    return b"".join(out)


def _convert_entry(view, entry: Entry, to_magic: int, fetch_offset: int,
                   check_crc: bool, max_inflate: int | None) -> Iterator[bytes]:
    """The legacy entries replacing one entry (lazily, so a full answer stops converting)."""
    if entry.magic == MAGIC_V2 and entry.attributes & CONTROL_MASK:
        return
    codec = entry.codec
    if codec == CODEC_ZSTD:
        raise UnsupportedCompressionError(
            f"batch at offset {entry.first_offset} is zstd-compressed, which magic {to_magic} "
            f"cannot carry")
    stamped = to_magic == MAGIC_V1
    records = decode_records(view[entry.position:entry.end],
                             fetch_offset if codec == CODEC_NONE else 0, check_crc, max_inflate)
    if codec == CODEC_NONE:
        for r in records:
            if stamped:
                attributes = TIMESTAMP_TYPE_MASK if r.timestamp_type == LOG_APPEND_TIME else 0
                yield encode_legacy_message(r.offset, MAGIC_V1, attributes, r.key, r.value,
                                            r.timestamp_ms)
            else:
                yield encode_legacy_message(r.offset, MAGIC_V0, 0, r.key, r.value)
        return
    records = list(records)
    if not records:
        return
    first, last = records[0].offset, records[-1].offset
    if stamped:
        log_append = records[0].timestamp_type == LOG_APPEND_TIME
        ts_bit = TIMESTAMP_TYPE_MASK if log_append else 0
        inner = b"".join(encode_legacy_message(r.offset - first, MAGIC_V1, ts_bit, r.key, r.value,
                                               r.timestamp_ms) for r in records)
        wrapper_ts = max(r.timestamp_ms for r in records)
        yield encode_legacy_message(last, MAGIC_V1, codec | ts_bit, None,
                                    compress(codec, inner, MAGIC_V1), wrapper_ts)
    else:
        inner = b"".join(encode_legacy_message(r.offset, MAGIC_V0, 0, r.key, r.value)
                         for r in records)
        yield encode_legacy_message(last, MAGIC_V0, codec, None, compress(codec, inner, MAGIC_V0))
