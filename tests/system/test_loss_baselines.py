"""Failure scenario #25 (docs/design.md §9): acks=1 and acks=0 baselines under #1 (kill -9
the leader of p0 once) and #4 (SIGSTOP the leader past the session timeout, then SIGCONT).

Expected: acks=1 loses acknowledged writes only on a leader change, and no more than the
followers lagged: only what the old leader acknowledged at offsets it later truncated.
acks=0 may lose anything, but nothing read is corrupt, duplicated without a retry, or out
of send order.  Since acks=all must lose nothing, these baselines are what proves that
the history checker (tests.harness.load.judge) can see a loss at all: one test provokes a
loss of a known size and requires the checker to count exactly that.

What is allowed, and why:
- duplicates: a value may be read again only as often as the producer sent records again
  (there is no idempotence; a retry of a batch that was written writes it twice).  With
  acks=0 a written request is never retried, so duplicates there are as good as none;
- order: per partition, the first copies of values come in send order.  The producer has
  one batch per partition in flight, so a retry is never overtaken by a later batch and
  any reordering would be the brokers' doing;
- loss (acks=1): an acknowledged value missing from its offset must lie in the range the
  old leader truncated when it rejoined as a follower (its server.log says which), i.e.
  what it had acknowledged and no follower had fetched.  Such values occupy distinct
  offsets of that range, so their number is also bounded by its size.
"""

import re

import pytest

from tests.harness.kafka import create_topic, log_size, log_text, read_states
from tests.harness.load import BackgroundProducer, judge, read_partitions
from tests.system.test_log_safety import produce, resume, stop_fetching, verify_replicas, wait_isr

pytestmark = pytest.mark.system
TOPIC = "baseline"
PARTITIONS = 3
SESSION_MS = 4000
# One batch per partition in flight (see the module docstring), and requests that give up
# on a stopped leader soon enough for the producer to find the new one within the test.
BASELINE_PRODUCER = {"max_in_flight_requests_per_connection": 1, "request_timeout_ms": 5000}
# acks=0 is answered at once, even by a stopped broker's socket buffers: at most 5,000
# values a second keeps what the drain reads (once 470,000 values in one test) small.
PAUSE_S = {1: 0.0, 0: 0.01}
TRUNCATION = re.compile(r"Partition \[(?P<topic>[^,\]]+),(?P<partition>\d+)\] on broker \d+: "
                        r"truncating from offset (?P<leo>\d+) to (?P<target>\d+)")


# ---- setting up and reading back ---------------------------------------------------------

def create_baseline_topic(cluster, *assignment):
    """TOPIC with PARTITIONS partitions on all brokers (round robin unless ``assignment``,
    e.g. "1:2:3,2:3:1,3:1:2"), min.insync.replicas=2 as in the scenarios; returns their states once
    every ISR is full."""
    layout = ("--replica-assignment", *assignment) if assignment else ()
    create_topic(cluster, TOPIC, PARTITIONS, 3, *layout, "--config", "min.insync.replicas=2")
    wait_all_isrs_full(cluster)
    return read_states(cluster, TOPIC)


def wait_all_isrs_full(cluster, partitions=PARTITIONS):
    for p in range(partitions):
        wait_isr(cluster, TOPIC, cluster.broker_ids, partition=p)


def truncated_ranges(cluster, broker, since):
    """{partition: (lowest offset truncated to, highest log end truncated from)} of TOPIC,
    from ``broker``'s server.log after byte ``since``."""
    ranges = {}
    for m in TRUNCATION.finditer(log_text(cluster, broker, "server.log", since)):
        if m["topic"] == TOPIC:
            p, target, leo = int(m["partition"]), int(m["target"]), int(m["leo"])
            low, high = ranges.get(p, (target, leo))
            ranges[p] = (min(low, target), max(high, leo))
    return ranges


# ---- the checks ----------------------------------------------------------------------------

def assert_intact(history, retried):
    """No corrupt record, no first copy out of send order, no more duplicates in a partition
    than records the producer sent again to it (``retried``: {partition: records})."""
    assert not history.corrupt, f"{len(history.corrupt)} corrupt records, e.g. {history.corrupt[:5]}"
    assert not history.reordered, \
        f"{len(history.reordered)} values read out of send order, e.g. {history.reordered[:5]}"
    unexplained = {p: (copies, retried.get(p, 0)) for p, copies in history.duplicates.items()
                   if copies > retried.get(p, 0)}
    assert not unexplained, f"{{partition: (duplicates, records sent again)}}: {unexplained}"


def assert_loss_bounded(history, acked, truncated):
    """acks=1: every acknowledged value missing from its offset lies in the range the old
    leader truncated; and the checker's books balance."""
    placed = sum(1 for _, offset in acked.values() if offset >= 0)
    assert placed == history.surviving + len(history.lost), (placed, history)
    outside = {n: (p, o) for n, (p, o) in history.lost.items()
               if not truncated.get(p, (0, 0))[0] <= o < truncated.get(p, (0, 0))[1]}
    assert not outside, (f"{len(outside)} acknowledged values lost outside what the old leader "
                         f"truncated ({truncated}), e.g. {list(outside.items())[:5]}")


def judge_baseline(name, cluster, load, old_leader, since, led):
    """Read back, report and check one load test: nothing damaged, acks=1 loss bounded by
    what ``old_leader`` truncated (its server.log after byte ``since``), and truncation only
    of the partitions ``led`` that it led."""
    history = load.history(cluster, PARTITIONS)
    truncated = truncated_ranges(cluster, old_leader, since)
    print(f"{name}: {load.sent} sent, {len(load.acked)} acknowledged, {len(load.failed)} failed, "
          f"{history.surviving} survived at their offsets, {len(history.lost)} LOST, "
          f"{history.unseen} never read; duplicates {history.duplicates}, records sent again "
          f"{load.retries.retried}; truncated {truncated}")
    assert_intact(history, load.retries.retried)
    assert_loss_bounded(history, load.acked, truncated)
    assert set(truncated) <= set(led), f"broker {old_leader} truncated partitions it did not lead: {truncated}"


# ---- #1: kill -9 the leader of p0 under load ---------------------------------------------

@pytest.mark.parametrize("acks", [1, 0])
def test_kill_leader_under_load(cluster_factory, acks):
    """#1 with acks=1 or 0: the producer goes on through the failover and the restart;
    nothing read is damaged, and acks=1 loses only what the killed leader truncated."""
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    before = create_baseline_topic(cluster)
    victim = before[0].leader
    led = [p for p, s in before.items() if s.leader == victim]
    since = log_size(cluster, victim, "server.log")

    with BackgroundProducer(cluster, TOPIC, acks=acks, pause_s=PAUSE_S[acks], **BASELINE_PRODUCER) as load:
        load.wait_progress(200, what="production before the kill")
        cluster.kill(victim)
        cluster.wait_until(lambda: all(read_states(cluster, TOPIC)[p].leader not in (victim, -1) for p in led),
                           timeout=SESSION_MS / 1000 + 20, message=f"partitions {led} did not fail over")
        load.wait_progress(200, what="production after the failover")
        cluster.start_broker(victim)
        wait_all_isrs_full(cluster)
        load.wait_progress(100, what="production after the restart")

    judge_baseline(f"#1 acks={acks}", cluster, load, victim, since, led)


# ---- #4: a zombie leader under load -------------------------------------------------------

@pytest.mark.parametrize("acks", [1, 0])
def test_zombie_leader_under_load(cluster_factory, acks):
    """#4 with acks=1 or 0: the leader of p0 is stopped past its session, a survivor takes
    over, the producer moves there; the resumed zombie rejoins as a follower.  Nothing read
    is damaged; acks=1 loses only what the zombie acknowledged and then truncated."""
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    controller = cluster.wait_until(cluster.controller, message="no controller")
    # The zombie is not the controller, which must stay up to elect the new leader.
    zombie = min(set(cluster.broker_ids) - {controller})
    a, b = sorted(set(cluster.broker_ids) - {zombie})
    before = create_baseline_topic(cluster, f"{zombie}:{a}:{b},{a}:{b}:{zombie},{b}:{zombie}:{a}")
    assert before[0].leader == zombie
    since = log_size(cluster, zombie, "server.log")

    with BackgroundProducer(cluster, TOPIC, acks=acks, pause_s=PAUSE_S[acks], **BASELINE_PRODUCER) as load:
        load.wait_progress(200, what="production before the pause")
        cluster.sigstop(zombie)
        try:
            cluster.wait_until(lambda: read_states(cluster, TOPIC)[0].leader in (a, b),
                               timeout=SESSION_MS / 1000 + 20,
                               message="no new leader of p0 while the old one is stopped")
            load.wait_progress(200, what="production while the old leader is stopped")
        finally:
            cluster.sigcont(zombie)
        wait_all_isrs_full(cluster)
        load.wait_progress(100, what="production after the zombie rejoined")

    judge_baseline(f"#4 acks={acks}", cluster, load, zombie, since, led=[0])


# ---- a loss of known size ------------------------------------------------------------------

BEFORE, WINDOW, AFTER = 20, 15, 10


def test_acks1_known_loss_is_exactly_the_tail_no_follower_fetched(cluster_factory):
    """#1 with the followers of p0 stopped first, so that the leader acknowledges WINDOW
    acks=1 writes that only it holds, then dies.  The followers resume within their
    sessions and lag time, so one is elected from the ISR without those writes; the old
    leader, restarted, truncates them.  The checker must report exactly those WINDOW values
    lost, all at the offsets the old leader's truncation line names, and nothing else.
    """
    # Sessions long enough for two followers stopped one after the other (stop_fetching
    # waits 1 s after each) and the kill; the failover waits for the victim's session.
    cluster = cluster_factory(3, session_timeout_ms=8000)
    create_topic(cluster, TOPIC, 1, 3, "--config", "min.insync.replicas=2")
    wait_isr(cluster, TOPIC, cluster.broker_ids)
    victim = read_states(cluster, TOPIC)[0].leader
    followers = sorted(set(cluster.broker_ids) - {victim})
    values = [b"%d" % n for n in range(BEFORE + WINDOW + AFTER)]
    before, window, after = values[:BEFORE], values[BEFORE:BEFORE + WINDOW], values[BEFORE + WINDOW:]

    acked = dict(zip(before, produce(cluster, TOPIC, before, acks=1)))
    # Replicated to both followers: consumers read only below the HW, the least log end of
    # the ISR.  (A full ISR alone does not say so: an acks=1 write does not wait for it, and
    # a follower that had not fetched it yet, once elected, loses it too.)
    cluster.wait_until(lambda: len(read_partitions(cluster, TOPIC, 1)) == BEFORE, timeout=30,
                       message="the followers did not fetch the first writes")
    stopped = []
    try:
        for f in followers:
            stop_fetching(cluster, f, stopped)
        acked.update(zip(window, produce(cluster, TOPIC, window, acks=1, via=[victim])))
        since = log_size(cluster, victim, "server.log")
        cluster.kill(victim)
    finally:
        for f in list(stopped):
            resume(cluster, f, stopped)
    cluster.wait_until(lambda: read_states(cluster, TOPIC)[0].leader in followers,
                       timeout=cluster.session_timeout_ms / 1000 + 20, message="no follower took over")
    acked.update(zip(after, produce(cluster, TOPIC, after, acks=1, via=followers)))
    cluster.start_broker(victim)
    wait_isr(cluster, TOPIC, cluster.broker_ids)

    history = judge(read_partitions(cluster, TOPIC, 1), len(values), {int(v): (0, o) for v, o in acked.items()})
    truncated = truncated_ranges(cluster, victim, since)
    print(f"known-loss: {len(acked)} acknowledged, {history.surviving} survived, "
          f"{len(history.lost)} LOST {sorted(history.lost)}; broker {victim} truncated {truncated}")
    assert_intact(history, {})
    assert 0 in truncated, f"broker {victim} logged no truncation of p0"
    low, high = truncated[0]
    assert high - low == WINDOW, f"broker {victim} truncated {high - low} records, not the {WINDOW} acknowledged"
    assert sorted(history.lost) == [int(v) for v in window], \
        f"the checker reports {history.lost} lost, not the {WINDOW} values only the dead leader had"
    assert all(low <= offset < high for _, offset in history.lost.values()), (history.lost, truncated)
    assert history.surviving == BEFORE + AFTER and history.unseen == WINDOW, history
    verify_replicas(cluster, TOPIC)
