"""Topic deletion while brokers holding the topic's replicas fail (issue 18, defect 6).

A topic being deleted must take part in no election: a LeaderAndIsr that reaches
a broker after its StopReplica(delete) creates the deleted log again, and once the
deletion has completed nothing ever removes it.  The tests delete a topic while a
replica holder is paused (so its StopReplica answer is late) and another dies, then
check that no log directory of the topic is left on any broker and its znodes are gone.
"""

import time
from pathlib import Path

import pytest

from kafka_ha.client.producer import Producer
from tests.harness.kafka import create_topic, log_size, log_text, read_states, topics_cli

pytestmark = pytest.mark.system
TOPIC = "doomed"
# Long enough that the paused broker keeps its session through the test: the killed
# broker's registration is removed by hand, so nothing waits for a session to expire.
SESSION_MS = 20000


def topic_dirs(cluster, broker, topic=TOPIC):
    """Broker ``broker``'s directories of ``topic`` (live logs and any awaiting deletion)."""
    data = Path(cluster.config_path(broker)).parent / "data"
    return sorted(d.name for d in data.glob(f"{topic}-*"))


def all_topic_dirs(cluster, topic=TOPIC):
    return {b: dirs for b in cluster.broker_ids if (dirs := topic_dirs(cluster, b, topic))}


def assert_no_topic_dirs_left(cluster, topic=TOPIC, timeout=30):
    """Wait (a directory renamed for deletion may go in the background), then name what is left."""
    deadline = time.monotonic() + timeout
    while (left := all_topic_dirs(cluster, topic)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"logs of the deleted topic {topic} are left on disk: {left}"


def topic_znodes(cluster, topic=TOPIC):
    paths = [f"/brokers/topics/{topic}", f"/config/topics/{topic}", f"/admin/delete_topics/{topic}"]
    return [p for p in paths if cluster.zk.exists(p)]


def produce_to_every_partition(cluster, topic, partitions):
    producer = Producer(cluster.bootstrap_servers, acks=-1, retries=20)
    try:
        for p in range(partitions):
            producer.send(topic, b"v%d" % p, partition=p).get(timeout=30)
    finally:
        producer.close()


@pytest.mark.parametrize("returns", ["after the deletion", "during the deletion"])
def test_replica_holder_dies_mid_deletion_leaves_no_log_behind(cluster_factory, returns):
    """Broker ``late`` is paused, so the deletion waits for its StopReplica answer; broker
    ``victim`` answers, then dies, and returns either once the deletion has completed or
    while it still waits for ``late``.  On e7bd7e2 the controller elected leaders for the
    doomed partitions on the failure (and sent the returning broker its replicas' states),
    so brokers re-created logs they had deleted; the deletion then completed and left
    those logs on disk for good."""
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, TOPIC, 3, 3)
    produce_to_every_partition(cluster, TOPIC, 3)
    assert all(len(topic_dirs(cluster, b)) == 3 for b in cluster.broker_ids)
    controller = cluster.controller()
    late, victim = [b for b in cluster.broker_ids if b != controller]

    cluster.sigstop(late)
    try:
        rc, out, err = topics_cli(cluster, "--delete", "--topic", TOPIC)
        assert rc == 0 and f"Topic {TOPIC} is marked for deletion." in out, (rc, out, err)
        cluster.wait_until(lambda: not all_topic_dirs(cluster).get(victim)
                           and not all_topic_dirs(cluster).get(controller), timeout=30,
                           message="the running brokers did not delete their replicas")
        # Let the controller take in their StopReplica answers before the failure.
        time.sleep(1)
        assert topic_znodes(cluster), "the deletion cannot finish while a replica is paused"

        since = log_size(cluster, controller, "controller.log")
        cluster.kill(victim)
        cluster.zk.delete(f"/brokers/ids/{victim}")   # its session expires, as it were, now
        cluster.wait_until(lambda: f"dead [{victim}]" in log_text(cluster, controller, "controller.log", since),
                           timeout=30, message=f"the controller did not handle the death of {victim}")
        if returns == "during the deletion":
            cluster.start_broker(victim)
            cluster.wait_until(lambda: f"new [{victim}]" in log_text(cluster, controller, "controller.log", since),
                               timeout=30, message=f"the controller did not see {victim} return")
        time.sleep(1)   # the requests of those events (if any) go out and are applied
    finally:
        cluster.sigcont(late)

    cluster.wait_until(lambda: not topic_znodes(cluster), timeout=60,
                       message=f"the deletion of {TOPIC} did not complete")
    if returns == "after the deletion":
        cluster.start_broker(victim)
    cluster.wait_registered([victim])
    assert_no_topic_dirs_left(cluster)
    assert not read_states(cluster, TOPIC)
    assert not topic_znodes(cluster)
