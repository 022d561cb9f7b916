"""Pure tests of the client's partitioner and batch accumulator (no sockets)."""
from __future__ import annotations

import random

import pytest

from kafka_ha.client.accumulator import BATCH_OVERHEAD, RecordAccumulator, record_size
from kafka_ha.client.future import RecordFuture, RecordMetadata
from kafka_ha.client.partitioner import DefaultPartitioner, murmur2, to_positive
from kafka_ha.model import TopicPartition
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.records.reader import decode_records

# -- murmur2: Kafka's UtilsTest.testMurmur2 and kafka-python's Java-compatibility vectors -----


@pytest.mark.parametrize("data, expected", [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
])
def test_murmur2_matches_kafka_utils(data, expected):
    assert murmur2(data) == expected


@pytest.mark.parametrize("key, partition", [
    (b"", 681), (b"a", 524), (b"ab", 434), (b"abc", 107), (b"123456789", 566), (b"\x00 ", 742)])
def test_keyed_partition_matches_java_producer(key, partition):
    partitions = list(range(1000))
    assert DefaultPartitioner()("t", key, partitions, partitions) == partition


def test_positive_mod_clears_the_sign_bit_instead_of_abs():
    # murmur2(b"21") is negative: Kafka masks it (toPositive), it does not negate it.
    h = murmur2(b"21")
    assert to_positive(h) == h & 0x7FFFFFFF == 1173551340
    assert to_positive(h) % 7 != abs(h) % 7
    assert DefaultPartitioner()("t", b"21", list(range(7)), []) == 1173551340 % 7


def test_murmur2_handles_high_bytes_and_long_keys():
    assert isinstance(murmur2(b"\xa4"), int)
    assert -(1 << 31) <= murmur2(b"\x81" * 1000) < (1 << 31)


def test_null_keys_round_robin_over_available_partitions():
    partitioner = DefaultPartitioner(random.Random(0))
    picks = [partitioner("t", None, [0, 1, 2, 3], [1, 3]) for _ in range(6)]
    assert set(picks) == {1, 3}
    assert all(a != b for a, b in zip(picks, picks[1:]))  # alternates


def test_null_keys_use_all_partitions_when_none_is_available():
    partitioner = DefaultPartitioner(random.Random(0))
    assert {partitioner("t", None, [0, 1, 2], []) for _ in range(3)} == {0, 1, 2}


# -- accumulator ---------------------------------------------------------------------------

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def leader_is(node):
    return lambda tp: node


def test_batch_encoded_on_append_equals_the_batch_built_at_once():
    # Out-of-order timestamps (a negative delta), null key and value, headers,
    # and gzip: the incremental encoding must give the very same bytes.
    records = [Record(b"k1", b"v1", 5000), Record(None, b"v2", 4000, (("h", b"x"), ("n", None))),
               Record(b"k3", None, 7000), Record(b"", b"", 6000)]
    for compression in ("none", "gzip"):
        acc = RecordAccumulator(batch_size=1 << 20, linger_s=0, retry_backoff_s=0.1)
        for r in records:
            acc.append(TP0, r, None, now=0.0)
        ready, _ = acc.drain(0.0, leader_is(1), set(), flushing=False)
        (batch,) = ready[1]
        expected = build_v2_batch(records, compression=compression)
        if compression == "none":
            assert batch.payload(compression) == expected
        else:   # compressed bytes may differ between two gzip runs: compare the records
            assert list(decode_records(batch.payload(compression))) == list(decode_records(expected))
        assert batch.payload(compression) is batch.payload(compression)   # built once


def test_future_runs_one_or_many_callbacks_in_order():
    for n in (1, 2, 3):
        future, seen = RecordFuture(), []
        for i in range(n):
            future.add_done_callback(lambda f, i=i: seen.append((i, f.get().offset)))
        future.set_result(RecordMetadata(0, 7))
        assert seen == [(i, 7) for i in range(n)]
        future.add_done_callback(lambda f: seen.append("late"))   # already done: runs at once
        assert seen[-1] == "late"


def test_batch_waits_for_linger_then_goes():
    acc = RecordAccumulator(batch_size=1000, linger_s=0.010, retry_backoff_s=0.1)
    assert acc.append(TP0, Record(None, b"x"), None, now=0.0) == (True, False)
    ready, delay = acc.drain(0.004, leader_is(1), set(), flushing=False)
    assert ready == {} and delay == pytest.approx(0.006)
    ready, _ = acc.drain(0.010, leader_is(1), set(), flushing=False)
    assert [b.count for b in ready[1]] == [1]


def test_full_batch_goes_at_once_and_a_new_one_opens():
    record = Record(None, b"x" * 40)
    limit = BATCH_OVERHEAD + 2 * record_size(record)
    acc = RecordAccumulator(batch_size=limit, linger_s=60, retry_backoff_s=0.1)
    assert acc.append(TP0, record, None, 0.0) == (True, False)
    assert acc.append(TP0, record, None, 0.0) == (False, True)   # exactly full
    assert acc.append(TP0, record, None, 0.0) == (True, True)    # overflow opened batch two
    assert acc.append(TP0, record, None, 0.0) == (False, True)   # batch two full too
    ready, _ = acc.drain(0.0, leader_is(1), set(), flushing=False)
    assert [b.count for b in ready[1]] == [2]         # one batch per partition in flight


def test_first_record_always_fits_even_if_larger_than_batch_size():
    acc = RecordAccumulator(batch_size=10, linger_s=60, retry_backoff_s=0.1)
    assert acc.append(TP0, Record(None, b"x" * 100), None, 0.0) == (True, True)
    ready, _ = acc.drain(0.0, leader_is(1), set(), flushing=False)
    assert ready[1][0].count == 1


def test_one_batch_in_flight_per_partition_and_retry_keeps_order():
    acc = RecordAccumulator(batch_size=BATCH_OVERHEAD + 30, linger_s=0, retry_backoff_s=0.5)
    for i in range(3):
        acc.append(TP0, Record(None, b"%d" % i * 5), None, 0.0)
    ready, _ = acc.drain(0.0, leader_is(1), set(), flushing=True)
    (first,) = ready[1]
    assert acc.drain(0.0, leader_is(1), set(), flushing=True)[0] == {}   # TP0 is muted
    acc.requeue(first, now=1.0)
    ready, delay = acc.drain(1.1, leader_is(1), set(), flushing=True)
    assert ready == {} and delay == pytest.approx(0.4)                    # backoff, and nothing overtakes
    ready, _ = acc.drain(1.5, leader_is(1), set(), flushing=True)
    assert ready[1] == [first] and first.attempts == 2


def test_drain_groups_by_leader_and_skips_busy_or_leaderless():
    acc = RecordAccumulator(batch_size=1000, linger_s=0, retry_backoff_s=0.1)
    tp2 = TopicPartition("u", 0)
    for tp in (TP0, TP1, tp2):
        acc.append(tp, Record(None, b"x"), None, 0.0)
    leaders = {TP0: 1, TP1: 2, tp2: None}
    ready, _ = acc.drain(0.0, leaders.get, busy={2}, flushing=False)
    assert {n: [b.tp for b in bs] for n, bs in ready.items()} == {1: [TP0]}
    assert acc.waiting_for_leader(leaders.get)


def test_done_releases_the_partition_and_buffer_accounting():
    acc = RecordAccumulator(batch_size=1000, linger_s=0, retry_backoff_s=0.1)
    future = RecordFuture()
    acc.append(TP0, Record(b"k", b"v"), future, 0.0)
    assert acc.buffered_bytes == record_size(Record(b"k", b"v"))
    (batch,) = acc.drain(0.0, leader_is(1), set(), False)[0][1]
    acc.done(batch)
    batch.complete(base_offset=41)
    assert acc.is_empty() and acc.buffered_bytes == 0
    assert future.get() == (0, 41)


def test_expired_batches_are_removed_but_not_in_flight_ones():
    acc = RecordAccumulator(batch_size=1000, linger_s=60, retry_backoff_s=0.1)
    acc.append(TP0, Record(None, b"x"), None, 0.0)
    acc.append(TP1, Record(None, b"x"), None, 0.0)
    acc.drain(0.0, {TP0: 1, TP1: None}.get, set(), flushing=True)          # TP0 in flight
    expired = acc.expired(now=121.0, timeout_s=120.0)
    assert [b.tp for b in expired] == [TP1]
    assert not acc.is_empty()  # TP0 still in flight
