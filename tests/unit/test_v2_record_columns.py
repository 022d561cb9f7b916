"""The leader's record walk checks runs of same-shaped records by columns (``v2_columns``).

The column check may only ever accept what the record-by-record walk accepts,
and every error must still be the walk's own: the property test below runs both
ways over honest batches and over the same batches with one thing broken.
"""
from __future__ import annotations

import random

import pytest

from kafka_ha.records.builder import Record, encode_v2_record
from kafka_ha.records.errors import CorruptRecordError
from kafka_ha.records.v2_check import check_v2_records
from kafka_ha.records.v2_columns import run_length


def uniform(count, value_size=20, key=None, ts=lambda i: 0, headers=()):
    return b"".join(encode_v2_record(Record(key, b"v" * value_size, headers=tuple(headers)), i, ts(i))
                    for i in range(count))


def outcome(data, count, by_columns):
    try:
        check_v2_records(data, count, "batch", by_columns=by_columns)
    except CorruptRecordError as e:
        return str(e)
    return None


def test_a_run_of_same_shaped_records_is_found_up_to_where_the_offset_delta_grows_a_byte():
    data = uniform(100)
    stride = len(data) // 100
    # Record 0 was checked the long way; records 1..63 share its shape.  Record 64's
    # offset delta takes two bytes, so it starts a new shape.
    assert run_length(data, 0, stride, 0, 100, len(data)) == 63
    two_byte = len(encode_v2_record(Record(None, b"v" * 20), 64, 0))
    start = 64 * stride
    assert run_length(data, start, two_byte, 64, 100, len(data)) == 35


def record(value=b"v" * 20, ts=0, headers=()):
    return encode_v2_record(Record(None, value, headers=headers), 0, ts)


@pytest.mark.parametrize("first, data, count", [
    # headers: the walk checks those itself
    (record(headers=(("h", b"x"),)), uniform(10, headers=[("h", b"x")]), 10),
    # the fourth record is a byte longer
    (record(), uniform(3) + encode_v2_record(Record(None, b"w" * 21), 3, 0), 4),
    # from the second record on, the timestamp deltas take two bytes
    (record(), b"".join(encode_v2_record(Record(None, b"v" * 20), i, 100 * i) for i in range(5)), 5),
], ids=["headers", "longer-record", "longer-timestamp-delta"])
def test_no_run_is_claimed_where_the_shape_changes(first, data, count):
    assert run_length(data, 0, len(first), 0, count, len(data)) == 0


def test_a_broken_record_inside_a_run_gets_the_walks_own_error():
    data = bytearray(uniform(60))
    stride = len(data) // 60
    data[40 * stride + 3] = 7                      # record 40's offset delta claims 3 (encoded 7 = -4)
    assert outcome(bytes(data), 60, True) == outcome(bytes(data), 60, False)
    assert "record 40 has offset delta" in outcome(bytes(data), 60, True)


def _batches(rng: random.Random):
    for _ in range(400):
        count = rng.choice([1, 2, 7, 63, 64, 65, 100, 300, 8191, 8193])
        size = rng.choice([0, 1, 20, 127, 128, 1000])
        key = rng.choice([None, b"", b"key", b"k" * 200])
        jump = rng.choice([None, 0, 1, count // 2])          # where timestamps start to need 2 bytes
        headers = [("h", b"x")] if rng.random() < 0.1 else []
        data = uniform(count, size, key, ts=lambda i: 0 if jump is None or i < jump else 70 + i, headers=headers)
        yield data, count
        yield _broken(rng, bytearray(data)), count


def _broken(rng: random.Random, data: bytearray) -> bytes:
    how = rng.randrange(5)
    at = rng.randrange(len(data))
    if how == 0:
        data[at] = rng.randrange(256)
    elif how == 1:
        data[at] ^= 0x80
    elif how == 2:
        del data[at]
    elif how == 3:
        data.insert(at, rng.randrange(256))
    else:
        del data[at:]
    return bytes(data)


def test_the_column_check_agrees_with_the_walk_on_honest_and_broken_batches():
    rng = random.Random(20261129)
    disagreements, accepted = [], 0
    for data, count in _batches(rng):
        for view in (data, memoryview(data)):
            walked, by_columns = outcome(view, count, False), outcome(view, count, True)
            if walked != by_columns:
                disagreements.append((count, len(data), walked, by_columns))
            accepted += walked is None
    assert not disagreements, disagreements[:5]
    assert accepted > 400          # the honest half (and some harmless breaks) passed
