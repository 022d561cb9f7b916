"""Replication quotas (KIP-73): the sampled rate with an injected clock, which replicas a
throttled-replicas value covers, and the leader's fetch answer to throttled followers."""
import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.replication_quota import (
    ALL_REPLICAS, UNBOUNDED, ReplicationQuota, SampledRate, throttled_partitions)
from kafka_ha.config import ConfigError, validate_topic_config
from kafka_ha.model import TopicPartition
from tests.harness.leader_setup import TP, batch, leader, open_log


class Clock:
    def __init__(self):
        self.ms = 0.0

    def __call__(self):
        return self.ms


def test_the_rate_counts_at_least_samples_minus_one_windows_at_first():
    clock = Clock()
    rate = SampledRate(11, 1000, clock)
    rate.record(10_000)
    assert rate.rate() == pytest.approx(1000.0)       # 10 kB over the 10-window floor
    clock.ms = 500                                     # as Kafka: the floor adds to the time passed
    assert rate.rate() == pytest.approx(10_000 / 10.5)


def test_a_steady_stream_reads_as_its_rate_and_expires_after_the_windows():
    clock = Clock()
    rate = SampledRate(11, 1000, clock)
    for step in range(300):                            # 30 s of 100 kB every 100 ms
        clock.ms = step * 100
        rate.record(100_000)
    assert rate.rate() == pytest.approx(1_000_000, rel=0.1)
    clock.ms += 11_001
    assert rate.rate() == 0.0


def test_the_quota_is_exceeded_only_above_its_bound():
    clock = Clock()
    quota = ReplicationQuota(1, lambda topic: "*", bound=1000, samples=2, window_ms=1000,
                             clock_ms=clock)
    quota.record(1000)
    assert not quota.exceeded()                        # 1000 B/s is the bound itself
    quota.record(1)
    assert quota.exceeded()
    quota.set_bound(UNBOUNDED)
    assert not quota.exceeded(), "the default (Long.MAX_VALUE) never throttles"


@pytest.mark.parametrize("value, broker, expected", [
    ("0:1,1:2,2:1", 1, frozenset({0, 2})),
    ("0:1,1:2", 3, frozenset()),
    ("*", 7, ALL_REPLICAS),
    ("", 1, frozenset()),
    ("garbage", 1, frozenset()),                       # reported when read, throttles nothing
])
def test_throttled_partitions_of_a_broker(value, broker, expected):
    assert throttled_partitions(value, broker) == expected


def test_the_topic_configs_are_validated_as_kafka_does():
    assert validate_topic_config({"leader.replication.throttled.replicas": "0:1, 1:2"})
    with pytest.raises(ConfigError, match="must be the literal"):
        validate_topic_config({"follower.replication.throttled.replicas": "0:a"})
    from kafka_ha.broker.topic_configs import TopicConfigs
    from kafka_ha.config import BrokerConfig
    defaults = TopicConfigs(None, BrokerConfig({"broker.id": 1, "zookeeper.connect": "z"})).default_values()
    assert defaults["leader.replication.throttled.replicas"] == "", "Kafka's default: no replica"


def test_in_sync_replicas_and_unthrottled_partitions_are_never_held_back():
    clock = Clock()
    quota = ReplicationQuota(1, lambda topic: "0:1" if topic == "t" else "", bound=0,
                             samples=2, window_ms=1000, clock_ms=clock)
    quota.record(1)
    assert quota.should_throttle(TopicPartition("t", 0), in_sync=False)
    assert not quota.should_throttle(TopicPartition("t", 0), in_sync=True)
    assert not quota.should_throttle(TopicPartition("t", 1), in_sync=False)
    assert not quota.should_throttle(TopicPartition("u", 0), in_sync=False)


@pytest.fixture
def led(tmp_path):
    log_ = open_log(tmp_path)
    p = leader(log_, (1, 2))                     # follower 2 is in the ISR, 3 is not
    for _ in range(10):
        p.append_as_leader(batch(b"x" * 1000), acks=1)
    yield p
    log_.close()


def follower_fetch(plane, replica_id):
    response = plane.fetch({"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0,
                            "max_bytes": 10**6, "isolation_level": 0, "topics": [
                                {"topic": TP.topic, "partitions": [
                                    {"partition": TP.partition, "fetch_offset": 0,
                                     "partition_max_bytes": 10**6}]}]}, 4)
    entry = response["responses"][0]["partitions"][0]
    return entry["error_code"], len(entry["records"] or b""), entry["high_watermark"]


def test_the_leader_answers_a_throttled_follower_without_records_while_over_the_rate(led):
    clock = Clock()
    quota = ReplicationQuota(1, lambda topic: "0:1", bound=5000, samples=2, window_ms=1000,
                             clock_ms=clock)
    plane = DataApis(HostedPartitions({TP: led}, lambda tp: True), lambda t: 1000012,
                     leader_quota=quota)
    error, size, _ = follower_fetch(plane, 3)
    assert error == 0 and size > 5000, "under the rate: the whole answer"
    assert quota.rate() == pytest.approx(size, rel=0.01), "its bytes were counted"
    error, size, hw = follower_fetch(plane, 3)
    assert (error, size) == (0, 0) and hw >= 0, "over the rate: no records, the HW still"
    _, in_sync_size, _ = follower_fetch(plane, 2)
    assert in_sync_size > 0, "an in-sync follower is never throttled"
    clock.ms = 10_000                                   # the windows expired
    assert follower_fetch(plane, 3)[1] > 0
