"""Hand-edited garbage in ZooKeeper never stops the controller or other partitions' elections."""

import pytest

from kafka_ha.model import TopicAssignment
from kafka_ha.zk import znodes as zn
from tests.harness.cluster import SESSION_MS
from tests.harness.kafka import create_topic, log_text, read_states

pytestmark = pytest.mark.system

GARBAGE = {
    "/brokers/topics/broken/partitions/0/state": b"not json at all",
    "/brokers/topics/broken/partitions/1/state": b'{"version":1,"leader":99,"leader_epoch":0,'
                                                 b'"controller_epoch":1,"isr":[99]}',
    "/brokers/topics/broken/partitions/2/state": b'{"version":1,"leader":1,"leader_epoch":-4,'
                                                 b'"controller_epoch":1,"isr":[1]}',
}


def test_malformed_znodes_do_not_stop_elections(cluster_factory):
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "good", 6, 3)
    create_topic(cluster, "broken", 3, 3)
    for path, data in GARBAGE.items():
        cluster.zk.set(path, data)
    # a topic znode that is not JSON, and one whose state JSON has wrong types
    cluster.zk.create("/brokers/topics/garbage", b"\xff\xfe{")
    cluster.zk.create("/brokers/topics/typed", zn.TopicZNode.encode(TopicAssignment("typed", {0: (1, 2)})))
    cluster.wait_until(lambda: read_states(cluster, "typed"), message="typed topic has no state")
    cluster.zk.set("/brokers/topics/typed/partitions/0/state",
                   b'{"version":1,"leader":"1","leader_epoch":0,"controller_epoch":1,"isr":[1,2]}')

    controller = cluster.wait_until(cluster.controller, message="no controller")
    # Kill the controller: its successor must load around the garbage...
    cluster.kill(controller)
    successor = cluster.wait_until(lambda: (c := cluster.controller()) not in (None, controller) and c,
                                   timeout=SESSION_MS / 1000 + 20, message="no new controller")
    # The states are read one znode at a time, so one read can mix states from before and
    # after the successor's multi: wait for leaders and ISRs together.
    cluster.wait_until(
        lambda: (s := read_states(cluster, "good")) and all(
            st.leader not in (controller, -1) and controller not in st.isr for st in s.values()),
        timeout=20, message="good partitions were not re-elected without the dead controller")
    # ...and keep electing for the good topic when another broker dies.
    victim = next(b for b in (1, 2, 3) if b not in (controller, successor))
    cluster.kill(victim)
    cluster.wait_until(
        lambda: all(st.leader == successor for st in read_states(cluster, "good").values()),
        timeout=SESSION_MS / 1000 + 20, message="good partitions did not fail over to the last broker")
    assert cluster.broker_alive(successor), "the controller must survive the garbage"
    text = log_text(cluster, successor, "controller.log")
    for path in ("/brokers/topics/broken/partitions/0/state", "/brokers/topics/garbage",
                 "/brokers/topics/typed/partitions/0/state"):
        assert path in text, f"{path} not reported in the controller log"
    assert "leader 99 is not among the replicas" in text
    # the garbage is left as it was for the operator to inspect
    for path, data in GARBAGE.items():
        assert cluster.zk.get(path)[0] == data
