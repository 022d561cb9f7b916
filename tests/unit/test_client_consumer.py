"""The consumer and offset look-ups against the in-memory fake cluster (real sockets)."""
from __future__ import annotations

import time

import gevent
import pytest

from kafka_ha.client.consumer import Consumer
from kafka_ha.client.errors import KafkaError, OffsetOutOfRangeError
from tests.harness.fake_cluster import FakeCluster
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records.builder import Record, build_legacy_message_set, build_v2_batch

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def cluster():
    fake = FakeCluster((1, 2)).start()
    fake.create_topic("t", 2, assignment=[[1, 2], [2, 1]])
    yield fake
    fake.stop()


@pytest.fixture
def make_consumer(cluster):
    made = []

    def make(**kwargs):
        kwargs.setdefault("fetch_max_wait_ms", 50)
        kwargs.setdefault("retry_backoff_ms", 10)
        consumer = Consumer(cluster.bootstrap, **kwargs)
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        consumer.close()


def fill(cluster, tp, batches):
    """Append v2 batches of the given sizes; values are b"<offset>"."""
    offset = cluster.log(tp).end
    for size in batches:
        cluster.append(tp, build_v2_batch([Record(None, b"%d" % (offset + i)) for i in range(size)]))
        offset += size


def poll_until(consumer, count, timeout=5.0):
    records, deadline = [], time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        records += consumer.poll(200)
    return records


def test_poll_reads_all_assigned_partitions_from_their_leaders(cluster, make_consumer):
    fill(cluster, T0, [3])
    fill(cluster, T1, [2, 2])
    consumer = make_consumer(auto_offset_reset="earliest")
    consumer.assign([("t", 0), ("t", 1)])
    records = poll_until(consumer, 7)
    assert sorted((r.partition, r.offset, r.value) for r in records) == \
        [(0, 0, b"0"), (0, 1, b"1"), (0, 2, b"2"), (1, 0, b"0"), (1, 1, b"1"),
         (1, 2, b"2"), (1, 3, b"3")]
    assert consumer.position(("t", 0)) == 3 and consumer.position(("t", 1)) == 4
    assert {b for b, _ in cluster.requests_of(ApiKey.FETCH)} == {1, 2}
    assert consumer.highwater(("t", 1)) == 4


def test_records_below_the_position_are_skipped(cluster, make_consumer):
    fill(cluster, T0, [5, 5])                      # batches 0-4 and 5-9
    consumer = make_consumer()
    consumer.assign([("t", 0)])
    consumer.seek(("t", 0), 3)                     # inside the first batch
    records = poll_until(consumer, 7)
    assert [r.offset for r in records] == [3, 4, 5, 6, 7, 8, 9]
    assert cluster.requests_of(ApiKey.FETCH)[0][1]["topics"][0]["partitions"][0]["fetch_offset"] == 3


def test_compressed_and_legacy_data_decode(cluster, make_consumer):
    cluster.append(T0, build_legacy_message_set([Record(b"k", b"a", 5)], magic=1))
    cluster.append(T0, build_v2_batch([Record(None, b"b"), Record(None, b"c")], compression="gzip"))
    consumer = make_consumer(auto_offset_reset="earliest")
    consumer.assign([("t", 0)])
    records = poll_until(consumer, 3)
    assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k", b"a"), (1, None, b"b"),
                                                             (2, None, b"c")]
    assert records[0].timestamp_ms == 5


def test_auto_offset_reset_latest_starts_at_the_high_watermark(cluster, make_consumer):
    fill(cluster, T0, [4])
    consumer = make_consumer(auto_offset_reset="latest")
    consumer.assign([("t", 0)])
    assert consumer.position(("t", 0)) == 4
    fill(cluster, T0, [1])
    assert [r.value for r in poll_until(consumer, 1)] == [b"4"]


def test_offset_out_of_range_resets_to_earliest(cluster, make_consumer):
    fill(cluster, T0, [2, 2, 2])
    cluster.log(T0).log_start = 4                  # retention removed offsets 0-3
    consumer = make_consumer(auto_offset_reset="earliest")
    consumer.assign([("t", 0)])
    consumer.seek(("t", 0), 1)
    records = poll_until(consumer, 2)
    assert [r.offset for r in records] == [4, 5]
    list_offsets = cluster.requests_of(ApiKey.LIST_OFFSETS)
    assert list_offsets[-1][1]["topics"][0]["partitions"][0]["timestamp"] == -2


def test_offset_out_of_range_resets_to_latest(cluster, make_consumer):
    fill(cluster, T0, [3])
    consumer = make_consumer(auto_offset_reset="latest")
    consumer.assign([("t", 0)])
    consumer.seek(("t", 0), 100)                   # beyond the log end
    assert consumer.poll(300) == []
    assert consumer.position(("t", 0)) == 3


def test_offset_out_of_range_without_reset_policy_raises(cluster, make_consumer):
    fill(cluster, T0, [3])
    consumer = make_consumer(auto_offset_reset="none")
    consumer.assign([("t", 0)])
    consumer.seek(("t", 0), 100)
    with pytest.raises(OffsetOutOfRangeError):
        poll_until(consumer, 1, timeout=1)


def test_leader_change_refreshes_metadata_and_fetches_from_the_new_leader(cluster, make_consumer):
    fill(cluster, T0, [2])
    consumer = make_consumer(auto_offset_reset="earliest")
    consumer.assign([("t", 0)])
    assert len(poll_until(consumer, 2)) == 2
    cluster.set_leader(T0, 2)
    fill(cluster, T0, [1])
    assert [r.offset for r in poll_until(consumer, 1)] == [2]
    assert cluster.requests_of(ApiKey.FETCH)[-1][0] == 2


def test_seek_discards_an_in_flight_fetch_of_the_old_position(cluster, make_consumer):
    fill(cluster, T0, [5])
    consumer = make_consumer(auto_offset_reset="earliest")
    consumer.assign([("t", 0)])
    consumer.poll(0)                               # a fetch from offset 0 is now in flight
    consumer.seek(("t", 0), 4)
    assert [r.offset for r in poll_until(consumer, 1)] == [4]


def test_long_poll_returns_as_soon_as_data_arrives(cluster, make_consumer):
    consumer = make_consumer(fetch_max_wait_ms=5000)
    consumer.assign([("t", 0)])
    consumer.seek_to_end()
    gevent.spawn_later(0.2, fill, cluster, T0, [1])
    start = time.monotonic()
    assert [r.value for r in consumer.poll(3000)] == [b"0"]
    assert time.monotonic() - start < 2.0


def test_poll_timeout_with_no_data_returns_empty(cluster, make_consumer):
    consumer = make_consumer()
    consumer.assign([("t", 0)])
    start = time.monotonic()
    assert consumer.poll(150) == []
    assert 0.1 < time.monotonic() - start < 1.0


def test_beginning_and_end_offsets(cluster, make_consumer):
    fill(cluster, T0, [3])
    cluster.log(T0).log_start = 1
    consumer = make_consumer()
    assert consumer.beginning_offsets([("t", 0), ("t", 1)]) == {T0: 1, T1: 0}
    assert consumer.end_offsets([("t", 0), ("t", 1)]) == {T0: 3, T1: 0}


def test_list_offsets_retries_after_not_leader(cluster, make_consumer):
    fill(cluster, T0, [3])
    cluster.fail(ApiKey.LIST_OFFSETS, ErrorCode.NOT_LEADER_FOR_PARTITION)
    assert make_consumer().end_offsets([("t", 0)]) == {T0: 3}
    assert len(cluster.requests_of(ApiKey.LIST_OFFSETS)) == 2


def test_commit_and_committed_through_the_coordinator(cluster, make_consumer):
    fill(cluster, T0, [3])
    consumer = make_consumer(group_id="g", auto_offset_reset="earliest")
    consumer.assign([("t", 0)])
    assert consumer.committed(("t", 0)) is None
    poll_until(consumer, 3)
    consumer.commit()
    assert consumer.committed(("t", 0)) == 3
    commit = cluster.requests_of(ApiKey.OFFSET_COMMIT)[0][1]
    assert (commit["generation_id"], commit["member_id"]) == (-1, "")
    # A new consumer in the group starts from the committed offset.
    fill(cluster, T0, [1])
    again = make_consumer(group_id="g", auto_offset_reset="earliest")
    again.assign([("t", 0)])
    assert [r.offset for r in poll_until(again, 1)] == [3]


def test_commit_retries_when_the_coordinator_moved(cluster, make_consumer):
    consumer = make_consumer(group_id="g")
    cluster.fail(ApiKey.OFFSET_COMMIT, ErrorCode.NOT_COORDINATOR)
    consumer.commit({("t", 1): 7})
    assert cluster.committed[("g", T1)] == 7
    assert len(cluster.requests_of(ApiKey.FIND_COORDINATOR)) == 2


def test_commit_needs_a_group(make_consumer):
    with pytest.raises(KafkaError, match="group_id"):
        make_consumer().commit({("t", 0): 1})


def test_unassigned_partition_is_rejected(make_consumer):
    consumer = make_consumer()
    consumer.assign([("t", 0)])
    with pytest.raises(KafkaError, match="not assigned"):
        consumer.seek(("t", 1), 0)
