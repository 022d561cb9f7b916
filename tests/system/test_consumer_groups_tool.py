"""kafka-consumer-groups.sh against real brokers: --describe --members/--state, every
--reset-offsets mode (refused while the group has members), and --delete."""
import pytest

kafka = pytest.importorskip("kafka", reason="kafka-python is a test dependency")

from kafka import KafkaProducer, TopicPartition  # noqa: E402

from tests.harness.cluster import SESSION_MS, wait_until  # noqa: E402
from tests.harness.kafka import create_topic, run_tool  # noqa: E402
from tests.system.test_consumer_groups import (  # noqa: E402
    GROUP_CONFIG, committed_now, kp_consumer, poll_until, produce)

pytestmark = pytest.mark.system

GROUP = "tooled"
OLD_MS, NEW_MS = 1_000_000_000_000, 1_900_000_000_000   # 2001 and 2030
BETWEEN = "2020-01-01T00:00:00.000Z"


def groups_tool(cluster, *args):
    return run_tool("kafka-consumer-groups.sh", "--bootstrap-server", cluster.bootstrap_servers,
                    *args)


def reset(cluster, *args):
    return groups_tool(cluster, "--reset-offsets", "--group", GROUP, *args)


def plan_of(out):
    """{(topic, partition): new offset} from a printed reset plan."""
    lines = [line.split() for line in out.strip().splitlines()]
    assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], out
    return {(t, int(p)): int(o) for g, t, p, o in lines[1:]}


def produce_at(cluster, topic, count, timestamp_ms):
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    for i in range(count):
        p.send(topic, value=b"t%d" % i, partition=0, timestamp_ms=timestamp_ms)
    p.flush()
    p.close()


def test_describe_reset_and_delete_a_group(cluster_factory):
    cluster = cluster_factory(3, GROUP_CONFIG, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "orders", 2, 3)
    create_topic(cluster, "timed", 1, 3)
    produce(cluster, "orders", 40)
    produce_at(cluster, "timed", 10, OLD_MS)
    produce_at(cluster, "timed", 10, NEW_MS)
    consumer = kp_consumer(cluster, GROUP, "orders", client_id="tool-client")
    poll_until(consumer, 40)
    consumer.commit()
    ends = {p: consumer.end_offsets([TopicPartition("orders", p)])[TopicPartition("orders", p)]
            for p in (0, 1)}
    try:
        rc, out, err = groups_tool(cluster, "--describe", "--group", GROUP, "--members",
                                   "--verbose")
        lines = [line.split() for line in out.strip().splitlines()]
        assert rc == 0 and lines[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                        "#PARTITIONS", "ASSIGNMENT"], (out, err)
        assert lines[1][0] == GROUP and lines[1][3:] == ["tool-client", "2", "orders(0,1)"]
        assert lines[1][2] == "/127.0.0.1", "the member's host, as Kafka shows it"
        rc, out, err = groups_tool(cluster, "--describe", "--group", GROUP, "--state")
        lines = [line.split() for line in out.strip().splitlines()]
        assert rc == 0 and lines[1][0] == GROUP and lines[1][-3:] == ["range", "Stable", "1"]
        assert lines[1][2].startswith("(") and ":" in lines[1][1], out
        # A group with members keeps its offsets: Kafka's refusal, nothing committed.
        rc, out, err = reset(cluster, "--all-topics", "--to-earliest", "--execute")
        assert rc == 1 and (f"Assignments can only be reset if the group '{GROUP}' is inactive, "
                            "but the current state is Stable.") in err
        rc, out, err = groups_tool(cluster, "--delete", "--group", GROUP)
        assert rc == 1 and f"Group '{GROUP}' could not be deleted due to: NON_EMPTY_GROUP" in err
    finally:
        consumer.close()   # leaves the group: Empty
    assert committed_now(cluster, GROUP, "orders", (0, 1)) == ends

    # --dry-run prints the plan and changes nothing.
    rc, out, err = reset(cluster, "--all-topics", "--to-earliest", "--dry-run")
    assert rc == 0 and plan_of(out) == {("orders", 0): 0, ("orders", 1): 0}, (out, err)
    assert committed_now(cluster, GROUP, "orders", (0, 1)) == ends

    rc, out, err = reset(cluster, "--topic", "orders:0", "--to-offset", "5", "--execute")
    assert rc == 0 and plan_of(out) == {("orders", 0): 5}, err
    assert committed_now(cluster, GROUP, "orders", (0, 1)) == {0: 5, 1: ends[1]}

    rc, out, err = reset(cluster, "--topic", "orders", "--shift-by", "-3", "--execute")
    assert rc == 0 and plan_of(out) == {("orders", 0): 2, ("orders", 1): ends[1] - 3}, err

    rc, out, err = reset(cluster, "--all-topics", "--to-earliest", "--execute")
    assert committed_now(cluster, GROUP, "orders", (0, 1)) == {0: 0, 1: 0}
    rc, out, err = reset(cluster, "--topic", "orders:1", "--to-latest", "--execute")
    assert rc == 0 and committed_now(cluster, GROUP, "orders", (1,)) == {1: ends[1]}

    rc, out, err = reset(cluster, "--topic", "orders:1", "--to-offset", str(ends[1] + 100),
                         "--execute")
    assert rc == 0 and plan_of(out) == {("orders", 1): ends[1]}
    assert "is higher than latest offset for topic partition orders-1" in err

    # --to-datetime: the first record at or after the time (ListOffsets by timestamp).
    rc, out, err = reset(cluster, "--topic", "timed", "--to-datetime", BETWEEN, "--execute")
    assert rc == 0 and plan_of(out) == {("timed", 0): 10}, (out, err)
    assert committed_now(cluster, GROUP, "timed", (0,)) == {0: 10}

    rc, out, err = reset(cluster, "--topic", "nosuch", "--to-earliest", "--execute")
    assert rc == 1 and "Topic 'nosuch' does not exist" in err
    rc, out, err = reset(cluster, "--topic", "orders:7", "--to-earliest", "--execute")
    assert rc == 1 and "Partition 7 of topic 'orders' does not exist" in err

    rc, out, err = groups_tool(cluster, "--delete", "--group", GROUP)
    assert rc == 0 and out.strip() == \
        f"Deletion of requested consumer groups ('{GROUP}') was successful.", err
    rc, out, err = groups_tool(cluster, "--list")
    assert rc == 0 and GROUP not in out.split()
    assert committed_now(cluster, GROUP, "orders", (0, 1)) == {0: None, 1: None}
    rc, out, err = groups_tool(cluster, "--describe", "--group", GROUP)
    assert rc == 1 and f"Consumer group '{GROUP}' does not exist." in err
    rc, out, err = groups_tool(cluster, "--delete", "--group", GROUP)
    assert rc == 1 and "GROUP_ID_NOT_FOUND" in err


def test_a_deleted_group_stays_deleted_after_its_coordinator_moves(cluster_factory):
    """The tombstones are in __consumer_offsets: a new coordinator loads no offsets."""
    from kafka_ha.coordinator.placement import OFFSETS_TOPIC, partition_for
    from tests.harness.kafka import read_state
    cluster = cluster_factory(3, GROUP_CONFIG, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "orders", 1, 3)
    produce(cluster, "orders", 10)
    rc, out, err = reset(cluster, "--topic", "orders", "--to-offset", "7", "--execute")
    assert rc == 0 and committed_now(cluster, GROUP, "orders", (0,)) == {0: 7}, err
    rc, out, err = groups_tool(cluster, "--delete", "--group", GROUP)
    assert rc == 0, err
    partition = partition_for(GROUP, 50)
    leader = read_state(cluster, OFFSETS_TOPIC, partition).leader
    cluster.kill(leader)
    wait_until(lambda: read_state(cluster, OFFSETS_TOPIC, partition).leader not in (leader, -1),
               timeout=60, message="no new leader for the group's offsets partition")
    assert committed_now(cluster, GROUP, "orders", (0,)) == {0: None}


def test_unmodified_admin_clients_delete_groups(cluster_factory):
    """DeleteGroups as kafka-python's and confluent-kafka's admin clients send it."""
    from kafka.admin import KafkaAdminClient
    confluent_admin = pytest.importorskip("confluent_kafka.admin")
    cluster = cluster_factory(3, GROUP_CONFIG, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "orders", 1, 3)
    produce(cluster, "orders", 10)
    for group in ("by-kafka-python", "by-confluent"):
        rc, out, err = groups_tool(cluster, "--reset-offsets", "--group", group, "--topic",
                                   "orders", "--to-offset", "4", "--execute")
        assert rc == 0 and committed_now(cluster, group, "orders", (0,)) == {0: 4}, err
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        results = dict(admin.delete_groups(["by-kafka-python", "nobody"]))
    finally:
        admin.close()
    assert results == {"by-kafka-python": "OK", "nobody": "GroupIdNotFoundError"}, results
    client = confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = client.delete_consumer_groups(["by-confluent"], request_timeout=30)
    futures["by-confluent"].result(timeout=60)
    assert committed_now(cluster, "by-kafka-python", "orders", (0,)) == {0: None}
    assert committed_now(cluster, "by-confluent", "orders", (0,)) == {0: None}
