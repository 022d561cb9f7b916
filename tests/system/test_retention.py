"""Retention on real brokers: the leader's log start offset reaches its follower.

Only the leader has a retention limit here (a broker-level setting); the
follower keeps everything it is allowed to.  After the leader deletes old
segments, the follower learns the new log start from Fetch responses, moves
its own log start there, and deletes its segments wholly below it.
"""

import time

import pytest

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode
from tests.harness.kafka import create_topic, wait_isr
from tests.harness.load import produce
from tests.harness.replica_files import partition_dir

pytestmark = pytest.mark.system

LEADER, FOLLOWER = 1, 2
DEBUG_CONSUMER = -2            # may ask a follower (Kafka's replica id for debugging tools)
OVERRIDES = {"log.segment.bytes": 2000, "log.retention.check.interval.ms": 500}


def earliest_offset(cluster, broker, topic):
    conn = BrokerConnection("127.0.0.1", cluster.port(broker), "retention-probe", 30)
    try:
        answer = conn.request(ApiKey.LIST_OFFSETS, 1, {"replica_id": DEBUG_CONSUMER, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}]})
    finally:
        conn.close()
    part = answer["topics"][0]["partitions"][0]
    assert part["error_code"] == ErrorCode.NONE, part
    return part["offset"]


def segment_bases(cluster, broker, topic):
    return sorted(int(f.stem) for f in partition_dir(cluster, broker, topic).glob("*.log"))


def test_the_follower_follows_the_leaders_log_start(cluster_factory):
    cluster = cluster_factory(2, overrides=OVERRIDES)
    cluster.set_broker_config(LEADER, {"log.retention.bytes": 4000})
    cluster.restart(LEADER)
    cluster.wait_registered([LEADER, FOLLOWER])
    create_topic(cluster, "trimmed", 1, 2, "--replica-assignment", f"{LEADER}:{FOLLOWER}")
    wait_isr(cluster, "trimmed", {LEADER, FOLLOWER})
    for i in range(15):                                        # one ~1.3 kB batch per segment
        produce(cluster, "trimmed", [b"%02d-%048d" % (i, j) for j in range(20)], acks=-1)

    # 300 records in ~1.3 kB segments, 4 kB kept: all but the last ~60 records go
    cluster.wait_until(lambda: earliest_offset(cluster, LEADER, "trimmed") >= 200, timeout=30,
                       message="the leader's retention did not delete its old segments")
    cluster.wait_until(lambda: earliest_offset(cluster, FOLLOWER, "trimmed") ==
                       earliest_offset(cluster, LEADER, "trimmed"), timeout=30,
                       message="the follower's log start did not follow the leader's")
    # and its segments wholly below the log start are deleted, without a retention limit of its own
    cluster.wait_until(lambda: len([b for b in segment_bases(cluster, FOLLOWER, "trimmed")
                                    if b <= earliest_offset(cluster, FOLLOWER, "trimmed")]) == 1,
                       timeout=30, message="the follower kept segments below its log start")


def test_a_quiet_topic_is_emptied_by_retention_ms(cluster_factory):
    """No append ever comes to roll the active segment: the retention pass rolls it once all
    of it is committed and older than retention.ms, then deletes it (3 s here, 60 s or a
    week in production: the same rule)."""
    cluster = cluster_factory(2, overrides=OVERRIDES)
    create_topic(cluster, "quiet", 1, 2, "--replica-assignment", f"{LEADER}:{FOLLOWER}",
                 "--config", "retention.ms=3000")
    wait_isr(cluster, "quiet", {LEADER, FOLLOWER})
    produce(cluster, "quiet", [b"only-%d" % i for i in range(10)], acks=-1)
    for broker in (LEADER, FOLLOWER):
        cluster.wait_until(lambda: earliest_offset(cluster, broker, "quiet") == 10, timeout=60,
                           message=f"broker {broker} kept the quiet topic's old records")
        cluster.wait_until(lambda: segment_bases(cluster, broker, "quiet") == [10], timeout=60,
                           message=f"broker {broker} kept the quiet topic's old segment")
    assert produce(cluster, "quiet", [b"later"], acks=-1) == [10]


def test_segment_ms_rolls_the_active_segment_on_the_next_append(cluster_factory):
    cluster = cluster_factory(1, overrides=OVERRIDES)
    create_topic(cluster, "timely", 1, 1, "--config", "segment.ms=1000")
    assert produce(cluster, "timely", [b"first"], acks=-1) == [0]
    assert segment_bases(cluster, LEADER, "timely") == [0]
    time.sleep(1.5)                         # the first batch's timestamp is now over 1 s old
    assert produce(cluster, "timely", [b"second"], acks=-1) == [1]
    assert segment_bases(cluster, LEADER, "timely") == [0, 1]
