"""A paused leader and a paused follower (failure scenarios #4 and #16, docs/design.md §9).

Both faults are SIGSTOP: the process keeps its sockets, so the kernel still accepts
connections and buffers requests for it, and after SIGCONT it carries on from the state
it had, a leader that does not know it was replaced or a follower that believes it is
in sync.
"""

import socket
import time
from pathlib import Path
from typing import NamedTuple

import gevent
import pytest

from kafka_ha.client.producer import Producer
from kafka_ha.model import LeaderAndIsr
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import decode_response, encode_request
from kafka_ha.protocol.stream_io import FrameReader, TruncatedFrame
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.tools.processes import HOST
from tests.harness.kafka import create_topic, log_size, log_text, read_state, received_leader_and_isr
from tests.system.test_log_safety import read_all, verify_replicas, wait_isr

pytestmark = pytest.mark.system
TOPIC = "faults"
SESSION_MS = 4000


# ---- producing and checking -------------------------------------------------------------

def create_partition(cluster, replicas):
    """TOPIC with one partition on ``replicas`` (the first leads), min.insync.replicas=2."""
    create_topic(cluster, TOPIC, 1, len(replicas), "--replica-assignment", ":".join(map(str, replicas)),
                 "--config", "min.insync.replicas=2")
    wait_isr(cluster, TOPIC, replicas)
    return read_state(cluster, TOPIC, 0)


def acked_offsets(bootstrap, values, **producer_config):
    """Produce ``values`` with acks=all and wait for every answer: {value: acknowledged offset}."""
    producer = Producer(bootstrap, acks="all", retries=20, **producer_config)
    try:
        futures = {v: producer.send(TOPIC, v, partition=0) for v in values}
        producer.flush()
        return {v: f.get(timeout=60).offset for v, f in futures.items()}
    finally:
        producer.close()


def assert_acked_readable(cluster, acked):
    """Every acknowledged value is where it was acknowledged; returns what consumers read."""
    readable = dict(read_all(cluster, TOPIC))
    lost = {v: o for v, o in acked.items() if readable.get(o) != v}
    assert not lost, f"{len(lost)} acknowledged values not at their offsets, e.g. {list(lost.items())[:5]}"
    return readable


def assert_zombie_left_no_trace(cluster, acked, refused):
    """After a zombie leader rejoined as follower: every acknowledged value is where it was
    acknowledged, none it refused is readable or left in any replica's log (it truncated),
    and the replicas are identical."""
    readable = assert_acked_readable(cluster, acked)
    assert not set(refused) & set(readable.values()), "a value the zombie refused is readable"
    for b in cluster.broker_ids:
        kept = [v for v in refused if v in segment_bytes(cluster, b)]
        assert not kept, f"broker {b}'s log still holds {kept}: the zombie did not truncate"
    verify_replicas(cluster, TOPIC)


def segment_bytes(cluster, broker):
    """Everything in ``broker``'s segment files of TOPIC-0: what its replica really holds."""
    partition_dir = Path(cluster.config_path(broker)).parent / "data" / f"{TOPIC}-0"
    return b"".join(p.read_bytes() for p in sorted(partition_dir.glob("*.log")))


def unique_values(prefix, count):
    return [b"%s-%d" % (prefix, i) for i in range(count)]


# ---- scenario #4: a zombie leader -------------------------------------------------------

# What a replaced leader may answer an acks=-1 produce: anything but success.
CLOSED = "connection closed"
ZOMBIE_REFUSALS = {ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                   ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, CLOSED}
ZOMBIE_PRODUCE_TIMEOUT_MS = 15000
ZOMBIE_CONNECTIONS, REQUESTS_PER_CONNECTION = 3, 2


def queue_produces(port, refused):
    """Write one acks=-1 Produce per value of ``refused`` to ``port`` of a stopped broker.

    The kernel completes the connections and buffers the requests for the stopped
    process, so they are the first thing it reads when it resumes, while it may still
    believe it leads.  Several connections, each with requests pipelined behind each
    other, so that more than one of them is handled before the broker learns otherwise.
    Returns [(socket, the values sent on it)].
    """
    queued = []
    for first in range(0, len(refused), REQUESTS_PER_CONNECTION):
        batch = refused[first:first + REQUESTS_PER_CONNECTION]
        sock = socket.create_connection((HOST, port), timeout=60)
        for correlation_id, value in enumerate(batch):
            sock.sendall(encode_request(ApiKey.PRODUCE, 2, correlation_id, "zombie-test", {
                "acks": -1, "timeout_ms": ZOMBIE_PRODUCE_TIMEOUT_MS, "topic_data": [
                    {"name": TOPIC, "partition_data": [
                        {"index": 0, "records": build_v2_batch([Record(None, value)])}]}]}))
        queued.append((sock, batch))
    return queued


def read_produce_answers(sock, count):
    """The partition error codes of the next ``count`` Produce v2 answers on ``sock``.

    A connection the broker closes instead counts as CLOSED for every unanswered request.
    """
    reader = FrameReader(0, 1 << 20)
    answers = []
    with sock:
        for _ in range(count):
            try:
                frame = reader.read(sock.recv_into)
            except (TruncatedFrame, ConnectionResetError):
                frame = None
            except socket.timeout:
                return answers + ["no answer within 60 s"] * (count - len(answers))
            if frame is None:
                return answers + [CLOSED] * (count - len(answers))
            _, body = decode_response(ApiKey.PRODUCE, 2, frame)
            answers.append(body["responses"][0]["partition_responses"][0]["error_code"])
    return answers


def wait_leader_and_isr_received(cluster, brokers, topic_epoch, since=None):
    """Wait until every broker of ``brokers`` applied a LeaderAndIsr of TOPIC-0 at ``topic_epoch``
    or later (``since``: {broker: state-change.log offset} to read from)."""
    def received(b):
        text = log_text(cluster, b, "state-change.log", (since or {}).get(b, 0))
        return received_leader_and_isr(text).get((TOPIC, 0), -1) >= topic_epoch
    cluster.wait_until(lambda: all(received(b) for b in brokers), timeout=60,
                       message=f"brokers {brokers} did not all get leader epoch {topic_epoch}")


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
