"""KIP-279 follower truncation: the one-round decision, and the rounds it takes to converge.

The convergence tests model the conversation between a follower and its leader
with two real leader epoch caches and nothing else: the follower asks for its
latest epoch, the leader answers from its cache, the follower decides, cuts its
log end and its epochs there, and asks again until the decision is complete.
"""
import pytest

from kafka_ha.broker.truncation import Truncation, decide_truncation
from kafka_ha.log.epoch_cache import LeaderEpochCache

DECISIONS = [
    # (leader_epoch, leader_end, follower_epoch_end, leo, hw, log_start) -> Truncation
    # The follower holds the leader's epoch: cut where the shorter copy of it ends.
    ((3, 120, (3, 100), 100, 90, 0), Truncation(100, True)),   # follower behind: nothing to cut
    ((3, 80, (3, 100), 100, 70, 0), Truncation(80, True)),     # follower's epoch 3 is longer
    ((3, 80, (3, 60), 100, 50, 0), Truncation(60, True)),      # follower's epoch 3 ended earlier
    ((3, 80, (3, 60), 55, 50, 0), Truncation(55, True)),       # never past the LEO
    # The follower never held the leader's epoch: cut to the end of its own
    # largest epoch below it, and ask again.
    ((2, 10, (1, 8), 9, 3, 0), Truncation(8, False)),          # the example of issue 18, round 1
    ((2, 10, (1, 8), 7, 3, 0), Truncation(7, False)),          # never past the LEO
    ((5, 40, (2, 30), 50, 45, 0), Truncation(30, False)),      # even below the HW, as Kafka does
    # Nothing to compare: the high watermark, never below the log start.
    ((-1, -1, (-1, -1), 50, 42, 0), Truncation(42, True)),
    ((-1, -1, (-1, -1), 30, 42, 0), Truncation(30, True)),
    ((4, 30, (-1, -1), 50, 42, 0), Truncation(42, True)),      # the follower has no epoch
    ((4, -1, (4, 50), 50, 42, 0), Truncation(42, True)),       # the leader knows no end
    ((-1, -1, (-1, -1), 50, 5, 20), Truncation(20, True)),
]


@pytest.mark.parametrize("args,expected", DECISIONS)
def test_decide_truncation(args, expected):
    assert decide_truncation(*args) == expected


def converge(leader, leader_leo, follower, follower_leo, hw=0, log_start=0, max_rounds=20):
    """(final log end offset, rounds) of the follower after truncating against the leader."""
    leader_cache, follower_cache = LeaderEpochCache(entries=leader), LeaderEpochCache(entries=follower)
    leo = follower_leo
    for rounds in range(1, max_rounds + 1):
        leader_epoch, leader_end = leader_cache.end_offset_for(follower_cache.latest_epoch, leader_leo)
        ours = follower_cache.end_offset_for(leader_epoch, leo) if leader_epoch >= 0 else (-1, -1)
        decision = decide_truncation(leader_epoch, leader_end, ours, leo, hw, log_start)
        assert decision.offset <= leo
        leo = decision.offset
        follower_cache.truncate_from_end(leo)     # what Log.truncate_to does to the epochs
        if decision.complete:
            return leo, rounds
    raise AssertionError(f"no agreement after {max_rounds} rounds")


CONVERGENCE = [
    # (leader epochs, leader LEO, follower epochs, follower LEO, follower HW) -> (LEO, rounds)
    # A leader's latest epoch is the one it leads in, from its LEO when it took over.
    # The example of issue 18: one round kept offsets 4..7 of epochs 0 and 1 while the
    # leader holds epoch 2 records there.
    ([(0, 0), (2, 4), (4, 10)], 10, [(0, 0), (1, 6), (3, 8)], 9, 3, (4, 2)),
    # Three leader changes each side: three rounds.
    ([(0, 0), (2, 3), (4, 6), (6, 10)], 10, [(0, 0), (1, 2), (3, 4), (5, 7)], 9, 1, (2, 3)),
    # test_kip279_fast_double_failover: m0, m1 in epoch 0; B led epoch 1 with its own offset
    # 1, then C, which has m1, leads epoch 2.
    ([(0, 0), (2, 2)], 3, [(0, 0), (1, 1)], 2, 1, (1, 1)),
    # Same logs, or a follower merely behind: nothing to cut.
    ([(0, 0), (1, 5)], 9, [(0, 0), (1, 5)], 9, 9, (9, 1)),
    ([(0, 0), (1, 5), (2, 7)], 20, [(0, 0), (1, 5)], 6, 6, (6, 1)),
    # The follower led epoch 2 without appending (its epoch starts at its LEO), then the
    # leader came back in epoch 3 with epoch-1 records the follower never saw.  The first
    # round cuts nothing but the empty epoch; the second agrees on epoch 0.
    ([(0, 0), (1, 5), (3, 7)], 7, [(0, 0), (2, 5)], 5, 5, (5, 2)),
    # The leader's log start moved past the follower's epochs (retention): it answers with
    # the follower's epoch and where its own first epoch starts (Kafka 2.1+).
    ([(4, 100)], 150, [(1, 0), (2, 60)], 120, 110, (100, 1)),
    # The follower's log start moved past its epochs up to the leader's answer: its own
    # lookup of epoch 2 answers where its first epoch starts (Kafka 2.1+), so its epoch-3
    # records go although its HW (from an unclean leader) is above them.  An undefined
    # answer there (Kafka 2.0) would fall back to the HW and keep 50..69.
    ([(0, 0), (2, 40), (4, 90)], 95, [(3, 50)], 80, 70, (50, 1)),
    # The follower has no epochs at all (an old message format): the high watermark.
    ([(0, 0), (1, 5)], 9, [], 8, 3, (3, 1)),
]


@pytest.mark.parametrize("leader,leader_leo,follower,follower_leo,hw,expected", CONVERGENCE)
def test_converges_where_the_logs_agree(leader, leader_leo, follower, follower_leo, hw, expected):
    assert converge(leader, leader_leo, follower, follower_leo, hw) == expected
