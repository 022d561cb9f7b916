"""A paused leader and a paused follower (failure scenarios #4 and #16, docs/design.md §9).

Both faults are SIGSTOP: the process keeps its sockets, so the kernel still accepts
connections and buffers requests for it, and after SIGCONT it carries on from the state
it had, a leader that does not know it was replaced or a follower that believes it is
in sync.
"""

import time
from typing import NamedTuple

import gevent
import pytest

from kafka_ha.client.producer import Producer
from kafka_ha.model import LeaderAndIsr
from tests.harness.cluster import SESSION_MS
from tests.harness.kafka import log_size, log_text, read_state, verify_replicas, wait_isr
from tests.harness.partition_faults import (REQUESTS_PER_CONNECTION, TOPIC, ZOMBIE_REFUSALS, acked_offsets,
                                            assert_acked_readable, assert_zombie_left_no_trace,
                                            create_partition, queue_produces, read_produce_answers,
                                            unique_values, wait_leader_and_isr_received)

pytestmark = pytest.mark.system


# ---- scenario #4: a zombie leader -------------------------------------------------------

# Connections to the stopped zombie, each with REQUESTS_PER_CONNECTION produces queued on it.
ZOMBIE_CONNECTIONS = 3


@pytest.mark.parametrize("zombie_controls", [False, True], ids=["leader", "leader-and-controller"])
def test_zombie_leader_never_acks_and_rejoins_as_follower(cluster_factory, zombie_controls):
    """#4: SIGSTOP the leader past the session timeout; a new leader takes over meanwhile and
    the resumed zombie refuses the produces queued for it, truncates and follows."""
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    controller = cluster.wait_until(cluster.controller, message="no controller")
    # The assignment is chosen so that the zombie is (or is not) also the controller:
    # both variants of the scenario, each deterministic.
    zombie = controller if zombie_controls else min(set(cluster.broker_ids) - {controller})
    survivors = sorted(set(cluster.broker_ids) - {zombie})
    before = create_partition(cluster, [zombie, *survivors])
    assert before.leader == zombie
    acked = acked_offsets(cluster.bootstrap_servers, unique_values(b"before", 20))
    refused = unique_values(b"refused", ZOMBIE_CONNECTIONS * REQUESTS_PER_CONNECTION)

    cluster.sigstop(zombie)
    try:
        elected = cluster.wait_until(
            lambda: (s := read_state(cluster, TOPIC, 0)).leader in survivors and s,
            timeout=SESSION_MS / 1000 + 20, message="no new leader while the old one is stopped")
        assert zombie not in elected.isr and elected.leader_epoch == before.leader_epoch + 1, \
            (before, elected)
        # #4's precondition: the followers have moved on, none fetches from the zombie.
        wait_leader_and_isr_received(cluster, survivors, elected.leader_epoch)
        # The producer knows only the survivors: a metadata request to the stopped
        # broker would hang (and an attempt sent there on stale metadata times out
        # and is retried at the new leader).
        acked.update(acked_offsets(cluster.bootstrap_of(survivors), unique_values(b"during", 20),
                                   request_timeout_ms=5000))
        state_change_offset = log_size(cluster, zombie, "state-change.log")
        queued = queue_produces(cluster.port(zombie), refused)
    finally:
        cluster.sigcont(zombie)

    # The new leader's log grows past the offsets the zombie gave the refused values
    # while their produces may still wait there: a zombie that counted the high
    # watermark it learns as a follower towards its own acks would answer success.
    acked.update(acked_offsets(cluster.bootstrap_servers, unique_values(b"after", 200)))
    answers = [a for sock, sent in queued for a in read_produce_answers(sock, len(sent))]
    assert all(a in ZOMBIE_REFUSALS for a in answers), f"zombie answers {answers}"

    wait_leader_and_isr_received(cluster, [zombie], elected.leader_epoch, {zombie: state_change_offset})
    assert f"become-follower transition for partition [{TOPIC},0]" in log_text(
        cluster, zombie, "state-change.log", state_change_offset)
    wait_isr(cluster, TOPIC, cluster.broker_ids)
    final = read_state(cluster, TOPIC, 0)
    assert (final.leader, final.leader_epoch) == (elected.leader, elected.leader_epoch), final

    assert_zombie_left_no_trace(cluster, acked, refused)
    print(f"the zombie answered {answers}; " + "; ".join(
        line for line in log_text(cluster, zombie, "server.log").splitlines() if "truncating" in line))


# ---- scenario #16: a slow follower ------------------------------------------------------

LAG_MS = 6000
# Longer than any pause below, so the paused follower keeps its session: an ISR shrink is
# then the leader's doing (lag), not the controller's (a dead broker).  ZooKeeper's
# maxSessionTimeout in the test ensemble is 30 s.
SLOW_FOLLOWER_SESSION_MS = 30000
SHORT_PAUSE_S = 2.0
SLOW, LEADER = 3, 1


class Sample(NamedTuple):
    at: float                # time.monotonic() when the state was read
    acked: bool              # whether the produce had its answer just before that
    state: LeaderAndIsr


def watch_partition(cluster, future, done, timeout_s):
    """Read TOPIC-0's state every 0.1 s until ``done(sample)``: the samples.

    ``gevent.sleep`` between the reads lets the producer's sender send ``future``'s
    request and read its answer meanwhile.
    """
    samples = []
    deadline = time.monotonic() + timeout_s
    while not samples or not done(samples[-1]):
        assert time.monotonic() < deadline, f"still waiting after {timeout_s} s: {samples[-1:]}"
        acked = future.done()
        samples.append(Sample(time.monotonic(), acked, read_state(cluster, TOPIC, 0)))
        gevent.sleep(0.1)
    return samples


class SlowFollowerSetup(NamedTuple):
    cluster: object
    before: LeaderAndIsr       # TOPIC-0's state with the full ISR
    producer: Producer         # acks=all, metadata and connection ready
    acked: dict                # {value: offset}
    caught_up_since: float     # time.monotonic() before a message the slow follower fetched


@pytest.fixture
def slow_follower(cluster_factory):
    """Brokers 1-3 with a known replica.lag.time.max.ms; TOPIC on 1:2:3; one message acked."""
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": LAG_MS},
                              session_timeout_ms=SLOW_FOLLOWER_SESSION_MS)
    before = create_partition(cluster, [LEADER, 2, SLOW])
    producer = Producer(cluster.bootstrap_servers, acks="all", retries=5, request_timeout_ms=60000)
    # The warm-up readies the producer, so a send during a pause leaves at once.  Its
    # acknowledgement (the ISR is full) proves the slow follower fetched past it after
    # sent_at: the leader's lag clock for that follower cannot have started earlier.
    sent_at = time.monotonic()
    offset = producer.send(TOPIC, b"warm-up", partition=0).get(timeout=60).offset
    yield SlowFollowerSetup(cluster, before, producer, {b"warm-up": offset}, sent_at)
    producer.close()


def assert_caught_up_and_consistent(setup):
    cluster = setup.cluster
    wait_isr(cluster, TOPIC, [LEADER, 2, SLOW])
    setup.acked.update(acked_offsets(cluster.bootstrap_servers, unique_values(b"after", 20)))
    assert_acked_readable(cluster, setup.acked)
    verify_replicas(cluster, TOPIC)


def test_follower_paused_shorter_than_lag_time_stays_in_isr(slow_follower):
    """#16 (a): an acks=all produce waits for a follower paused for less than the lag
    time, and succeeds after it resumes; the ISR is never touched."""
    cluster, before, producer = slow_follower.cluster, slow_follower.before, slow_follower.producer
    cluster.sigstop(SLOW)
    try:
        paused = producer.send(TOPIC, b"during-pause", partition=0)
        resume_at = time.monotonic() + SHORT_PAUSE_S
        samples = watch_partition(cluster, paused, lambda s: s.at >= resume_at, SHORT_PAUSE_S + 30)
    finally:
        cluster.sigcont(SLOW)

    assert not any(s.acked for s in samples), "acked while an ISR member could not have the message"
    slow_follower.acked[b"during-pause"] = paused.get(timeout=60).offset
    after = read_state(cluster, TOPIC, 0)
    assert all(s.state.isr == before.isr for s in samples), [s.state for s in samples]
    # No write at all to the state znode: no shrink and re-expansion between two samples.
    assert after.zk_version == before.zk_version, (before, after)
    assert_caught_up_and_consistent(slow_follower)


def test_follower_paused_longer_than_lag_time_leaves_isr_then_rejoins(slow_follower):
    """#16 (b): a follower paused past the lag time is dropped from the ISR, not earlier
    than the lag time; the acks=all produce waiting for it then succeeds with ISR {1,2};
    after it resumes it catches up and rejoins."""
    cluster, before, producer = slow_follower.cluster, slow_follower.before, slow_follower.producer
    cluster.sigstop(SLOW)
    stopped_at = time.monotonic()
    try:
        paused = producer.send(TOPIC, b"during-pause", partition=0)
        samples = watch_partition(cluster, paused, lambda s: SLOW not in s.state.isr,
                                  SLOW_FOLLOWER_SESSION_MS / 1000 - 5)
        slow_follower.acked[b"during-pause"] = paused.get(timeout=60).offset
    finally:
        cluster.sigcont(SLOW)

    shrunk = samples[-1]
    print(f"ISR shrank {shrunk.at - stopped_at:.2f} s after SIGSTOP "
          f"(replica.lag.time.max.ms {LAG_MS})")
    assert set(shrunk.state.isr) == {LEADER, 2}, shrunk
    # The leader shrank it (same epoch), not the controller after a session expiry.
    assert shrunk.state.leader_epoch == before.leader_epoch, (before, shrunk)
    # The leader's clock and ours differ by the millisecond rounding of its timestamps.
    lag_s = shrunk.at - slow_follower.caught_up_since
    assert lag_s >= LAG_MS / 1000 - 0.01, f"ISR shrank {lag_s:.2f} s after the follower's last fetch"
    assert not any(s.acked and SLOW in s.state.isr for s in samples), \
        "acked before the ISR shrank, while the paused follower could not have the message"
    assert_caught_up_and_consistent(slow_follower)
