"""A broker restarted right after its controlled shutdown, seen by the controller as a bounce
(issue 18, defect 3), with real processes.

The controller learns of a broker's exit and of its return from one child watch
on ``/brokers/ids``; when both happened before it reads the children, it sees
the same id with a new registration (a new czxid).  A ZkRequestGate in front
of the controller holds that read until the broker is back, so the test does
not depend on how fast the controller is.  The restarted broker is a new
incarnation that never asked to shut down: a preferred replica election must
make it leader of the partitions it prefers.
"""

import signal

import pytest

from tests.harness.kafka import create_topic, log_text, read_assignment, read_states, run_tool
from tests.harness.zk_gate import ZkRequestGate

pytestmark = pytest.mark.system
# Long enough that the controller's session (its pings are held too) outlives the hold.
LONG_SESSION_MS = 30000
GET_CHILDREN, GET_CHILDREN2 = 8, 12  # ZooKeeper opcodes of the read of /brokers/ids


def leaders(cluster, topic):
    return {p: s.leader for p, s in read_states(cluster, topic).items()}


def test_a_broker_restarted_right_after_its_controlled_shutdown_leads_again(cluster_factory):
    cluster = cluster_factory(3, {"auto.leader.rebalance.enable": False}, start=False,
                              session_timeout_ms=LONG_SESSION_MS)
    gates = {i: ZkRequestGate(cluster.zk_servers) for i in cluster.broker_ids}
    try:
        for i, gate in gates.items():
            cluster.connect_broker_through(i, gate.connect_string)
        cluster.start()
        create_topic(cluster, "bounce", 3, 3)
        preferred = {p: a[0] for p, a in read_assignment(cluster, "bounce").partitions.items()}
        cluster.wait_until(lambda: leaders(cluster, "bounce") == preferred, timeout=30,
                           message="the new topic's leaders are not the preferred replicas")
        controller = cluster.controller()
        broker = next(b for b in cluster.broker_ids if b != controller)

        gates[controller].arm(b"/brokers/ids", opcodes=(GET_CHILDREN, GET_CHILDREN2), passing=0)
        cluster.kill(broker, signal.SIGTERM)
        assert f"Controlled shutdown of broker {broker} succeeded" in log_text(cluster, broker,
                                                                               "server.log")
        cluster.wait_until(gates[controller].held.is_set, timeout=30,
                           message="the controller did not re-read /brokers/ids")
        cluster.start_broker(broker)
        cluster.wait_registered([broker])
        gates[controller].release()
        cluster.wait_until(lambda: f"bounced [{broker}]" in log_text(cluster, controller,
                                                                     "controller.log"),
                           timeout=30, message="the controller did not see a bounce")

        cluster.wait_until(lambda: all(len(s.isr) == 3 for s in read_states(cluster, "bounce").values()),
                           timeout=60, message=f"broker {broker} did not rejoin the ISRs")
        rc, out, err = run_tool("kafka-preferred-replica-election.sh", "--zookeeper",
                                cluster.connect_string)
        assert rc == 0, out + err
        cluster.wait_until(lambda: not cluster.zk.exists("/admin/preferred_replica_election"),
                           timeout=30, message="the controller did not finish the election")
        assert leaders(cluster, "bounce") == preferred, (
            f"broker {broker} must lead its preferred partitions again")
    finally:
        for gate in gates.values():
            gate.close()
