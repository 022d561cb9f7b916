"""Concurrent admin operations (failure scenario #23, docs/design.md §9).

"Two creates of one topic, two reassignments, delete during a reassignment, add partitions
during a controller failover.  Expected: exactly one create wins; the second reassignment
is refused while one is pending; the deletion is deferred; each operation is applied whole
or refused."

The operations are the real scripts in bin/, run as concurrent processes where
concurrency matters.  Where the outcome depends on how the two interleave, the test
forces the interleaving instead of hoping for it: a :class:`ZkRequestGate` between a
tool and ZooKeeper stops the tool just before or after a write, a reassignment is kept
pending by a target broker that is down, and a controller is frozen before it is killed.
"""

import json
from pathlib import Path

import pytest

from kafka_ha.client.producer import Producer
from kafka_ha.zk import admin_znodes as azn
from tests.harness.kafka import (controller_epoch, create_topic, finish_tool, log_text, read_assignment,
                                 read_states, start_tool, topics_cli)
from tests.harness.load import read_partitions
from tests.harness.zk_gate import SET_DATA, WRITES, ZkRequestGate
from tests.system.test_admin_operations import data_dirs

pytestmark = pytest.mark.system
SESSION_MS = 4000
EXPIRY_S = SESSION_MS / 1000 + 20
ALREADY_EXISTS = 'Error while executing topic command : Topic "race" already exists.'
IN_PROGRESS = "Partitions reassignment failed due to Partition reassignment currently in progress for Map("


# ---- two creates of one topic -------------------------------------------------------------

# Two creates of "race" that differ in everything they write.
CREATES = {"first": ("1:2,2:3", "retention.ms=1000"), "second": ("3:1", "retention.ms=2000")}


def start_create(connect, name):
    assignment, config = CREATES[name]
    return start_tool("kafka-topics.sh", "--zookeeper", connect, "--create", "--topic", "race",
                      "--replica-assignment", assignment, "--config", config)


def the_winner(results):
    """The create that succeeded, after checking that the other failed as Kafka's does."""
    winners = [name for name, (rc, _, _) in results.items() if rc == 0]
    assert len(winners) == 1, f"exactly one create must win: {results}"
    for name, (rc, out, err) in results.items():
        if name != winners[0]:
            assert rc == 1 and ALREADY_EXISTS in out, (name, rc, out, err)
        else:
            assert 'Created topic "race".' in out, (name, out, err)
    return winners[0]


def assert_topic_is_all_of(cluster, name):
    """"race" has the assignment and the config of create ``name``, nothing of the other, and
    the controller brought exactly those partitions online."""
    assignment, config = CREATES[name]
    expected = {p: tuple(map(int, r.split(":"))) for p, r in enumerate(assignment.split(","))}
    assert read_assignment(cluster, "race").partitions == expected
    path = azn.TopicConfigZNode.path("race")
    stored = azn.TopicConfigZNode.decode(cluster.zk.get(path)[0], path)
    assert stored == dict([config.split("=")]), f"the topic has {stored}, not the config of the {name} create"
    states = cluster.wait_until(lambda: len(s := read_states(cluster, "race")) == len(expected) and s,
                                message="the winner's partitions did not come online")
    assert {p: s.leader for p, s in states.items()} == {p: r[0] for p, r in expected.items()}


def test_two_creates_of_one_topic_started_at_once(cluster_factory):
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    started = {name: start_create(cluster.connect_string, name) for name in CREATES}
    results = {name: finish_tool(process) for name, process in started.items()}
    assert_topic_is_all_of(cluster, the_winner(results))


def test_a_create_that_runs_while_another_is_between_its_writes(cluster_factory):
    """The first create is stopped right after its first write to ZooKeeper; the second then
    runs up to its own first write and is stopped there too; the first finishes, then the
    second.  (A create that makes a single write never stops.)  Before the fix the first
    wrote the config and stopped, the second saw that config, overwrote it with its own and
    stopped, the first created the topic, and the topic carried the loser's config."""
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    gates = {name: ZkRequestGate(cluster.zk_servers) for name in CREATES}
    try:
        started = {}
        for name, gate in gates.items():
            gate.arm(b"topics/race", opcodes=WRITES, passing=1)
            started[name] = process = start_create(gate.connect_string + cluster.chroot, name)
            cluster.wait_until(lambda: gate.held.is_set() or process.poll() is not None, timeout=60,
                               message=f"the {name} create neither wrote nor finished")
        results = {}
        for name, gate in gates.items():
            gate.release()
            results[name] = finish_tool(started[name])
    finally:
        for gate in gates.values():
            gate.close()
    assert_topic_is_all_of(cluster, the_winner(results))


def test_an_add_of_partitions_that_read_before_another_is_rejected_whole(cluster_factory):
    """Two --alter --partitions of one topic that read the same assignment: the first is
    stopped before it writes, the second adds its partition, then the first writes at the
    version it read.  It must be refused with Kafka's error line (not a traceback), and
    the topic keep exactly the second's partitions."""
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    rc, out, err = topics_cli(cluster, "--create", "--topic", "race", "--partitions", 2, "--replication-factor", 2)
    assert rc == 0, out + err
    with ZkRequestGate(cluster.zk_servers) as gate:
        gate.arm(b"topics/race", opcodes=(SET_DATA,), passing=0)
        stopped = start_tool("kafka-topics.sh", "--zookeeper", gate.connect_string + cluster.chroot,
                             "--alter", "--topic", "race", "--partitions", 4)
        cluster.wait_until(gate.held.is_set, timeout=60, message="the first --alter did not write")
        rc, out, err = topics_cli(cluster, "--alter", "--topic", "race", "--partitions", 3)
        assert rc == 0 and out.endswith("Adding partitions succeeded!\n"), out + err
        gate.release()
        rc, out, err = finish_tool(stopped)
    assert rc == 1 and "Error while executing topic command : Topic race changed" in out and not err, (out, err)
    assert sorted(read_assignment(cluster, "race").partitions) == [0, 1, 2]
    cluster.wait_until(lambda: len(read_states(cluster, "race")) == 3, message="partition 2 did not come online")


# ---- two reassignments, and a deletion, while one is pending --------------------------------

def start_reassignment(cluster, name, moves):
    """``kafka-reassign-partitions.sh --execute`` of ``moves`` ({partition: replicas} of "moving")."""
    path = Path(cluster.dir) / f"reassign-{name}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": p, "replicas": list(r)} for p, r in moves.items()]}))
    return start_tool("kafka-reassign-partitions.sh", "--zookeeper", cluster.connect_string,
                      "--reassignment-json-file", path, "--execute")


def pending_reassignment(cluster):
    """{partition: replicas} of "moving" in /admin/reassign_partitions (None if absent)."""
    if not cluster.zk.exists(azn.ReassignPartitionsZNode.PATH):
        return None
    data, _ = cluster.zk.get(azn.ReassignPartitionsZNode.PATH)
    return {tp.partition: tuple(r) for tp, r in azn.ReassignPartitionsZNode.decode(data).items()}


def the_accepted_plan(results, plans):
    """The plan whose --execute succeeded, after checking that the other was refused."""
    accepted = [name for name, (rc, _, _) in results.items() if rc == 0]
    assert len(accepted) == 1, f"exactly one reassignment must start: {results}"
    for name, (rc, out, err) in results.items():
        if name == accepted[0]:
            assert "Successfully started reassignment of partitions" in out, (out, err)
        else:
            assert rc == 1 and IN_PROGRESS in out and "Aborting operation" in out, (rc, out, err)
    return plans[accepted[0]]


def wait_controller_log(cluster, controller, text):
    cluster.wait_until(lambda: text in log_text(cluster, controller, "controller.log"), timeout=30,
                       message=f"the controller did not log {text!r}")


def test_second_reassignment_refused_and_deletion_deferred_while_one_is_pending(cluster_factory):
    """Two reassignments started at once: one is accepted and the other refused, whichever
    comes first.  The accepted one stays pending (its target broker is down), so a deletion
    of the topic meanwhile is marked but deferred; when the broker returns the reassignment
    completes, and only then is the topic deleted."""
    cluster = cluster_factory(4, {"auto.leader.rebalance.enable": False}, session_timeout_ms=SESSION_MS)
    controller = cluster.wait_until(cluster.controller, message="no controller")
    target = max(set(cluster.broker_ids) - {controller})
    a, b, c = sorted(set(cluster.broker_ids) - {target})
    rc, out, err = topics_cli(cluster, "--create", "--topic", "moving", "--replica-assignment", f"{a}:{b},{b}:{c}")
    assert rc == 0, out + err
    cluster.kill(target)
    cluster.wait_deregistered(target)

    plans = {"first": {0: (a, target)}, "second": {1: (b, target)}}
    started = {name: start_reassignment(cluster, name, moves) for name, moves in plans.items()}
    accepted = the_accepted_plan({name: finish_tool(p) for name, p in started.items()}, plans)
    assert pending_reassignment(cluster) == accepted, "the refused plan must write nothing"
    wait_controller_log(cluster, controller, f"waits for brokers [{target}] to register")

    rc, out, err = topics_cli(cluster, "--delete", "--topic", "moving")
    assert rc == 0 and "Topic moving is marked for deletion." in out, out + err
    wait_controller_log(cluster, controller, "Deletion of topic moving waits for its reassignment to finish")
    assert cluster.zk.exists("/brokers/topics/moving") and cluster.zk.exists("/admin/delete_topics/moving")
    assert pending_reassignment(cluster) == accepted
    assert read_assignment(cluster, "moving").partitions == {0: (a, b), 1: (b, c)}

    cluster.start_broker(target)
    cluster.wait_until(lambda: not cluster.zk.exists("/admin/delete_topics/moving"), timeout=90,
                       message="the deferred deletion did not complete after the reassignment")
    assert not cluster.zk.exists("/brokers/topics/moving") and pending_reassignment(cluster) is None
    text = log_text(cluster, controller, "controller.log")
    (p, replicas), = accepted.items()
    completed = text.find(f"Reassignment of partition [moving,{p}] to {list(replicas)} completed")
    deletion = text.find("Deletion of topic moving started")
    assert 0 <= completed < deletion, "the deletion must start after the reassignment completed"
    cluster.wait_until(lambda: not data_dirs(cluster, "moving"), timeout=30,
                       message="replicas of the deleted topic are still on disk")


# ---- add partitions during a controller failover ----------------------------------------------

def test_partitions_added_while_the_controller_dies_come_online(cluster_factory):
    """The controller is frozen while kafka-topics.sh --alter adds partitions, then killed:
    it never sees the change.  Its successor must find the new partitions in the assignment
    and bring them online with live leaders, and they must take writes."""
    cluster = cluster_factory(3, {"auto.leader.rebalance.enable": False}, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "growing", 2, 3)
    controller = cluster.wait_until(cluster.controller, message="no controller")
    epoch, _ = controller_epoch(cluster)

    cluster.sigstop(controller)
    rc, out, err = topics_cli(cluster, "--alter", "--topic", "growing", "--partitions", 5)
    assert rc == 0 and out.endswith("Adding partitions succeeded!\n"), out + err
    cluster.kill(controller)
    live = set(cluster.broker_ids) - {controller}

    cluster.wait_until(lambda: cluster.controller() in live, timeout=EXPIRY_S, message="no new controller")
    assert controller_epoch(cluster)[0] == epoch + 1
    assert len(read_assignment(cluster, "growing").partitions) == 5
    states = cluster.wait_until(
        lambda: len(s := read_states(cluster, "growing")) == 5 and all(
            x.leader in live and x.leader in x.isr for x in s.values()) and s,
        timeout=30, message="the added partitions did not come online with live leaders")
    assert all(states[p].controller_epoch == epoch + 1 for p in (2, 3, 4)), "the dead controller saw the alter"
    producer = Producer(cluster.bootstrap_of(sorted(live)), acks=-1, retries=20)
    try:
        for p in range(5):
            producer.send("growing", b"p%d" % p, partition=p).get(timeout=30)
    finally:
        producer.close()
    assert sorted(r.value for r in read_partitions(cluster, "growing", 5)) == [b"p%d" % p for p in range(5)]
