"""Decode fetched record data into records (client side; all magics, all codecs).

A fetch response may start at a batch whose first offsets are below the
requested one and may end with a partial entry; :func:`decode_records` skips
the former (``min_offset``) and ignores the latter, as clients do.

>>> from kafka_ha.records.builder import Record, build_v2_batch, build_legacy_message_set
>>> data = build_legacy_message_set([Record(b"a", b"1")], magic=1, timestamp_ms=9) + \\
...        build_v2_batch([Record(b"b", b"2"), Record(None, b"3")], base_offset=1, timestamp_ms=10)
>>> [(r.offset, r.key, r.value) for r in decode_records(data, min_offset=1)]
[(1, b'b', b'2'), (2, None, b'3')]
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

from .compression import decompress
from .errors import CorruptRecordError
from .format import (CODEC_NONE, CONTROL_MASK, CREATE_TIME, LOG_APPEND_TIME, MAGIC_V0, MAGIC_V1,
                     MAGIC_V2, NO_TIMESTAMP_TYPE, TIMESTAMP_TYPE_MASK, V2_HEADER, V2_HEADER_SIZE)
from .shallow import Entry, iter_entries, legacy_key_value_bounds, validate_entry
from .validate import inner_entries
from .varint import decode_varint


class DecodedRecord(NamedTuple):
    offset: int
    timestamp_ms: int              # -1 for magic 0
    timestamp_type: int            # 0 CreateTime, 1 LogAppendTime, -1 none (magic 0)
    key: bytes | None
    value: bytes | None
    headers: tuple = ()            # ((str, bytes | None), ...)


def decode_records(buf, min_offset: int = 0, check_crc: bool = True,
                   max_inflate: int | None = None) -> Iterator[DecodedRecord]:
    """Every record of ``buf`` with offset >= ``min_offset``, in log order.

    Control batches (transaction markers) are skipped.  With ``check_crc``
    a corrupt entry raises :class:`CorruptRecordError`; a compressed entry
    holding more than ``max_inflate`` bytes raises :class:`RecordTooLargeError`
    before it is inflated past that.
    """
    view = memoryview(buf)
    for entry in iter_entries(view):
        if entry.last_offset < min_offset:
            continue
        if check_crc:
            validate_entry(view, entry)
        if entry.magic == MAGIC_V2:
            records = _decode_v2(view, entry, max_inflate)
        elif entry.codec == CODEC_NONE:
            records = iter((_decode_legacy(view, entry, entry.last_offset, None),))
        else:
            records = _decode_legacy_wrapper(view, entry, max_inflate)
        for record in records:
            if record.offset >= min_offset:
                yield record


def _nbytes(buf, pos: int, length: int) -> tuple[bytes | None, int]:
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise CorruptRecordError(f"record field of {length} bytes overruns its batch")
    return buf[pos:pos + length], pos + length


def _decode_v2(view, entry: Entry, max_inflate: int | None = None) -> Iterator[DecodedRecord]:
    if entry.attributes & CONTROL_MASK:
        return
    (base, _, _, _, _, attributes, _, base_ts, max_ts, _, _, _, count) = V2_HEADER.unpack_from(view, entry.position)
    ts_type = LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME
    # bytes (decompress copies even uncompressed data): slices of it are the keys and values.
    body = decompress(entry.codec, view[entry.position + V2_HEADER_SIZE:entry.end],
                      max_bytes=max_inflate)
    pos = 0
    for _ in range(count):
        length, pos = decode_varint(body, pos)
        end = pos + length
        pos += 1                                            # record attributes (unused)
        ts_delta, pos = decode_varint(body, pos)
        offset_delta, pos = decode_varint(body, pos)
        key_len, pos = decode_varint(body, pos)
        key, pos = _nbytes(body, pos, key_len)
        value_len, pos = decode_varint(body, pos)
        value, pos = _nbytes(body, pos, value_len)
        header_count, pos = decode_varint(body, pos)
        headers = []
        for _ in range(header_count):
            h_len, pos = decode_varint(body, pos)
            h_key, pos = _nbytes(body, pos, h_len)
            h_len, pos = decode_varint(body, pos)
            h_value, pos = _nbytes(body, pos, h_len)
            headers.append((h_key.decode(), h_value))
        if pos != end:
            raise CorruptRecordError(f"record at offset {base + offset_delta} has length {length}, "
                                     f"but its fields end {pos - end} bytes away from it")
        ts = max_ts if ts_type == LOG_APPEND_TIME else base_ts + ts_delta
        yield DecodedRecord(base + offset_delta, ts, ts_type, key, value, tuple(headers))


def _decode_legacy(view, entry: Entry, offset: int, wrapper: Entry | None) -> DecodedRecord:
    key_start, key_len, value_start, value_len = legacy_key_value_bounds(view, entry)
    key = None if key_len < 0 else bytes(view[key_start:key_start + key_len])
    value = None if value_len < 0 else bytes(view[value_start:value_start + value_len])
    if entry.magic == MAGIC_V0:
        return DecodedRecord(offset, -1, NO_TIMESTAMP_TYPE, key, value)
    if wrapper is not None and wrapper.attributes & TIMESTAMP_TYPE_MASK:
        return DecodedRecord(offset, wrapper.max_timestamp, LOG_APPEND_TIME, key, value)
    ts_type = LOG_APPEND_TIME if entry.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME
    return DecodedRecord(offset, entry.max_timestamp, ts_type, key, value)


def _decode_legacy_wrapper(view, wrapper: Entry, max_inflate: int | None = None
                           ) -> Iterator[DecodedRecord]:
    inner, entries = inner_entries(view, wrapper, max_inflate)
    inner_view = memoryview(inner)
    # magic 1 inner offsets are relative: absolute = wrapper - last_relative + relative.
    shift = wrapper.last_offset - entries[-1].last_offset if wrapper.magic == MAGIC_V1 else 0
    for entry in entries:
        yield _decode_legacy(inner_view, entry, entry.last_offset + shift, wrapper)
