"""A leader Partition over a real Log: follower positions, the HW, the ISR it acts on, acks=all."""
import gevent
import pytest

from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.broker.partition import Partition
from tests.harness.leader_setup import RecordingIsrWriter, batch, leader, open_log, state

NOW = 10_000


@pytest.fixture
def log_(tmp_path):
    lg = open_log(tmp_path)
    yield lg
    lg.close()


# ---- follower fetches (defect 2) ----------------------------------------------------------

@pytest.mark.parametrize("isr, min_isr", [((1, 2), 1), ((1,), 2)], ids=["isr-member", "joining"])
def test_a_fetch_beyond_the_leo_does_not_move_the_high_watermark(log_, isr, min_isr):
    """Follower 2 asks for offset 50 of a 3-record log: the leader answers OFFSET_OUT_OF_RANGE
    and 2 holds none of the records, so they must not become committed, neither because 2 is
    an ISR member nor because it would be joining the ISR."""
    writer = RecordingIsrWriter()
    p = leader(log_, isr, min_isr, writer, replicas=(1, 2))
    p.append_as_leader(batch(b"a", b"b", b"c"), acks=1)
    p.on_follower_fetch(2, 50, NOW)
    assert p.high_watermark == 0
    assert writer.expansions == [], "a follower that holds nothing was added to the ISR"
    assert p.followers[2].log_end_offset == -1


def test_a_fetch_below_the_log_start_is_not_the_followers_position(log_):
    p = leader(log_, (1, 2), replicas=(1, 2))
    p.truncate_fully_and_start_at(100)
    p.append_as_leader(batch(b"a"), acks=1)
    p.on_follower_fetch(2, 101, NOW)
    p.on_follower_fetch(2, 5, NOW + 1)
    assert (p.followers[2].log_end_offset, p.high_watermark) == (101, 101)


def test_a_caught_up_follower_still_joins_the_isr(log_):
    writer = RecordingIsrWriter()
    p = leader(log_, (1,), writer=writer, replicas=(1, 2))
    p.append_as_leader(batch(b"a", b"b"), acks=1)
    p.on_follower_fetch(2, 2, NOW)
    assert [isr for isr, _ in writer.expansions] == [(1, 2)]


# ---- acks=all waiters (defect 9) -----------------------------------------------------------

def test_an_acks_all_waiter_is_told_at_once_when_the_isr_shrinks_below_min_isr(log_):
    """Kafka answers NOT_ENOUGH_REPLICAS_AFTER_APPEND; the HW no longer moves below
    min.insync.replicas here, so the waiter used to time out instead."""
    p = leader(log_, (1, 2), min_isr=2, replicas=(1, 2))
    appended = p.append_as_leader(batch(), acks=-1)
    waiter = gevent.spawn(p.wait_for_acks, appended, 5.0)
    gevent.sleep(0)
    p.set_isr((1,), 1)
    assert waiter.get() == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_an_acks_all_waiter_succeeds_once_the_isr_has_it(log_):
    p = leader(log_, (1, 2), min_isr=2, replicas=(1, 2))
    appended = p.append_as_leader(batch(), acks=-1)
    waiter = gevent.spawn(p.wait_for_acks, appended, 30.0)
    gevent.sleep(0)
    p.on_follower_fetch(2, appended.last_offset + 1, NOW)
    assert waiter.get() == ErrorCode.NONE


# ---- follower fetches that move nothing (issue 23: a fetch of thousands of idle partitions) ----

def test_a_follower_fetch_that_moves_nothing_does_not_recompute_the_high_watermark(log_, monkeypatch):
    from kafka_ha.broker import replication
    computed = []
    real = replication.new_high_watermark
    monkeypatch.setattr(replication, "new_high_watermark",
                        lambda *a, **kw: computed.append(a) or real(*a, **kw))
    p = leader(log_, (1, 2, 3), replicas=(1, 2, 3))
    p.append_as_leader(batch(b"a", b"b"), acks=1)
    computed.clear()
    p.on_follower_fetch(2, 2, NOW)
    assert len(computed) == 1 and p.high_watermark == 0, "follower 3 holds nothing yet"
    p.on_follower_fetch(2, 2, NOW + 1)
    assert len(computed) == 1, "2 did not move: the HW cannot have"
    assert p.followers[2].last_fetch_ms == NOW + 1, "the fetch still counts (caught-up time)"
    p.on_follower_fetch(3, 2, NOW + 2)
    assert p.high_watermark == 2


def test_lowering_min_insync_replicas_commits_what_an_idle_isr_already_holds(log_):
    min_isr = [3]
    p = Partition(log_.tp, 1, log_, lambda: min_isr[0], RecordingIsrWriter())
    p.make_leader(state((1, 2), 1, (1, 2), tp=log_.tp))
    p.append_as_leader(batch(b"a", b"b"), acks=1)
    p.on_follower_fetch(2, 2, NOW)
    assert p.high_watermark == 0, "below min.insync.replicas the HW does not move"
    min_isr[0] = 2
    p.on_config_change()
    assert p.high_watermark == 2


def test_a_follower_that_registers_joins_the_isr_at_its_next_fetch_without_moving(log_):
    live = [False]
    writer = RecordingIsrWriter()
    p = Partition(log_.tp, 1, log_, lambda: 1, writer, is_live=lambda b: live[0])
    p.make_leader(state((1,), 1, (1, 2), tp=log_.tp))
    p.append_as_leader(batch(b"a"), acks=1)
    p.on_follower_fetch(2, 1, NOW)
    assert writer.expansions == [], "not registered: it stays out"
    live[0] = True
    p.on_follower_fetch(2, 1, NOW + 1)
    assert [isr for isr, _ in writer.expansions] == [(1, 2)]
