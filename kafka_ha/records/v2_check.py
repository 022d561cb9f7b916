"""Check that the records inside a v2 batch are what its header claims.

The batch CRC proves only that the bytes are the producer's; a hostile one
computes it over whatever it likes.  So the leader walks every record, as
Kafka's LogValidator does, before it stores a batch: exactly ``record_count``
records, each as long as its length prefix says, offset deltas 0, 1, 2, ...,
key, value and header lengths that fit inside their record, and nothing
after the last one.  A batch that fails gets CORRUPT_MESSAGE.

>>> from kafka_ha.records.builder import Record, encode_v2_record
>>> body = encode_v2_record(Record(b"k", b"v"), 0, 0) + encode_v2_record(Record(None, b"w"), 1, 3)
>>> check_v2_records(body, 2, "batch")
>>> check_v2_records(body, 3, "batch")
Traceback (most recent call last):
...
kafka_ha.records.errors.CorruptRecordError: batch: 3 records declared, but they would need at least 21 bytes and there are 17
"""
from __future__ import annotations

from itertools import islice

from .errors import CorruptRecordError
from .v2_columns import run_length
from .varint import decode_varint

# length, attributes, timestamp delta, offset delta, key length, value length,
# header count: one byte each at the least
MIN_RECORD_BYTES = 7
# Records walked one by one after a run of same-shaped records could not be shown
# (doubled after each such try).
RETRY_AFTER = 16


def check_v2_records(data, count: int, where: str, by_columns: bool = True) -> None:
    """Raise :class:`CorruptRecordError` unless ``data`` holds exactly ``count`` sound records.

    ``by_columns``: runs of records shaped like the one before are checked by
    columns (:mod:`v2_columns`); the answer is the same either way.
    """
    try:
        _walk(data, count, where, by_columns)
    except IndexError:   # a field runs past the end of the data
        raise CorruptRecordError(f"{where}: the records end inside a record") from None


def _walk(data, count: int, where: str, by_columns: bool) -> None:
    end = len(data)
    if count * MIN_RECORD_BYTES > end:
        raise CorruptRecordError(f"{where}: {count} records declared, but they would need at least "
                                 f"{count * MIN_RECORD_BYTES} bytes and there are {end}")
    pos = 0
    # The loop decodes seven varints per record; nearly all are one or two bytes
    # (deltas under 8,192, lengths under 8 KiB, no headers), so those are decoded
    # inline and only longer ones call decode_varint: a call per varint was 40% of
    # the walk, and the walk is most of a leader's CPU per appended batch.
    varint = decode_varint
    records = iter(range(count))
    retry_at = 0 if by_columns else count
    retry_after = RETRY_AFTER
    for i in records:
        start = pos
        b = data[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        elif data[pos + 1] < 0x80:
            n = (b & 0x7F) | (data[pos + 1] << 7)
            length, pos = (n >> 1) ^ -(n & 1), pos + 2
        else:
            length, pos = varint(data, pos)
        record_end = pos + length
        if length < MIN_RECORD_BYTES - 1 or record_end > end:
            raise CorruptRecordError(f"{where}: record {i} has impossible length {length}")
        pos += 1                                       # attributes
        b = data[pos]
        if b < 0x80:
            pos += 1                                   # timestamp delta
        elif data[pos + 1] < 0x80:
            pos += 2
        else:
            _, pos = varint(data, pos)
        b = data[pos]
        if b < 0x80:
            delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        elif data[pos + 1] < 0x80:
            n = (b & 0x7F) | (data[pos + 1] << 7)
            delta, pos = (n >> 1) ^ -(n & 1), pos + 2
        else:
            delta, pos = varint(data, pos)
        if delta != i:
            raise CorruptRecordError(f"{where}: record {i} has offset delta {delta}")
        for what in ("key", "value"):
            b = data[pos]
            if b < 0x80:
                field, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:
                n = (b & 0x7F) | (data[pos + 1] << 7)
                field, pos = (n >> 1) ^ -(n & 1), pos + 2
            else:
                field, pos = varint(data, pos)
            if field > 0:
                pos += field
            elif field < -1:
                pos = record_end + 1
            if pos > record_end:
                raise CorruptRecordError(f"{where}: record {i} has a {what} length {field} that "
                                         f"does not fit the record")
        if data[pos] != 0:                              # headers: rare, checked the long way
            pos = _check_headers(data, pos, record_end, where, i)
        else:
            pos += 1
        if pos != record_end:
            raise CorruptRecordError(f"{where}: record {i} declares {length} bytes but its fields "
                                     f"end {pos - record_end:+d} bytes from there")
        # The next record starts like this one: try a run of same-shaped records.  One
        # that cannot be shown holds off the next try, twice as long each time, so
        # batches of varied records pay little for it.
        if retry_at <= i < count - 1 and data[pos] == data[start]:
            run = run_length(data, start, pos - start, i, count, end)
            if run:
                pos += run * (pos - start)
                next(islice(records, run - 1, None))      # those records are checked
            else:
                retry_at = i + retry_after
                retry_after *= 2
    if pos != end:
        raise CorruptRecordError(f"{where}: {end - pos} bytes follow the {count} declared records")


def _check_headers(data, pos: int, record_end: int, where: str, i: int) -> int:
    headers, pos = decode_varint(data, pos)
    if headers < 0 or headers * 2 > record_end - pos:
        raise CorruptRecordError(f"{where}: record {i} claims {headers} headers")
    for _ in range(headers):
        key_length, pos = decode_varint(data, pos)
        if key_length < 0:
            raise CorruptRecordError(f"{where}: record {i} has a header with a null key")
        pos = _skip_bytes(data, pos + key_length, record_end, where, i, "header value")
    return pos


def _skip_bytes(data, pos: int, record_end: int, where: str, i: int, what: str) -> int:
    """Position after a varint-length-prefixed field (-1 is null) that must fit the record."""
    length, pos = decode_varint(data, pos)
    if length < -1 or pos + max(length, 0) > record_end:
        raise CorruptRecordError(f"{where}: record {i} has a {what} length {length} that does "
                                 f"not fit the record")
    return pos + max(length, 0)
