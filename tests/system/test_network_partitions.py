"""Network partitions: brokers cut off from each other, or from ZooKeeper, while every
process keeps running and serving the clients that can reach it.

How the partitions are made (tests.harness.broker_relay.BrokerNetwork): each broker sits
behind two relays of the test's, one to ZooKeeper (a TcpProxy, as in the session-fault
tests) and one in front of its listener, whose address it advertises (``advertised.port``),
so that clients, the controller and the other brokers' replica fetchers all reach it through
that relay.  Brokers all live on 127.0.0.1, so the listener relay tells a peer broker's
connections from a client's by the client id in the connection's first request header
(``replica-fetcher-<id>``, ``controller-<id>``, ``broker-<id>``).  Cutting brokers A and B
apart black-holes, in both relays, every connection the other one opened: nothing passes
either way, nothing is reset, new connections are accepted and held, exactly as a cut
TcpProxy does; clients and ZooKeeper still reach both.  Healing relays what waited.

The scenarios (a 3-broker cluster, one partition of replication factor 3, a background
producer of unique values with acks=all, and the history checker of tests.harness.load):

- a follower cut off from its leader, not from ZooKeeper, leaves the ISR after
  replica.lag.time.max.ms, writes go on with the rest, and it rejoins after the heal;
- a leader cut off from ZooKeeper, not from clients, is replaced, and acknowledges nothing
  the new leader lacks: without ZooKeeper it cannot shrink its ISR, so acks=all stalls
  there while the new leader takes writes at the same offsets;
- the 2013 Jepsen sequence: the followers cut off from the leader (the controller, one of
  them, with them) until the ISR is the leader alone, then the leader cut off from
  ZooKeeper.  With min.insync.replicas=2 and unclean election off the leader acknowledges
  nothing alone and nothing acknowledged is lost.  With min.insync.replicas=1 and unclean
  election on, the leader acknowledges writes alone that the new leader never had, and the
  history checker must report every one of those lost, and no loss the old leader's
  truncation does not explain: the negative control that shows the checker sees a loss.

Every partition is healed before the checks; the checks read everything back.
"""

import re

import pytest

from kafka_ha.zk import znodes as zn
from tests.harness.broker_relay import BrokerNetwork
from tests.harness.cluster import SESSION_MS
from tests.harness.kafka import create_topic, log_size, log_text, read_state, verify_replicas, wait_isr
from tests.harness.load import BackgroundProducer, assert_intact, judge, read_partitions
from tests.harness.partition_faults import (TOPIC, ZOMBIE_REFUSALS, acked_offsets, create_partition, queue_produces,
                                            read_produce_answers, unique_values, wait_leader_and_isr_received)
from tests.harness.replica_files import segment_bytes

pytestmark = pytest.mark.system
LAG_MS = 3000
EXPIRY_S = SESSION_MS / 1000 + 15     # expiry, and the controller's reaction to it
SHRINK_S = LAG_MS / 1000 * 2 + 15     # lag time, the leader's check every half of it, the ISR write
# One batch per partition in flight, so that the only records a cut can leave in doubt are
# the chunk being acknowledged at that moment (BackgroundProducer sends chunks of 50, each
# once the previous one is answered); requests that give up on a silent leader soon enough
# for the producer to look for another within the test.
PRODUCER = {"max_in_flight_requests_per_connection": 1, "request_timeout_ms": 5000}
CHUNK = 50
# At most 5,000 values a second: enough to write throughout every phase, little enough to
# read back quickly (a leader acknowledging alone takes them as fast as they come).
PAUSE_S = 0.01
TRUNCATION = re.compile(r"Partition \[(?P<topic>[^,\]]+),0\] on broker \d+: "
                        r"truncating from offset (?P<leo>\d+) to (?P<target>\d+)")


@pytest.fixture
def network_cluster(cluster_factory):
    """``make(overrides=None)``: a started 3-broker cluster behind a BrokerNetwork:
    (cluster, network)."""
    networks = []

    def make(overrides=None):
        # Leadership moves only by the faults: no preferred-leader rebalance in the middle.
        config = {"replica.lag.time.max.ms": LAG_MS, "auto.leader.rebalance.enable": False, **(overrides or {})}
        cluster = cluster_factory(3, config, start=False, session_timeout_ms=SESSION_MS)
        networks.append(BrokerNetwork(cluster))
        cluster.start()
        return cluster, networks[-1]

    yield make
    for network in networks:
        network.close()


def registration(cluster, broker):
    """The czxid of ``broker``'s registration: it changes only when its session does."""
    return cluster.zk.exists(zn.BrokerIdZNode.path(broker)).czxid


def wait_isr_is(cluster, isr, timeout=SHRINK_S):
    return cluster.wait_until(lambda: set((s := read_state(cluster, TOPIC, 0)).isr) == set(isr) and s,
                              timeout=timeout, message=f"the ISR of {TOPIC}-0 never became {sorted(isr)}")


def truncated_range(cluster, broker, since):
    """(lowest offset truncated to, highest log end truncated from) of TOPIC-0 in ``broker``'s
    server.log after byte ``since``; None if it did not truncate."""
    text = log_text(cluster, broker, "server.log", since)
    found = [(int(m["target"]), int(m["leo"])) for m in TRUNCATION.finditer(text) if m["topic"] == TOPIC]
    return (min(t for t, _ in found), max(leo for _, leo in found)) if found else None


def report(name, load, history):
    print(f"{name}: {load.sent} sent, {len(load.acked)} acknowledged, {len(load.failed)} failed, "
          f"{history.surviving} survived at their offsets, {len(history.lost)} LOST, {history.unseen} never read; "
          f"duplicates {history.duplicates}, records sent again {load.retries.retried}")


# ---- (a) a follower cut off from its leader only ---------------------------------------------

def test_follower_cut_off_from_its_leader_leaves_the_isr_and_rejoins(network_cluster):
    """The leader stops hearing from the follower and shrinks the ISR after the lag time;
    acks=all writes go on with the leader and the third replica (min.insync.replicas=2).
    The follower keeps its ZooKeeper session and never stops being a follower.  After the
    heal it catches up and rejoins; nothing acknowledged is lost; the replicas are equal."""
    cluster, network = network_cluster()
    controller = cluster.wait_until(cluster.controller, message="no controller")
    # Neither end of the cut is the controller, whose requests would be cut too.
    leader, follower = sorted(set(cluster.broker_ids) - {controller})
    before = create_partition(cluster, [leader, follower, controller])
    session = registration(cluster, follower)

    with BackgroundProducer(cluster, TOPIC, pause_s=PAUSE_S, **PRODUCER) as load:
        load.wait_progress(200, what="production before the cut")
        network.cut_brokers(leader, follower)
        try:
            shrunk = wait_isr_is(cluster, [leader, controller])
            load.wait_progress(200, what="production with the follower cut off")
        finally:
            network.heal_brokers()
        wait_isr(cluster, TOPIC, cluster.broker_ids)
        load.wait_progress(100, what="production after the heal")

    history = load.history(cluster, 1)
    report("follower cut off", load, history)
    assert network.held_between(leader, follower) > 0, "the relays held no connection between the two"
    assert (shrunk.leader, shrunk.leader_epoch) == (before.leader, before.leader_epoch), shrunk
    assert f"followers [{follower}] fell more than {LAG_MS} ms behind" in log_text(cluster, leader, "server.log")
    final = read_state(cluster, TOPIC, 0)
    assert (final.leader, final.leader_epoch) == (leader, before.leader_epoch), final
    assert registration(cluster, follower) == session, "the follower's ZooKeeper session expired"
    assert_intact(history, load.retries.retried)
    assert not history.lost, f"{len(history.lost)} acknowledged values lost: {sorted(history.lost)[:10]}"
    verify_replicas(cluster, TOPIC)


# ---- (b) a leader cut off from ZooKeeper only -------------------------------------------------

def test_leader_cut_off_from_zookeeper_acknowledges_nothing_the_new_leader_lacks(network_cluster):
    """The leader's session expires and the controller elects another; the old leader still
    serves clients, believes it leads with a full ISR it can no longer shrink, and so appends
    acks=all produces sent to it but never acknowledges them.  The background producer,
    which knows the old leader only, stalls on it (a broker's REQUEST_TIMED_OUT is no reason
    to look for another leader), while a producer that asks the survivors writes to the new
    leader at the same offsets.  After the heal the old leader follows, truncates what only
    it appended, and rejoins; nothing acknowledged is lost; the replicas are equal."""
    cluster, network = network_cluster()
    controller = cluster.wait_until(cluster.controller, message="no controller")
    zombie = min(set(cluster.broker_ids) - {controller})
    survivors = sorted(set(cluster.broker_ids) - {zombie})
    before = create_partition(cluster, [zombie, *survivors])
    refused = unique_values(b"refused", 6)

    with BackgroundProducer(cluster, TOPIC, pause_s=PAUSE_S, **PRODUCER) as load:
        load.wait_progress(200, what="production before the cut")
        network.cut_zookeeper(zombie)
        try:
            cluster.wait_deregistered(zombie, timeout=EXPIRY_S)
            elected = cluster.wait_until(lambda: (s := read_state(cluster, TOPIC, 0)).leader in survivors and s,
                                         timeout=EXPIRY_S, message="no new leader")
            assert elected.leader_epoch == before.leader_epoch + 1 and zombie not in elected.isr, elected
            wait_leader_and_isr_received(cluster, survivors, elected.leader_epoch)
            acked_at_election = len(load.acked)
            during = acked_offsets(cluster.bootstrap_of(survivors), unique_values(b"during", 100),
                                   request_timeout_ms=5000)
            # Produces straight to the old leader's listener: it still takes them as the leader.
            queued = queue_produces(cluster.port(zombie), refused)
            first = [sent[0] for _, sent in queued]
            cluster.wait_until(lambda: all(v in segment_bytes(cluster, zombie, TOPIC) for v in first), timeout=20,
                               message="the cut leader did not append the produces sent to it")
            acked_before_heal = len(load.acked)
            since = log_size(cluster, zombie, "server.log")
        finally:
            network.heal_zookeeper(zombie)
        cluster.wait_registered([zombie], timeout=EXPIRY_S)
        wait_isr(cluster, TOPIC, cluster.broker_ids)
        load.wait_progress(100, what="production after the heal")

    answers = [x for sock, sent in queued for x in read_produce_answers(sock, len(sent))]
    records = read_partitions(cluster, TOPIC, 1)
    # The background producer's values are b"<n>"; any other value but the survivors'
    # (a refused one) left readable counts as corrupt.
    history = judge([r for r in records if not r.value.startswith(b"during")], load.sent, load.acked)
    report("leader cut off from ZooKeeper", load, history)
    print(f"the old leader answered {answers}; it truncated {truncated_range(cluster, zombie, since)}; "
          f"the background producer got {acked_before_heal - acked_at_election} acks between the election and the heal")
    assert all(x in ZOMBIE_REFUSALS for x in answers), f"the old leader answered {answers}"
    assert read_state(cluster, TOPIC, 0).leader_epoch == elected.leader_epoch
    assert_intact(history, load.retries.retried)
    assert not history.lost, f"{len(history.lost)} acknowledged values lost: {sorted(history.lost)[:10]}"
    readable = {r.offset: r.value for r in records}
    lost = {v: o for v, o in during.items() if readable.get(o) != v}
    assert not lost, f"values the new leader acknowledged are not at their offsets: {lost}"
    for b in cluster.broker_ids:
        kept = [v for v in refused if v in segment_bytes(cluster, b, TOPIC)]
        assert not kept, f"broker {b}'s log still holds {kept}: the old leader did not truncate"
    verify_replicas(cluster, TOPIC)


# ---- (c) the 2013 Jepsen sequence -------------------------------------------------------------

@pytest.mark.parametrize("min_isr, unclean", [(2, False), (1, True)],
                         ids=["min-isr-2-clean", "min-isr-1-unclean-negative-control"])
def test_jepsen_isolated_leader_then_cut_off_from_zookeeper(network_cluster, min_isr, unclean):
    """The followers are cut off from the leader until the ISR is the leader alone, then the
    leader is cut off from ZooKeeper; the producer writes throughout.

    min.insync.replicas=2, unclean election off: the leader alone acknowledges nothing, the
    partition goes offline when its session expires, the leader is elected again after the
    heal (it is the ISR), and nothing acknowledged is lost.

    min.insync.replicas=1, unclean election on (the negative control): the leader
    acknowledges writes alone; a follower that never had them is elected when its session
    expires; after the heal the old leader truncates them.  The history checker must report
    lost every value the leader acknowledged alone that was sent after the cut (no follower
    can have it), and nothing outside the offsets the old leader truncated.  (Not exactly
    the acknowledged values at those offsets: the new leader acknowledges its own there.)
    """
    cluster, network = network_cluster()
    controller = cluster.wait_until(cluster.controller, message="no controller")
    # The leader is not the controller, which must stay up to see it go and elect.
    leader = min(set(cluster.broker_ids) - {controller})
    followers = sorted(set(cluster.broker_ids) - {leader})
    create_topic(cluster, TOPIC, 1, 3, "--replica-assignment", ":".join(map(str, [leader, *followers])),
                 "--config", f"min.insync.replicas={min_isr}",
                 "--config", f"unclean.leader.election.enable={str(unclean).lower()}")
    wait_isr(cluster, TOPIC, cluster.broker_ids)
    since = log_size(cluster, leader, "server.log")

    with BackgroundProducer(cluster, TOPIC, pause_s=PAUSE_S, **PRODUCER) as load:
        load.wait_progress(200, what="production before the cut")
        for f in followers:
            network.cut_brokers(leader, f)
        # Values from here on were sent after the cut (the chunk in flight may straddle it):
        # no follower can hold them.
        after_cut = load.sent + CHUNK
        try:
            alone = wait_isr_is(cluster, [leader])
            acked_alone_from = len(load.acked)
            if min_isr == 1:
                load.wait_progress(3 * CHUNK, what="the leader acknowledging alone")
            network.cut_zookeeper(leader)
            acked_before_zk_cut = dict(load.acked)
            cluster.wait_deregistered(leader, timeout=EXPIRY_S)
            gone = cluster.wait_until(lambda: (s := read_state(cluster, TOPIC, 0)).leader != leader and s,
                                      timeout=EXPIRY_S, message="the controller did not act on the expiry")
            if unclean:
                assert gone.leader in followers, gone
                wait_leader_and_isr_received(cluster, followers, gone.leader_epoch)
            else:
                assert gone.leader == -1 and gone.isr == (leader,), gone
            acked_while_isolated = len(load.acked)
        finally:
            network.heal()
        cluster.wait_registered([leader], timeout=EXPIRY_S)
        wait_isr(cluster, TOPIC, cluster.broker_ids)
        load.wait_progress(100, what="production after the heal")

    history = load.history(cluster, 1)
    truncated = truncated_range(cluster, leader, since)
    final = read_state(cluster, TOPIC, 0)
    report(f"Jepsen min.insync.replicas={min_isr} unclean={unclean}", load, history)
    print(f"ISR of the leader alone at epoch {alone.leader_epoch}; then {gone}; finally {final}; "
          f"broker {leader} truncated {truncated}; lost {sorted(history.lost)[:5]}...")
    assert all(network.held_between(leader, f) > 0 for f in followers), "the relays held no follower"
    assert_intact(history, load.retries.retried)
    if not unclean:
        assert acked_while_isolated == acked_alone_from, \
            "the leader acknowledged acks=all writes alone with min.insync.replicas=2"
        assert final.leader == leader, final
        assert not history.lost, f"{len(history.lost)} acknowledged values lost: {sorted(history.lost)[:10]}"
    else:
        assert final.leader == gone.leader, final
        solo = {n: where for n, where in acked_before_zk_cut.items() if n >= after_cut}
        assert solo, "the leader acknowledged nothing alone before it was cut off from ZooKeeper"
        assert truncated is not None, f"broker {leader} never truncated"
        low, high = truncated
        # Every loss it reports is one the old leader's truncation explains ...
        outside = {n: where for n, where in history.lost.items() if not low <= where[1] < high}
        assert not outside, f"reported lost outside the offsets [{low}, {high}) broker {leader} truncated: {outside}"
        # ... and it reports every loss this run made certain.
        missed = sorted(set(solo) - set(history.lost))
        assert not missed, (f"{len(missed)} of the {len(solo)} values the leader acknowledged alone are not "
                            f"reported lost, e.g. {missed[:10]}")
        placed = sum(1 for _, offset in load.acked.values() if offset >= 0)
        assert placed == history.surviving + len(history.lost), (placed, history)
    verify_replicas(cluster, TOPIC)
