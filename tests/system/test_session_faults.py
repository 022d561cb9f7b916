"""ZooKeeper session faults on running brokers (scenarios #6, #7, #9, #24 of docs/design.md §9).

Each broker reaches ZooKeeper through a :class:`~tests.harness.tcp_proxy.TcpProxy` of its
own.  Cutting one expires that broker's session while its process, its client port and
its replica fetchers carry on: the broker learns of the expiry only when the path heals,
and meanwhile the rest of the cluster treats it as dead.  #24 needs no relay: an operator
deletes live znodes.

The scenarios' defaults: 3 brokers, RF 3, min.insync.replicas=2, acks=all with unique values; no
acknowledged value may be lost, and the replicas are byte-equal up to the HW.
"""

import re
from typing import NamedTuple

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.tools.processes import HOST
from kafka_ha.zk import znodes as zn
from tests.harness.cluster import SESSION_MS
from tests.harness.kafka import (controller_epoch, create_topic, log_size, log_text, read_state,
                                 read_states, received_leader_and_isr, verify_replicas, wait_isr)
from tests.harness.partition_faults import (TOPIC, ZOMBIE_REFUSALS, acked_offsets, assert_acked_readable,
                                            assert_zombie_left_no_trace, create_partition, queue_produces,
                                            read_produce_answers, unique_values, wait_leader_and_isr_received)
from tests.harness.replica_files import segment_bytes
from tests.harness.tcp_proxy import TcpProxy

pytestmark = pytest.mark.system
EXPIRY_S = SESSION_MS / 1000 + 15    # expiry, and the controller's reaction to it
REGISTRATION = re.compile(r"Registered broker (\d+) at path \S+ .*session 0x([0-9a-f]+)")


# ---- a cluster whose ZooKeeper paths can be cut -----------------------------------------

class ProxiedCluster(NamedTuple):
    cluster: object
    proxies: dict          # {broker id: its TcpProxy to ZooKeeper}

    def cut(self, broker):
        """Cut ``broker`` off ZooKeeper and wait until the ensemble expired its session."""
        self.proxies[broker].cut()
        self.cluster.wait_deregistered(broker, timeout=EXPIRY_S)

    def heal(self, broker):
        """Reconnect ``broker``; it learns its session expired and must register again."""
        self.proxies[broker].heal()
        self.cluster.wait_registered([broker], timeout=EXPIRY_S)


@pytest.fixture
def proxied_cluster(cluster_factory):
    """``make(overrides=None)``: three brokers, each reaching ZooKeeper through its own relay."""
    proxies = []

    def make(overrides=None):
        cluster = cluster_factory(3, overrides, start=False, session_timeout_ms=SESSION_MS)
        servers = cluster.zk_servers
        by_broker = {}
        for i in cluster.broker_ids:
            # Each relay prefers another server, so the sessions spread as they would.
            k = i % len(servers)
            by_broker[i] = TcpProxy(servers[k:] + servers[:k])
            proxies.append(by_broker[i])
            cluster.connect_broker_through(i, by_broker[i].connect_string)
        cluster.start()
        return ProxiedCluster(cluster, by_broker)

    yield make
    for proxy in proxies:
        proxy.close()


def registration_sessions(cluster, broker):
    """The ZooKeeper sessions (ids) in which ``broker`` registered, in order."""
    return [int(session, 16) for b, session in REGISTRATION.findall(log_text(cluster, broker, "server.log"))
            if int(b) == broker]


def assert_registered_once_per_session(cluster, broker, sessions):
    """``broker`` registered once in each of ``sessions`` sessions, and the node it holds now
    belongs to the last one: no retry loop, no node left over from an older session."""
    def check():
        # Polled: the broker logs a registration only after ZooKeeper has created the node.
        seen = registration_sessions(cluster, broker)
        assert len(seen) == len(set(seen)) == sessions, f"broker {broker} registrations: {[hex(s) for s in seen]}"
        owner = cluster.zk.exists(zn.BrokerIdZNode.path(broker)).ephemeralOwner
        assert owner == seen[-1], (hex(owner), [hex(s) for s in seen])
        return True
    cluster.wait_until(check, timeout=10, message=f"broker {broker}'s registrations")


class StateHistory:
    """Every version of TOPIC's partition states and of /controller_epoch that watches saw
    (a watch can miss a version written right after another, never reorder them)."""

    def __init__(self, cluster, partitions=(0,)):
        self.states = {p: [] for p in partitions}     # {partition: [(mzxid, LeaderAndIsr)]}
        self.controller_epochs = []
        cluster.zk.DataWatch(zn.CONTROLLER_EPOCH_PATH, self._on_epoch)
        for p in partitions:
            cluster.zk.DataWatch(zn.TopicPartitionStateZNode.path(TOPIC, p), self._state_watcher(p))

    def _on_epoch(self, data, stat):
        if data is not None:
            self.controller_epochs.append(zn.ControllerEpochZNode.decode(data))

    def _state_watcher(self, p):
        # Two arguments exactly: kazoo passes a third (the event) to a callback that takes one.
        def on_change(data, stat):
            if data is not None:
                path = zn.TopicPartitionStateZNode.path(TOPIC, p)
                self.states[p].append((stat.mzxid, zn.TopicPartitionStateZNode.decode(data, path, stat.version)))
        return on_change

    def assert_invariants(self):
        """The scenarios' continuous checks: epochs never decrease; the leader is in the ISR."""
        assert self.controller_epochs == sorted(self.controller_epochs), self.controller_epochs
        for p, versions in self.states.items():
            epochs = [s.leader_epoch for _, s in versions]
            assert epochs == sorted(epochs), (p, versions)
            assert all(s.leader in s.isr for _, s in versions if s.has_leader), (p, versions)


def leads(cluster, broker, partition):
    """Whether ``broker`` acts as the leader of TOPIC-``partition``: a consumer's ListOffsets
    is answered by the leader only (followers say NOT_LEADER_FOR_PARTITION)."""
    conn = BrokerConnection(HOST, cluster.port(broker), "role-probe", 10)
    try:
        answer = conn.request(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": partition, "timestamp": -2}]}]})
    finally:
        conn.close()
    error = answer["topics"][0]["partitions"][0]["error_code"]
    assert error in (ErrorCode.NONE, ErrorCode.NOT_LEADER_FOR_PARTITION), (broker, partition, error)
    return error == ErrorCode.NONE


def assert_roles_match_zookeeper(cluster, partitions):
    """Every broker applied the leader epoch ZooKeeper holds, and acts as leader exactly where
    ZooKeeper says (no partition left half leader, half follower: KAFKA-9307)."""
    states = read_states(cluster, TOPIC)

    def agree():
        applied = {b: received_leader_and_isr(log_text(cluster, b, "state-change.log"))
                   for b in cluster.broker_ids}
        wrong = {(b, p): (applied[b].get((TOPIC, p)), leads(cluster, b, p))
                 for p in partitions for b in cluster.broker_ids}
        wrong = {k: v for k, v in wrong.items() if v != (states[k[1]].leader_epoch, states[k[1]].leader == k[0])}
        # Raised, so that wait_until reports the last mismatch: {(broker, partition): (epoch, leads)}.
        assert not wrong, f"roles that differ: {wrong}"
        return True
    cluster.wait_until(agree, timeout=20, message=f"brokers' roles differ from ZooKeeper's {states}")


# ---- the tool: a cut relay expires a live client's session --------------------------------

def test_cut_relay_expires_the_session_of_a_running_client(cluster_factory):
    """What every scenario below relies on: while cut, the client stays silent and ZooKeeper
    expires its session (its ephemeral node goes); after the heal it gets a new session."""
    cluster = cluster_factory(0, session_timeout_ms=SESSION_MS)
    with TcpProxy(cluster.zk_servers) as proxy:
        client = KazooClient(hosts=proxy.connect_string + cluster.chroot, timeout=SESSION_MS / 1000)
        states = []
        client.add_listener(states.append)
        client.start(timeout=30)
        try:
            first_session = client.client_id[0]
            client.create("/mine", ephemeral=True)
            proxy.cut()
            cluster.wait_until(lambda: not cluster.zk.exists("/mine"), timeout=EXPIRY_S,
                               message="the cut client's session did not expire")
            assert KazooState.LOST not in states, "the client cannot know before the heal"
            proxy.heal()
            cluster.wait_until(lambda: states[-1:] == [KazooState.CONNECTED] and KazooState.LOST in states,
                               timeout=EXPIRY_S, message=f"no new session after the heal: {states}")
            assert client.client_id[0] != first_session
            assert proxy.accepted >= 2, "the client reconnected through the relay"
        finally:
            client.stop()
            client.close()
    print(f"client states {states}; connections through the relay: {proxy.accepted}")


# ---- #6: a follower's session expires -----------------------------------------------------

def test_follower_session_expiry_leaves_isr_until_registered_again(proxied_cluster):
    """#6: the follower's registration vanishes and the controller takes it out of the ISR
    with a new leader epoch; the follower, which did not get that LeaderAndIsr, must not
    come back before it registers again (a zombie fetcher, KAFKA-6880): its fetches name the
    old epoch and the leader fences them (KIP-320), so it neither replicates nor counts.
    After the heal it rejoins, and the leader's ISR writes are not stuck on a cached
    zkVersion (KAFKA-2729)."""
    setup = proxied_cluster()
    cluster = setup.cluster
    controller = cluster.wait_until(cluster.controller, message="no controller")
    leader, follower = sorted(set(cluster.broker_ids) - {controller})
    before = create_partition(cluster, [leader, controller, follower])
    history = StateHistory(cluster)
    acked = acked_offsets(cluster.bootstrap_servers, unique_values(b"before", 20))

    setup.cut(follower)
    try:
        shrunk = cluster.wait_until(lambda: (s := read_state(cluster, TOPIC, 0)).leader_epoch > before.leader_epoch
                                    and s, timeout=EXPIRY_S, message="the controller did not act on the expiry")
        wait_leader_and_isr_received(cluster, [leader], shrunk.leader_epoch)
        # The zombie's next fetch names the old epoch: the leader fences it (a long poll
        # begun before the new epoch may still bring it what was produced meanwhile).
        values = unique_values(b"during", 10)
        acked.update(acked_offsets(cluster.bootstrap_servers, values))
        cluster.wait_until(lambda: f"partition [{TOPIC},0] is fenced by leader {leader}" in
                           log_text(cluster, follower, "server.log"), timeout=20,
                           message="the cut follower was not fenced")
    finally:
        setup.heal(follower)
    registered = cluster.zk.exists(zn.BrokerIdZNode.path(follower)).czxid

    wait_isr(cluster, TOPIC, cluster.broker_ids)
    acked.update(acked_offsets(cluster.bootstrap_servers, unique_values(b"after", 20)))
    history.assert_invariants()
    versions = history.states[0]
    left = next((zxid for zxid, s in versions if follower not in s.isr), None)
    assert left is not None, f"the follower never left the ISR: {versions}"
    zombie = [s for zxid, s in versions if left < zxid < registered and follower in s.isr]
    assert not zombie, f"the unregistered follower rejoined the ISR: {zombie}"
    assert_registered_once_per_session(cluster, follower, 2)
    assert_acked_readable(cluster, acked)
    verify_replicas(cluster, TOPIC)
    stale = log_text(cluster, leader, "server.log").count("Cached zkVersion")
    print(f"ISR versions {[(s.leader_epoch, s.isr) for _, s in versions]}; "
          f"'Cached zkVersion' lines on the leader: {stale}")


# ---- #7: two session flaps in quick succession --------------------------------------------

@pytest.mark.parametrize("role", ["controller", "leader"])
def test_two_session_flaps_leave_one_registration_and_consistent_roles(proxied_cluster, role):
    """#7: the broker's session expires twice, seconds apart (the second cut right after it
    registered again).  It ends with one registration per session and the last one held;
    a flapping controller resigns once and the cluster elects once; every partition's roles
    on the brokers agree with ZooKeeper (KAFKA-9307); epochs never decrease."""
    setup = proxied_cluster()
    cluster = setup.cluster
    controller = cluster.wait_until(cluster.controller, message="no controller")
    victim = controller if role == "controller" else min(set(cluster.broker_ids) - {controller})
    a, b = sorted(set(cluster.broker_ids) - {victim})
    # The scenarios' P=3, RF=3; the victim leads partition 0 and follows the other two.
    create_topic(cluster, TOPIC, 3, 3, "--replica-assignment", f"{victim}:{a}:{b},{a}:{b}:{victim},{b}:{victim}:{a}",
                 "--config", "min.insync.replicas=2")
    for p in range(3):
        wait_isr(cluster, TOPIC, cluster.broker_ids, p)
    history = StateHistory(cluster, range(3))
    epoch, _ = controller_epoch(cluster)
    acked = acked_offsets(cluster.bootstrap_servers, unique_values(b"before", 20))

    setup.cut(victim)
    try:
        cluster.wait_until(lambda: read_state(cluster, TOPIC, 0).leader in (a, b), timeout=EXPIRY_S,
                           message="partition 0 did not fail over")
    finally:
        setup.heal(victim)
    setup.cut(victim)
    setup.heal(victim)

    for p in range(3):
        wait_isr(cluster, TOPIC, cluster.broker_ids, p)
    acked.update(acked_offsets(cluster.bootstrap_servers, unique_values(b"after", 20)))
    assert_registered_once_per_session(cluster, victim, 3)
    assert_roles_match_zookeeper(cluster, range(3))
    history.assert_invariants()
    moved = role == "controller"
    assert controller_epoch(cluster)[0] == epoch + moved
    assert (cluster.controller() == controller) != moved
    resigned = log_text(cluster, victim, "controller.log").count("resigns as controller")
    assert resigned == moved, f"the victim resigned {resigned} times"
    assert_acked_readable(cluster, acked)
    verify_replicas(cluster, TOPIC)


def test_every_session_expires_at_once_and_one_working_controller_results(proxied_cluster):
    """#7 with every broker flapping at once: /controller goes with its owner's session and
    nobody is left to elect while cut; after the heal exactly one broker must win and act
    as the controller (not a /controller naming a broker that resigned, KAFKA-13407)."""
    setup = proxied_cluster()
    cluster = setup.cluster
    before = create_partition(cluster, [1, 2, 3])
    epoch, _ = controller_epoch(cluster)
    acked = acked_offsets(cluster.bootstrap_servers, unique_values(b"before", 20))
    for b in cluster.broker_ids:
        setup.proxies[b].cut()
    for b in cluster.broker_ids:
        cluster.wait_deregistered(b, timeout=EXPIRY_S)
    assert cluster.controller() is None
    for b in cluster.broker_ids:
        setup.proxies[b].heal()
    cluster.wait_registered(cluster.broker_ids, timeout=EXPIRY_S)
    # Only an active controller creates a new topic's partition states.
    create_topic(cluster, "after-flap", 3, 3)
    assert controller_epoch(cluster)[0] == epoch + 1
    wait_isr(cluster, TOPIC, cluster.broker_ids)
    acked.update(acked_offsets(cluster.bootstrap_servers, unique_values(b"after", 20)))
    assert read_state(cluster, TOPIC, 0).leader_epoch >= before.leader_epoch
    assert_acked_readable(cluster, acked)
    verify_replicas(cluster, TOPIC)


# ---- #9: the leader cut off from ZooKeeper only --------------------------------------------

@pytest.mark.parametrize("zombie_controls", [False, True], ids=["leader", "leader-and-controller"])
def test_leader_cut_from_zookeeper_never_acks_and_follows_after_heal(proxied_cluster, zombie_controls):
    """#9: the leader loses its session but still serves clients; a new leader is elected and
    the old one, still believing it leads, appends acks=all produces but never acknowledges
    them.  After the heal it registers again, follows, truncates them away, and rejoins."""
    setup = proxied_cluster()
    cluster = setup.cluster
    controller = cluster.wait_until(cluster.controller, message="no controller")
    zombie = controller if zombie_controls else min(set(cluster.broker_ids) - {controller})
    survivors = sorted(set(cluster.broker_ids) - {zombie})
    before = create_partition(cluster, [zombie, *survivors])
    history = StateHistory(cluster)
    acked = acked_offsets(cluster.bootstrap_servers, unique_values(b"before", 20))
    refused = unique_values(b"refused", 6)

    setup.cut(zombie)
    try:
        elected = cluster.wait_until(lambda: (s := read_state(cluster, TOPIC, 0)).leader in survivors and s,
                                     timeout=EXPIRY_S, message="no new leader")
        assert elected.leader_epoch == before.leader_epoch + 1 and zombie not in elected.isr, elected
        wait_leader_and_isr_received(cluster, survivors, elected.leader_epoch)
        acked.update(acked_offsets(cluster.bootstrap_of(survivors), unique_values(b"during", 20),
                                   request_timeout_ms=5000))
        queued = queue_produces(cluster.port(zombie), refused)
        # It is a zombie indeed: it appends the produces as the leader it believes it is (the
        # first of each connection; the next waits until the broker has answered that one).
        first = [sent[0] for _, sent in queued]
        cluster.wait_until(lambda: all(v in segment_bytes(cluster, zombie, TOPIC) for v in first), timeout=20,
                           message="the cut leader did not append the produces sent to it")
        server_log_offset = log_size(cluster, zombie, "server.log")
    finally:
        setup.heal(zombie)

    acked.update(acked_offsets(cluster.bootstrap_servers, unique_values(b"after", 50)))
    answers = [x for sock, sent in queued for x in read_produce_answers(sock, len(sent))]
    assert all(x in ZOMBIE_REFUSALS for x in answers), f"zombie answers {answers}"
    wait_isr(cluster, TOPIC, cluster.broker_ids)
    final = read_state(cluster, TOPIC, 0)
    assert (final.leader, final.leader_epoch) == (elected.leader, elected.leader_epoch), final
    history.assert_invariants()
    assert_registered_once_per_session(cluster, zombie, 2)

    assert_zombie_left_no_trace(cluster, acked, refused)
    after_heal = log_text(cluster, zombie, "server.log", server_log_offset)
    print(f"the zombie answered {answers}; " + "; ".join(
        line for line in after_heal.splitlines() if "truncating" in line or "could not write ISR" in line))


# ---- #24: an operator deletes live znodes --------------------------------------------------

@pytest.mark.parametrize("winner", ["another broker", "the same broker"])
def test_operator_deletes_the_live_controller_znode(proxied_cluster, winner):
    """#24 (a): deleting /controller makes the brokers elect again, at epoch +1 (Kafka's
    testControllerMove).  Which broker wins is made deterministic by holding the others'
    (or the old controller's) ZooKeeper traffic for the moment of the election, well below
    the session timeout.  The winner works as the controller, and the old controller's
    term ends either way: Kafka 2.x's Reelect resigns before it elects, even when the same
    broker wins again."""
    setup = proxied_cluster()
    cluster = setup.cluster
    create_partition(cluster, [1, 2, 3])
    old = cluster.wait_until(cluster.controller, message="no controller")
    epoch, _ = controller_epoch(cluster)
    since = {b: log_size(cluster, b, "controller.log") for b in cluster.broker_ids}
    held = [b for b in cluster.broker_ids if (b == old) == (winner == "another broker")]

    for b in held:
        setup.proxies[b].cut()
    try:
        cluster.zk.delete(zn.ControllerZNode.PATH)
        new = cluster.wait_until(cluster.controller, timeout=20, message="no controller after the deletion")
    finally:
        for b in held:
            setup.proxies[b].heal()
    assert (new == old) == (winner == "the same broker"), (old, new)
    assert controller_epoch(cluster)[0] == epoch + 1
    # The new controller does a controller's work: it creates a new topic's states at its epoch.
    create_topic(cluster, "after-move", 3, 3)
    assert all(s.controller_epoch == epoch + 1 for s in read_states(cluster, "after-move").values())
    won = [b for b in cluster.broker_ids
           if f"won the controller election at epoch {epoch + 1}" in log_text(cluster, b, "controller.log", since[b])]
    assert won == [new], won
    cluster.wait_until(lambda: "resigns as controller" in log_text(cluster, old, "controller.log", since[old]),
                       timeout=10, message=f"the old controller {old} did not end its term")
    assert controller_epoch(cluster)[0] == epoch + 1 and cluster.controller() == new
    for b in held:
        assert_registered_once_per_session(cluster, b, 1)   # the hold was shorter than a session


@pytest.mark.parametrize("whose", ["leader", "controller", "controller after a connection blip"])
def test_operator_deletes_a_live_broker_registration(proxied_cluster, whose):
    """#24 (b): a broker whose /brokers/ids/N an operator deleted must not go on serving
    unregistered: it registers again in the same session, the controller sees it leave and
    come back (or, if both happen between two reads, bounce: a new czxid), and the
    partition ends with a full ISR and no acknowledged value lost.  The blip first drops
    the broker's ZooKeeper connection, which it resumes in the same session: kazoo forgets
    every watch then, so the broker's watch on its registration (and the controller's on
    /brokers/ids) must be set again."""
    setup = proxied_cluster()
    cluster = setup.cluster
    controller = cluster.wait_until(cluster.controller, message="no controller")
    victim = controller if whose.startswith("controller") else min(set(cluster.broker_ids) - {controller})
    create_partition(cluster, [victim, *sorted(set(cluster.broker_ids) - {victim})])
    history = StateHistory(cluster)
    acked = acked_offsets(cluster.bootstrap_servers, unique_values(b"before", 20))
    if whose.endswith("blip"):
        relay, connections = setup.proxies[victim], setup.proxies[victim].accepted
        relay.reset()
        cluster.wait_until(lambda: relay.accepted > connections, message=f"broker {victim} did not reconnect")
        acked.update(acked_offsets(cluster.bootstrap_servers, unique_values(b"after the blip", 20)))

    path = zn.BrokerIdZNode.path(victim)
    old_czxid = cluster.zk.exists(path).czxid
    cluster.zk.delete(path)
    cluster.wait_until(lambda: (stat := cluster.zk.exists(path)) and stat.czxid > old_czxid, timeout=20,
                       message=f"broker {victim} did not register again")
    assert "was deleted while its session" in log_text(cluster, victim, "server.log")
    # Twice in its one session, and it holds the node in that session (the second line
    # follows the node's creation: wait for it).
    session = cluster.wait_until(lambda: len(r := registration_sessions(cluster, victim)) >= 2 and r, timeout=10,
                                 message=f"broker {victim} did not log its second registration")
    assert len(session) == 2 and session[0] == session[1] == cluster.zk.exists(path).ephemeralOwner, session
    acked.update(acked_offsets(cluster.bootstrap_servers, unique_values(b"after", 20)))
    wait_isr(cluster, TOPIC, cluster.broker_ids)
    history.assert_invariants()
    assert_acked_readable(cluster, acked)
    verify_replicas(cluster, TOPIC)
    assert cluster.controller() is not None
    print("; ".join(line for b in cluster.broker_ids for line in log_text(cluster, b, "server.log").splitlines()
                    if "was deleted while" in line or "Broker change" in line))
