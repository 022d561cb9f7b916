"""flush.messages, flush.ms and the recovery-point checkpoint on a real broker.

What a flush achieves (an fsync) cannot be seen from outside, but its bookkeeping
can: a flushed log's recovery point advances, and the broker writes the recovery
points to ``recovery-point-offset-checkpoint`` every
``log.flush.offset.checkpoint.interval.ms``, so that a restart after a crash
re-checks only what came after them.
"""

import pytest

from kafka_ha.admin.zk_admin import ZkAdmin
from tests.harness.kafka import create_topic, log_size, log_text, run_tool
from tests.harness.load import produce
from tests.harness.replica_files import recovery_point

pytestmark = pytest.mark.system

BROKER = 1
# Unset, log.flush.interval.ms would take the scheduler's 100 ms (Kafka's rule) and
# flush every log; an hour keeps topics without flush.ms unflushed for the test.
OVERRIDES = {"log.flush.offset.checkpoint.interval.ms": 200, "log.flush.scheduler.interval.ms": 100,
             "log.flush.interval.ms": 3600000}


def produce_n(cluster, topic, count):
    produce(cluster, topic, [b"m%d" % i for i in range(count)], acks=1)


def configs_tool(cluster, topic, *args):
    return run_tool("kafka-configs.sh", "--zookeeper", cluster.connect_string, "--entity-type", "topics",
                    "--entity-name", topic, "--alter", *args)


def test_flush_settings_advance_the_checkpointed_recovery_points(cluster_factory):
    cluster = cluster_factory(brokers=1, overrides=OVERRIDES)
    create_topic(cluster, "by-count", 1, 1, "--config", "flush.messages=1")
    create_topic(cluster, "by-time", 1, 1, "--config", "flush.ms=300")
    create_topic(cluster, "never", 1, 1)
    for topic in ("by-count", "by-time", "never"):
        produce_n(cluster, topic, 5)

    cluster.wait_until(lambda: recovery_point(cluster, BROKER, "by-count") == recovery_point(cluster, BROKER, "by-time") == 5,
                       timeout=30, message="recovery points of by-count and by-time not advanced to 5")
    # Checkpointed in the same file, after the others advanced: nothing flushed it.
    assert recovery_point(cluster, BROKER, "never") == 0

    # A dynamic change reaches the live log.
    assert configs_tool(cluster, "never", "--add-config", "flush.ms=0")[0] == 0
    cluster.wait_until(lambda: recovery_point(cluster, BROKER, "never") == 5, timeout=30,
                       message="flush.ms set by kafka-configs.sh not applied")


def test_an_unknown_cleanup_policy_is_refused_and_an_invalid_override_falls_back_to_the_default(
        cluster_factory):
    cluster = cluster_factory(brokers=1, overrides=OVERRIDES)
    rc, out, err = run_tool("kafka-topics.sh", "--zookeeper", cluster.connect_string, "--create",
                            "--topic", "compacted", "--partitions", "1", "--replication-factor", "1",
                            "--config", "cleanup.policy=snapshot")
    assert rc == 1 and "Invalid value snapshot for configuration cleanup.policy: String must be one of: " \
                       "compact, delete" in out + err, (rc, out, err)
    assert not cluster.zk.exists("/brokers/topics/compacted")

    create_topic(cluster, "t", 1, 1)
    produce_n(cluster, "t", 3)
    rc, out, err = configs_tool(cluster, "t", "--add-config", "cleanup.policy=snapshot")
    assert rc == 1 and "String must be one of: compact, delete" in out + err, (rc, out, err)

    # A tool written for Kafka's layout does not validate: its values reach the broker,
    # which names each one it cannot use and carries on with the rest.
    since = log_size(cluster, BROKER, "server.log")
    ZkAdmin(client=cluster.zk).change_topic_config(
        "t", {"cleanup.policy": "snapshot", "flush.messages": "-1", "flush.ms": "0"})
    cluster.wait_until(lambda: recovery_point(cluster, BROKER, "t") == 3, timeout=30,
                       message="the valid flush.ms=0 was not applied")
    named = ("Ignoring topic t's override cleanup.policy=snapshot, using the broker default",
             "Ignoring topic t's override flush.messages=-1, using the broker default")
    cluster.wait_until(lambda: all(line in log_text(cluster, BROKER, "server.log", since) for line in named),
                       timeout=30, message="the unusable overrides were not named in server.log")
    produce_n(cluster, "t", 2)
    cluster.wait_until(lambda: recovery_point(cluster, BROKER, "t") == 5, timeout=30,
                       message="the broker stopped serving the topic")
