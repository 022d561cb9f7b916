"""Consumer groups (the group coordinator) with unmodified clients against real brokers."""

import time

import pytest

kafka = pytest.importorskip("kafka", reason="kafka-python is a test dependency")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

from tests.harness.cluster import SESSION_MS, wait_until  # noqa: E402
from tests.harness.kafka import create_topic  # noqa: E402

pytestmark = pytest.mark.system

# Short group timeouts so that the tests wait seconds, not Kafka's minutes.
GROUP_CONFIG = {"group.initial.rebalance.delay.ms": 500, "group.min.session.timeout.ms": 1000}


def produce(cluster, topic, count, prefix=b"v"):
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                      request_timeout_ms=15000, max_block_ms=30000)
    for i in range(count):
        p.send(topic, key=b"k%d" % i, value=prefix + b"%d" % i)
    p.flush()
    p.close()


def kp_consumer(cluster, group, topic, **kw):
    return KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         session_timeout_ms=6000, heartbeat_interval_ms=500,
                         fetch_max_wait_ms=200, **kw)


def poll_until(consumer, count, timeout_s=60):
    records = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count:
        assert time.monotonic() < deadline, f"got {len(records)} of {count} records"
        for rs in consumer.poll(timeout_ms=500).values():
            records.extend(rs)
    return records


def test_kafka_python_group_consumer_reads_commits_and_resumes(cluster_factory):
    cluster = cluster_factory(3, GROUP_CONFIG, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "orders", 3, 3)
    produce(cluster, "orders", 60)
    consumer = kp_consumer(cluster, "g1", "orders")
    records = poll_until(consumer, 60)
    assert sorted(r.value for r in records) == sorted(b"v%d" % i for i in range(60))
    assert consumer.assignment() == {TopicPartition("orders", p) for p in range(3)}
    consumer.commit()
    committed = {p: consumer.committed(TopicPartition("orders", p)) for p in range(3)}
    assert sum(committed.values()) == 60
    consumer.close()
    # Commits of v1+ live in __consumer_offsets, not in ZooKeeper's 0.8 layout.
    assert not cluster.zk.exists("/consumers/g1/offsets/orders/0")
    produce(cluster, "orders", 30, prefix=b"w")
    again = kp_consumer(cluster, "g1", "orders")
    more = poll_until(again, 30)
    assert sorted(r.value for r in more) == sorted(b"w%d" % i for i in range(30))
    again.close()


CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka")


def start_members(cluster, group, topic, clients=CLIENTS, tag="a"):
    from tests.harness.group_member import MemberProcess
    return [MemberProcess(c, cluster.bootstrap_servers, group, topic,
                          cluster.dir / f"member-{tag}-{c}.log") for c in clients]


def split_between(members, partitions):
    """Every member holds some partitions, none twice, all of them covered."""
    sets = [m.assigned for m in members]
    if any(not s for s in sets):
        return False
    return sum(len(s) for s in sets) == len(partitions) and set().union(*sets) == set(partitions)


def consumed_values(members):
    return {v for m in members for _, _, v in m.records()}


def test_three_clients_split_partitions_and_take_over_from_a_killed_member(cluster_factory):
    cluster = cluster_factory(3, GROUP_CONFIG, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "mixed", 6, 3)
    members = start_members(cluster, "mix", "mixed")
    try:
        wait_until(lambda: split_between(members, range(6)), timeout=120,
                   message=f"partitions not split: {[m.assigned for m in members]}")
        # Produced once split: each member reads its own partitions (had the records been
        # there before, a member that joined first could have read them all).
        produce(cluster, "mixed", 600)
        wait_until(lambda: len(consumed_values(members)) >= 600, timeout=60,
                   message="not everything consumed")
        assert all(m.records() for m in members), "a member read nothing"
        victim, survivors = members[0], members[1:]
        held = victim.assigned
        print("assignments before the kill:", {m.client: sorted(m.assigned) for m in members})
        victim.kill()
        # Its session (6 s) runs out; the others rebalance and take its partitions over.
        wait_until(lambda: split_between(survivors, range(6)), timeout=60,
                   message=f"{held} not taken over: {[m.assigned for m in survivors]}")
        produce(cluster, "mixed", 300, prefix=b"w")
        wait_until(lambda: {b"w%d" % i for i in range(300)} <=
                   {v.encode() for v in consumed_values(survivors)}, timeout=60,
                   message="records after the kill not consumed")
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.stop()


def last_commits(members):
    """Per partition, the highest offset a member was told it committed."""
    best = {}
    for m in members:
        for commit in m.commits():
            for p, o in commit.items():
                best[p] = max(best.get(p, 0), o)
    return best


def first_offsets(members):
    first = {}
    for m in members:
        for p, o, _ in m.records():
            first[p] = min(first.get(p, o), o)
    return first


def stop_all(members):
    for m in members:
        if m.proc.poll() is None:
            m.stop()


def restart_every_broker(cluster):
    """Stop every broker, then start them all: each coordinator reloads its groups from the log."""
    for i in cluster.broker_ids:
        cluster.cluster.stop_broker(i, 10.0)
    for i in cluster.broker_ids:
        cluster.start_broker(i, wait=False)
    for i in cluster.broker_ids:
        wait_until(lambda: cluster.broker_alive(i), timeout=60)


def test_after_everything_restarts_consumption_resumes_from_the_committed_offsets(cluster_factory):
    cluster = cluster_factory(3, GROUP_CONFIG, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "resume", 6, 3)
    produce(cluster, "resume", 600)
    members = start_members(cluster, "res", "resume")
    try:
        wait_until(lambda: sum(last_commits(members).values()) == 600, timeout=120,
                   message=f"commits never covered the 600 records: {last_commits(members)}")
    finally:
        stop_all(members)
    committed = last_commits(members)
    restart_every_broker(cluster)
    produce(cluster, "resume", 300, prefix=b"w")
    again = start_members(cluster, "res", "resume", tag="b")
    try:
        wait_until(lambda: {"w%d" % i for i in range(300)} <= consumed_values(again),
                   timeout=180, message="records after the restart not consumed")
    finally:
        stop_all(again)
    # Nothing before the commits is read again, nothing after them is skipped.
    assert first_offsets(again) == committed
    everything = consumed_values(members) | consumed_values(again)
    assert everything >= {"v%d" % i for i in range(600)} | {"w%d" % i for i in range(300)}


def committed_now(cluster, group, topic, partitions):
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                             enable_auto_commit=False, request_timeout_ms=30000)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in partitions}
    finally:
        consumer.close()


def test_killing_the_coordinators_broker_loses_no_committed_offset(cluster_factory):
    import threading

    from kafka_ha.coordinator.placement import OFFSETS_TOPIC, partition_for
    from tests.harness.kafka import read_state
    cluster = cluster_factory(3, GROUP_CONFIG, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "busy", 6, 3)
    members = start_members(cluster, "kc", "busy")
    sent, stop = [], threading.Event()

    def keep_producing():
        p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", retries=100,
                          request_timeout_ms=15000, max_block_ms=60000)
        i = 0
        while not stop.is_set():
            value = b"v%d" % i
            p.send("busy", key=b"k%d" % i, value=value).get(timeout=60)
            sent.append(value.decode())
            i += 1
            time.sleep(0.005)
        p.close()
    producer_thread = threading.Thread(target=keep_producing, daemon=True)
    try:
        wait_until(lambda: split_between(members, range(6)), timeout=120,
                   message=f"partitions not split: {[m.assigned for m in members]}")
        producer_thread.start()
        wait_until(lambda: len(last_commits(members)) == 6, timeout=60, message="no commits")
        coordinator = read_state(cluster, OFFSETS_TOPIC, partition_for("kc", 50)).leader
        acked_before = last_commits(members)
        cluster.kill(coordinator)
        # Commits go on against the new coordinator (the new leader of the group's partition).
        wait_until(lambda: all(last_commits(members).get(p, 0) > acked_before[p] + 20
                               for p in range(6)), timeout=120,
                   message=f"commits stalled after the kill: {last_commits(members)}")
        stop.set()
        producer_thread.join(timeout=120)
        wait_until(lambda: set(sent) <= consumed_values(members), timeout=120,
                   message="not every acknowledged record was consumed")
    finally:
        stop.set()
        stop_all(members)
    moved_to = read_state(cluster, OFFSETS_TOPIC, partition_for("kc", 50)).leader
    assert moved_to not in (coordinator, -1)
    acked = last_commits(members)
    stored = committed_now(cluster, "kc", "busy", range(6))
    # Every commit a member was told succeeded is still there (or a later one is).
    assert all(stored[p] >= acked[p] for p in range(6)), (stored, acked)
    assert set(sent) <= consumed_values(members)


def test_consumer_groups_tool_lists_and_describes(cluster_factory):
    from tests.harness.kafka import run_tool
    cluster = cluster_factory(3, GROUP_CONFIG, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "described", 2, 3)
    produce(cluster, "described", 40)
    consumer = kp_consumer(cluster, "tooled", "described", client_id="tool-test")
    poll_until(consumer, 40)
    consumer.commit({TopicPartition("described", 0): kafka.OffsetAndMetadata(3, "", -1)})
    try:
        rc, out, err = run_tool("kafka-consumer-groups.sh", "--bootstrap-server",
                                cluster.bootstrap_servers, "--list")
        assert rc == 0 and out.split() == ["tooled"], err
        rc, out, err = run_tool("kafka-consumer-groups.sh", "--bootstrap-server",
                                cluster.bootstrap_servers, "--describe", "--group", "tooled")
        assert rc == 0, err
        lines = [line.split() for line in out.strip().splitlines()]
        assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                            "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        rows = {int(r[2]): r for r in lines[1:]}
        ends = {p: consumer.end_offsets([TopicPartition("described", p)])[
            TopicPartition("described", p)] for p in (0, 1)}
        assert rows[0][3:6] == ["3", str(ends[0]), str(ends[0] - 3)]
        assert rows[1][3] == "-" and rows[1][8] == "tool-test"
        rc, out, err = run_tool("kafka-consumer-groups.sh", "--bootstrap-server",
                                cluster.bootstrap_servers, "--describe", "--group", "tooled",
                                "--state")
        assert rc == 0 and out.split()[-2:] == ["Stable", "1"] and "range" in out, out
    finally:
        consumer.close()
    rc, out, err = run_tool("kafka-consumer-groups.sh", "--bootstrap-server",
                            cluster.bootstrap_servers, "--describe", "--group", "nobody")
    assert rc == 1 and "Consumer group 'nobody' does not exist." in err


def test_a_member_gone_while_every_broker_was_down_expires_and_the_group_goes_on(cluster_factory):
    """A member killed (no LeaveGroup) just before every broker stops is still in the
    group's last record.  The coordinator that loads the group after the restart must let
    its session run out, so that the group's next rebalance completes without it; the
    loader once started those sessions on the wall clock while the coordinator's timer
    reads the monotonic one, and the member never expired."""
    cluster = cluster_factory(3, GROUP_CONFIG, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "gone", 3, 3)
    produce(cluster, "gone", 30)
    [member] = start_members(cluster, "gone-g", "gone", clients=("kafka-python",))
    try:
        wait_until(lambda: sum(last_commits([member]).values()) == 30, timeout=120,
                   message=f"commits never covered the 30 records: {last_commits([member])}")
    finally:
        member.kill()
    restart_every_broker(cluster)
    produce(cluster, "gone", 30, prefix=b"w")
    [again] = start_members(cluster, "gone-g", "gone", clients=("kafka-python",), tag="b")
    try:
        # The dead member's session (6 s) runs out after the load; then the rebalance ends.
        wait_until(lambda: {"w%d" % i for i in range(30)} <= consumed_values([again]), timeout=90,
                   message="the group never rebalanced without the member that was gone")
    finally:
        stop_all([again])
    assert first_offsets([again]) == last_commits([member])
