"""The controller killed mid-election (failure scenario #8, docs/design.md §9).

"kill -9 the controller mid-election, after only part of its state writes landed.
Expected: the successor re-reads and finishes; no partition keeps a dead leader; no two
leaders in one epoch."

The election is the controller's answer to a broker's death.  It writes the new states
in fenced multis of up to ``MULTI_CHUNK`` partitions, all sent before it waits for the
first reply, so a kill timed from the test would land before the first or after the
last.  Every broker reaches ZooKeeper through a :class:`ZkRequestGate` instead; the
controller's gate relays the first multi that writes the topic's states and holds the
second and everything its broker sends after it, so ZooKeeper applies exactly the first batch of
the election and never sees the rest.  The test then kills the controller, which never
got to tell any broker about the batch that landed.  This is reliable because it needs
no race: the topic has more partitions on the dying broker than one multi holds, so the
election always has a second multi, and the gate decides on each request as it passes.

Most partitions have one replica, on the broker that dies: they make the election big
without making every broker create a thousand logs (which starves a broker's ZooKeeper
heartbeat on a loaded machine).  They also cover the partitions whose whole ISR died:
they stay without a leader, with the ISR kept at its last member (KAFKA-5083).  Every
``SHARED``-th partition has all three replicas, for the question of who leads it.
"""

import pytest

from kafka_ha.model import NO_LEADER, TopicAssignment
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.tools.processes import HOST
from kafka_ha.zk import znodes as zn
from kafka_ha.zk.multi_read import get_many
from kafka_ha.zk.state_writes import MULTI_CHUNK
from tests.harness.kafka import controller_epoch, log_text, received_leader_and_isr
from tests.harness.zk_gate import MULTI, ZkRequestGate

pytestmark = pytest.mark.system
# Longer than tests.harness.cluster.SESSION_MS: no broker's session may expire while the wide topic is
# created (the test checks that no partition state changed meanwhile).
BUSY_SESSION_MS = 6000
EXPIRY_S = BUSY_SESSION_MS / 1000 + 20  # a session's expiry and the controller's reaction
TOPIC = "wide"
# Every partition has a replica on the broker that dies, so the election covers all of
# them: one full multi and a part of a second.
PARTITIONS = MULTI_CHUNK + MULTI_CHUNK // 5
SHARED = 4                              # every 4th partition has three replicas, the others one
STATES_PATH = f"/brokers/topics/{TOPIC}/partitions/".encode()


@pytest.fixture
def gated_cluster(cluster_factory):
    """Four brokers, each reaching ZooKeeper through a gate of its own: ``(cluster, gates)``."""
    gates = {}
    cluster = cluster_factory(4, {"auto.leader.rebalance.enable": False,
                                  # no leader shrinks an ISR: the election's are the only state writes
                                  "replica.lag.time.max.ms": 120000},
                              start=False, session_timeout_ms=BUSY_SESSION_MS)
    try:
        for i in cluster.broker_ids:
            gates[i] = ZkRequestGate(cluster.zk_servers)
            cluster.connect_broker_through(i, gates[i].connect_string)
        cluster.start()
        yield cluster, gates
    finally:
        for gate in gates.values():
            gate.close()


# ---- reading ZooKeeper and the brokers ----------------------------------------------------

def read_all_states(cluster):
    """{partition: LeaderAndIsr} of every partition of TOPIC that has a state (bulk reads)."""
    paths = {zn.TopicPartitionStateZNode.path(TOPIC, p): p for p in range(PARTITIONS)}
    return {paths[path]: zn.TopicPartitionStateZNode.decode(got[0], path, got[1].version)
            for path, got in get_many(cluster.zk, paths).items() if got is not None}


def wide_assignment(leader, followers):
    """{partition: replicas}: ``leader`` leads every partition; on the shared ones the two
    ``followers`` take turns as the preferred successor."""
    a, b = followers

    def replicas(p):
        if p % SHARED:
            return (leader,)
        return (leader, a, b) if p % (2 * SHARED) == 0 else (leader, b, a)
    return {p: replicas(p) for p in range(PARTITIONS)}


def create_wide_topic(cluster, assignment):
    """Create TOPIC, wait until every broker has applied its first state of every replica it
    holds, and return those states (none may have changed meanwhile)."""
    # Written as a tool would, since kafka-topics.sh (as Kafka's) wants one replication factor.
    cluster.zk.create(zn.TopicZNode.path(TOPIC), zn.TopicZNode.encode(TopicAssignment(TOPIC, assignment)))
    for b in {r for replicas in assignment.values() for r in replicas}:
        hosted = {p for p, replicas in assignment.items() if b in replicas}
        cluster.wait_until(lambda: set(applied_epochs(cluster, b)) == hosted, timeout=120,
                           message=f"broker {b} did not apply the states of all its {len(hosted)} replicas")
    states = read_all_states(cluster)
    assert len(states) == PARTITIONS and all(s.leader_epoch == 0 for s in states.values()), \
        "partition states changed while the topic was created (a broker's session expired?)"
    return states


def led_partitions(cluster, broker, partitions):
    """Those of ``partitions`` (of TOPIC) that ``broker`` acts as the leader of: ListOffsets
    is answered by the leader only (a follower says NOT_LEADER_FOR_PARTITION)."""
    conn = BrokerConnection(HOST, cluster.port(broker), "role-probe", 30)
    try:
        answer = conn.request(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": p, "timestamp": -2} for p in partitions]}]})
    finally:
        conn.close()
    errors = {x["partition_index"]: x["error_code"] for x in answer["topics"][0]["partitions"]}
    odd = {p: e for p, e in errors.items() if e not in (ErrorCode.NONE, ErrorCode.NOT_LEADER_FOR_PARTITION)}
    assert not odd, f"broker {broker} answered ListOffsets with {dict(list(odd.items())[:5])}"
    return {p for p, e in errors.items() if e == ErrorCode.NONE}


def applied_epochs(cluster, broker):
    """{partition: the leader epoch of the last LeaderAndIsr ``broker`` applied} for TOPIC."""
    seen = received_leader_and_isr(log_text(cluster, broker, "state-change.log"))
    return {p: epoch for (topic, p), epoch in seen.items() if topic == TOPIC}


# ---- the steps of the scenario ------------------------------------------------------------

def split_by_writer(before, now, epoch):
    """(written, untouched): partitions whose state the controller of ``epoch`` rewrote for
    this election (one leader epoch up), and partitions whose state is as ``before``."""
    written = {p for p, s in now.items()
               if s.controller_epoch == epoch and s.leader_epoch == before[p].leader_epoch + 1}
    untouched = {p for p, s in now.items() if s == before[p]}
    return written, untouched


def wait_partial_election(cluster, gate, before, epoch):
    """Wait until the gate holds the controller's second batch and ZooKeeper shows the first;
    return ``(written, untouched)`` and check that nothing else changed."""
    cluster.wait_until(gate.held.is_set, timeout=EXPIRY_S,
                       message="the controller did not send a second batch of states")
    # The first batch went up before the hold: wait until ZooKeeper has applied it.
    written, untouched = cluster.wait_until(
        lambda: (split := split_by_writer(before, read_all_states(cluster), epoch))[0] and split,
        timeout=20, message="the first batch of the election did not land")
    assert written and untouched, (len(written), len(untouched))
    assert written | untouched == set(range(PARTITIONS)), \
        "some states changed, but not as this election changes them"
    return written, untouched


def wait_failover(cluster, dead, epoch):
    """Wait for a controller that is none of ``dead``; return it after checking it was
    elected once (``epoch`` + 1)."""
    successor = cluster.wait_until(lambda: (c := cluster.controller()) not in (None, *dead) and c,
                                   timeout=EXPIRY_S, message="no new controller")
    assert controller_epoch(cluster)[0] == epoch + 1
    return successor


def settled(state, replicas, live):
    """Whether ``state`` is where the election must leave a partition on ``replicas`` when
    only ``live`` brokers are: led by a live ISR member with no dead one in the ISR, or,
    if no replica is live, leaderless with its last ISR member kept (KAFKA-5083)."""
    if not set(replicas) & live:
        return state.leader == NO_LEADER and state.isr == (replicas[0],)
    return state.leader in live and state.leader in state.isr and set(state.isr) <= live


def wait_settled(cluster, assignment, live):
    def all_settled():
        states = read_all_states(cluster)
        return all(settled(s, assignment[p], live) for p, s in states.items()) and states
    return cluster.wait_until(all_settled, timeout=60, message="partitions left with a dead leader or ISR member")


def assert_brokers_agree_with_zookeeper(cluster, brokers, final):
    """Each of ``brokers`` has applied the final leader epoch of every partition it holds
    and leads exactly those ZooKeeper names it leader of: no partition has two leaders, in
    any epoch."""
    def agree():
        for b in brokers:
            applied = applied_epochs(cluster, b)
            stale = {p: applied.get(p) for p, s in final.items() if applied.get(p) != s.leader_epoch}
            assert not stale, f"broker {b} has not applied the final epochs of {len(stale)} partitions, " \
                              f"e.g. {dict(list(stale.items())[:5])}"
            leads = led_partitions(cluster, b, final)
            expected = {p for p, s in final.items() if s.leader == b}
            assert leads == expected, f"broker {b} leads {sorted(leads - expected)[:10]} beyond ZooKeeper " \
                                      f"and not {sorted(expected - leads)[:10]}"
        return True
    cluster.wait_until(agree, timeout=60, message="the brokers' roles differ from ZooKeeper's")


# ---- #8 ---------------------------------------------------------------------------------------

def test_controller_killed_after_writing_some_states_of_an_election(gated_cluster):
    """#8: the controller dies after one batch of an election landed in ZooKeeper and before
    it told any broker.  The successor (epoch + 1) must read those states, keep them, elect
    the partitions the batch did not reach, and tell every broker: each partition is elected
    exactly once, every leader is live and in its ISR (or, with no live replica, there is
    none), and each partition has one leader."""
    cluster, gates = gated_cluster
    controller = cluster.wait_until(cluster.controller, message="no controller")
    leader, *followers = sorted(set(cluster.broker_ids) - {controller})
    assignment = wide_assignment(leader, followers)
    before = create_wide_topic(cluster, assignment)
    epoch, _ = controller_epoch(cluster)

    # Let the first state batch through; hold the second and everything after it.
    gates[controller].arm(STATES_PATH, opcodes=(MULTI,), passing=1)
    cluster.kill(leader)
    written, untouched = wait_partial_election(cluster, gates[controller], before, epoch)
    cluster.kill(controller)

    successor = wait_failover(cluster, (controller, leader), epoch)
    final = wait_settled(cluster, assignment, set(followers))
    for p, s in final.items():
        # Never back, and up once only: the successor kept what the dead controller wrote.
        assert s.leader_epoch == before[p].leader_epoch + 1, (p, before[p], final[p])
        assert s.controller_epoch == (epoch if p in written else epoch + 1), (p, s)
    shared = {p: s for p, s in final.items() if len(assignment[p]) > 1}
    assert_brokers_agree_with_zookeeper(cluster, followers, shared)
    print(f"controller {controller} (epoch {epoch}) wrote {len(written)} of {PARTITIONS} states before "
          f"it was killed ({len(written & set(shared))} of {len(shared)} with live replicas); controller "
          f"{successor} (epoch {epoch + 1}) elected the other {len(untouched)}")
