"""Admin operations end to end: deletion, preferred election, controlled shutdown, reassignment,
configs; driven through the /admin znodes, whoever writes them."""

import json
import signal
import time
from pathlib import Path

import pytest

from kafka_ha.client.producer import Producer
from tests.harness.cluster import SESSION_MS
from tests.harness.kafka import create_topic, log_text, read_assignment, read_states, run_tool, topics_cli
from tests.harness.load import BackgroundProducer, read_partitions
from tests.harness.replica_files import topic_dirs

pytestmark = pytest.mark.system


def test_delete_topic_waits_for_a_dead_replica(cluster_factory):
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "doomed", 3, 2)
    Producer(cluster.bootstrap_servers, acks=-1).send("doomed", b"x", partition=0).get(timeout=30)
    # New logs get their directories in the pass after LeaderAndIsr (lazy logs).
    cluster.wait_until(lambda: len(topic_dirs(cluster, "doomed")) == 6, timeout=30,
                       message="the topic's 6 log directories were not created")
    cluster.kill(3)
    cluster.wait_deregistered(3)
    rc, out, err = topics_cli(cluster, "--delete", "--topic", "doomed")
    assert rc == 0 and "Topic doomed is marked for deletion." in out, (rc, out, err[-2000:])
    time.sleep(3)
    assert cluster.zk.exists("/admin/delete_topics/doomed"), "must wait for broker 3"
    assert cluster.zk.exists("/brokers/topics/doomed")
    rc, out, _ = topics_cli(cluster, "--create", "--topic", "doomed", "--partitions", "1",
                            "--replication-factor", "1")
    assert rc == 1, "a topic marked for deletion cannot be created again"
    cluster.start_broker(3)
    cluster.wait_until(lambda: not cluster.zk.exists("/admin/delete_topics/doomed"), timeout=60,
                       message="deletion did not complete after the broker returned")
    assert not cluster.zk.exists("/brokers/topics/doomed")
    assert not cluster.zk.exists("/config/topics/doomed")
    cluster.wait_until(lambda: not topic_dirs(cluster, "doomed"), timeout=30,
                       message="logs of the deleted topic are still on disk")
    # re-created: none of the old data resurfaces
    create_topic(cluster, "doomed", 1, 1)
    assert read_partitions(cluster, "doomed", 1) == []


def bounce(cluster, topic, broker):
    """kill -9 ``broker``, wait until it leads nothing, restart it, wait until it is back in every ISR;
    returns the preferred leader of each partition."""
    preferred = {p: a[0] for p, a in read_assignment(cluster, topic).partitions.items()}
    cluster.kill(broker)
    cluster.wait_until(lambda: all(s.leader != broker for s in read_states(cluster, topic).values()),
                       timeout=SESSION_MS / 1000 + 20, message="no failover")
    cluster.start_broker(broker)
    cluster.wait_until(lambda: all(len(s.isr) == 3 for s in read_states(cluster, topic).values()),
                       timeout=60, message=f"broker {broker} did not rejoin the ISRs")
    return preferred


def test_preferred_election_after_bounce_and_auto_rebalance(cluster_factory):
    cluster = cluster_factory(3, {"leader.imbalance.check.interval.seconds": 5},
                              session_timeout_ms=SESSION_MS)
    create_topic(cluster, "pref", 6, 3)
    preferred = bounce(cluster, "pref", 1)
    # auto rebalance (every 5 s here) moves leadership back by itself
    cluster.wait_until(lambda: {p: s.leader for p, s in read_states(cluster, "pref").items()} == preferred,
                       timeout=30, message="auto rebalance did not restore preferred leaders")


def test_preferred_replica_election_tool(cluster_factory):
    cluster = cluster_factory(3, {"auto.leader.rebalance.enable": False}, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "manual", 3, 3)
    preferred = bounce(cluster, "manual", 2)
    assert {p: s.leader for p, s in read_states(cluster, "manual").items()} != preferred
    rc, out, err = run_tool("kafka-preferred-replica-election.sh", "--zookeeper", cluster.connect_string)
    assert rc == 0, out + err
    cluster.wait_until(lambda: not cluster.zk.exists("/admin/preferred_replica_election"), timeout=30,
                       message="the controller did not finish the election")
    assert {p: s.leader for p, s in read_states(cluster, "manual").items()} == preferred


def test_controlled_shutdown_moves_leadership_before_exit(cluster_factory):
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "graceful", 3, 3)
    states = read_states(cluster, "graceful")
    leader = states[0].leader
    cluster.kill(leader, signal.SIGTERM)
    after = read_states(cluster, "graceful")
    # moved while the broker was still registered: no session timeout to wait for
    assert all(s.leader != leader for s in after.values())
    assert all(leader not in s.isr for s in after.values())
    assert "Controlled shutdown of broker %d succeeded" % leader in log_text(cluster, leader, "server.log")


def reassign(cluster, plan, *flags):
    path = Path(cluster.dir) / "reassign.json"
    path.write_text(json.dumps(plan))
    return run_tool("kafka-reassign-partitions.sh", "--zookeeper", cluster.connect_string,
                    "--reassignment-json-file", str(path), *flags, timeout_s=180)


def test_reassignment_under_load(cluster_factory):
    cluster = cluster_factory(4, {"auto.leader.rebalance.enable": False}, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "moving", 6, 3, "--replica-assignment", "1:2:3,2:3:1,3:1:2,1:2:3,2:3:1,3:1:2")
    plan = {"version": 1, "partitions": [
        {"topic": "moving", "partition": p, "replicas": [2 + (p + j) % 3 for j in range(3)]}
        for p in range(6)]}
    with BackgroundProducer(cluster, "moving") as load:
        time.sleep(1)
        rc, out, err = reassign(cluster, plan, "--execute")
        assert rc == 0 and "Successfully started reassignment" in out, out + err
        rc, out, err = reassign(cluster, plan, "--verify", "--wait", "--timeout", "150")
        assert rc == 0, out + err
        time.sleep(1)
    for p in range(6):
        assert f"Reassignment of partition [moving,{p}] completed successfully" in out
    assert not cluster.zk.exists("/admin/reassign_partitions")
    states = read_states(cluster, "moving")
    assert all(set(s.isr) <= {2, 3, 4} for s in states.values()), states
    cluster.wait_until(lambda: not [d for d in topic_dirs(cluster, "moving")
                                    if d.parent.parent.name == "broker-1"], timeout=30,
                       message="the old replicas on broker 1 were not deleted")
    load.check_nothing_lost(cluster, 6)
    rc, out, err = run_tool("kafka-replica-verification.sh", "--broker-list", cluster.bootstrap_servers,
                            "--topic-white-list", "moving", "--time", "-2", "--once", timeout_s=120)
    assert rc == 0, out + err


def test_reassignment_written_by_another_tool_survives_controller_kill(cluster_factory):
    cluster = cluster_factory(4, {"auto.leader.rebalance.enable": False}, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "other", 2, 2, "--replica-assignment", "1:2,2:1")
    Producer(cluster.bootstrap_servers, acks=-1).send("other", b"payload", partition=0).get(timeout=30)
    controller = cluster.wait_until(cluster.controller, message="no controller")
    # Targets outside the current replicas where possible, never the controller: it is
    # killed and stays dead, and a reassignment waits for its targets to register.
    a, b = sorted(set(cluster.broker_ids) - {controller}, key=lambda x: (x in (1, 2), x))[:2]
    # spaces, sorted keys, version last: as other tools write it
    cluster.zk.create("/admin/reassign_partitions", json.dumps(
        {"partitions": [{"partition": 0, "replicas": [a, b], "topic": "other"},
                        {"partition": 1, "replicas": [b, a], "topic": "other"}], "version": 1},
        sort_keys=True).encode())
    cluster.kill(controller)
    cluster.wait_until(lambda: not cluster.zk.exists("/admin/reassign_partitions"), timeout=90,
                       message="the reassignment did not finish after the controller was killed")
    assert read_assignment(cluster, "other").partitions == {0: (a, b), 1: (b, a)}
    assert [r.value for r in read_partitions(cluster, "other", 2)] == [b"payload"]


def test_malformed_admin_znodes_are_reported_and_removed(cluster_factory):
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "fine", 1, 3)
    cluster.zk.create("/admin/reassign_partitions", b"{not json")
    cluster.wait_until(lambda: not cluster.zk.exists("/admin/reassign_partitions"), timeout=30,
                       message="malformed reassignment not removed")
    cluster.zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
        {"topic": "nope", "partition": 0, "replicas": [1]},
        {"topic": "fine", "partition": 0, "replicas": []}]}).encode())
    cluster.wait_until(lambda: not cluster.zk.exists("/admin/reassign_partitions"), timeout=30,
                       message="invalid reassignment entries not removed")
    cluster.zk.create("/admin/preferred_replica_election", b"\xff\xfe")
    cluster.wait_until(lambda: not cluster.zk.exists("/admin/preferred_replica_election"), timeout=30,
                       message="malformed election request not removed")
    cluster.zk.create("/admin/delete_topics/ghost", b"")
    cluster.wait_until(lambda: not cluster.zk.exists("/admin/delete_topics/ghost"), timeout=30,
                       message="marker of an unknown topic not removed")
    controller = cluster.controller()
    text = log_text(cluster, controller, "controller.log")
    assert "/admin/reassign_partitions" in text and "/admin/preferred_replica_election" in text
    # and the controller still works
    create_topic(cluster, "still-works", 1, 3)


def test_topic_config_change_applies_without_restart(cluster_factory):
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "cfg", 1, 3, "--replica-assignment", "1:2:3")
    p = Producer(cluster.bootstrap_servers, acks=-1, retries=0)
    p.send("cfg", b"a").get(timeout=30)
    cluster.kill(2)
    cluster.kill(3)
    cluster.wait_until(lambda: read_states(cluster, "cfg")[0].isr == (1,), timeout=30,
                       message="ISR did not shrink")
    p.send("cfg", b"b").get(timeout=30)  # min.insync.replicas=1: accepted
    rc, out, err = run_tool("kafka-configs.sh", "--zookeeper", cluster.connect_string, "--entity-type",
                            "topics", "--entity-name", "cfg", "--alter", "--add-config",
                            "min.insync.replicas=2")
    assert rc == 0, out + err

    def refused():
        try:
            p.send("cfg", b"c").get(timeout=30)
            return False
        except Exception as e:
            return "NOT_ENOUGH_REPLICAS" in str(e) or "19" in str(e)
    cluster.wait_until(refused, timeout=30, message="min.insync.replicas=2 did not take effect")
    p.close()
