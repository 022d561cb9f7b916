"""The leader's pure replication decisions (kafka_ha/broker/replication.py), as tables."""
import pytest

from kafka_ha.broker import replication
from kafka_ha.broker.replication import FollowerState
from kafka_ha.protocol.errors import ErrorCode

NOW = 10_000


# ---- a follower's fetch -----------------------------------------------------------------

@pytest.mark.parametrize("fetch_offset, leader_leo, log_start, recorded", [
    (7, 10, 0, True),      # behind: its position moves, it is not caught up
    (10, 10, 0, True),     # at the LEO: caught up now
    (0, 10, 0, True),      # an empty follower at the log start
    (11, 10, 0, False),    # beyond the LEO: the leader answers OFFSET_OUT_OF_RANGE
    (500, 10, 0, False),   # a follower that followed another leader further
    (4, 10, 5, False),     # below the log start: OFFSET_OUT_OF_RANGE too
    (5, 10, 5, True),      # at the log start
])
def test_only_a_fetch_the_leader_can_serve_is_the_followers_position(fetch_offset, leader_leo,
                                                                     log_start, recorded):
    """Kafka updates a follower's state only after a successful read: an offset the leader
    cannot read from is not the follower's LEO, and not a sign that it caught up."""
    before = FollowerState(log_end_offset=3, last_caught_up_ms=1000, last_fetch_leader_leo=9,
                           last_fetch_ms=2000)
    state = FollowerState(**{f: getattr(before, f) for f in before.__slots__})
    kwargs = {"log_start_offset": log_start} if log_start else {}
    replication.on_follower_fetch(state, fetch_offset, leader_leo, NOW, **kwargs)
    if recorded:
        assert state.log_end_offset == fetch_offset
        assert state.last_fetch_leader_leo == leader_leo
    else:
        assert state == before, "an out-of-range fetch changed the follower's state"


def test_a_follower_beyond_the_leo_neither_commits_nor_joins():
    """The reviewed defect: a follower fetching past the leader's LEO was recorded at that
    offset, so it could rejoin the ISR and the HW could pass what it holds."""
    follower = FollowerState()
    replication.on_follower_fetch(follower, 50, leader_leo=10, now_ms=NOW)
    assert not replication.may_join_isr(follower, high_watermark=10, epoch_start_offset=10)
    assert replication.new_high_watermark(0, 10, (1, 2), 1, {2: follower}, min_isr=1) == 0


# ---- acks=all and ListOffsets below min.insync.replicas ----------------------------------

@pytest.mark.parametrize("hw, isr_size, min_isr, answer", [
    (10, 2, 2, ErrorCode.NONE),                               # committed with the ISR it needs
    (9, 2, 2, None),                                          # not yet: wait
    (9, 1, 2, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),    # shrank while waiting: no use waiting
    (10, 1, 2, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),   # committed, but by too few (Kafka)
    (9, 1, 1, None),
])
def test_acks_all_answer(hw, isr_size, min_isr, answer):
    """An acks=all append of offsets ..9: its answer now, or None to wait on."""
    assert replication.acks_all_answer(hw, 9, isr_size, min_isr) == answer


@pytest.mark.parametrize("hw, epoch_start, isr_size, min_isr, known", [
    (10, 10, 2, 2, True),    # a leader whose HW reached its epoch's start
    (7, 10, 2, 2, False),    # a new leader before its followers fetched (KAFKA-2334): wait
    (7, 10, 1, 2, True),     # the ISR is below min.insync.replicas: the HW cannot move, answer it
    (7, 10, 1, 1, False),
])
def test_latest_offset_known(hw, epoch_start, isr_size, min_isr, known):
    assert replication.latest_offset_known(hw, epoch_start, isr_size, min_isr) is known
