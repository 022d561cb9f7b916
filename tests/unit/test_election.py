"""Table-driven tests of the pure election functions (no ZooKeeper, no mocks)."""
import pytest

from kafka_ha.controller import election
from kafka_ha.model import LeaderAndIsr

E = 7  # the deciding controller's epoch


def lai(leader, epoch, isr, cepoch=3):
    return LeaderAndIsr(leader, epoch, tuple(isr), cepoch)


@pytest.mark.parametrize("current, assignment, live, unclean, expected, is_unclean", [
    # leader alive, follower dies: leader stays, ISR shrinks, epoch +1
    (lai(1, 4, [1, 2, 3]), (1, 2, 3), {1, 2}, False, lai(1, 5, [1, 2], E), False),
    # leader dies: first live ISR member in assignment order leads
    (lai(1, 4, [1, 3, 2]), (1, 2, 3), {2, 3}, False, lai(2, 5, [3, 2], E), False),
    # nothing dead: no change
    (lai(1, 4, [1, 2, 3]), (1, 2, 3), {1, 2, 3}, False, None, False),
    # a dead out-of-ISR replica: no change
    (lai(1, 4, [1, 2]), (1, 2, 3), {1, 2}, False, None, False),
    # whole ISR dead, unclean off: leader -1, ISR keeps its last member
    (lai(1, 4, [1, 2]), (1, 2, 3), {3}, False, lai(-1, 5, [2], E), False),
    # same, unclean on: live out-of-ISR replica leads alone
    (lai(1, 4, [1, 2]), (1, 2, 3), {3}, True, lai(3, 5, [3], E), True),
    # already offline and still no live ISR member: nothing to write
    (lai(-1, 5, [2]), (1, 2, 3), {1}, False, None, False),
    # offline partition whose last ISR member returns: it leads again
    (lai(-1, 5, [2]), (1, 2, 3), {1, 2}, False, lai(2, 6, [2], E), False),
    # everything dead, unclean on: no live replica at all, stays offline
    (lai(1, 4, [1]), (1, 2), set(), True, lai(-1, 5, [1], E), False),
])
def test_on_brokers_changed(current, assignment, live, unclean, expected, is_unclean):
    outcome = election.on_brokers_changed(current, assignment, live, unclean, E)
    assert outcome.decision == expected
    assert outcome.unclean is is_unclean
    assert outcome.reason


def test_every_leader_change_bumps_the_epoch():
    cur = lai(1, 10, [1, 2, 3])
    for live in ({2, 3}, {3}, {2}, set()):
        out = election.on_brokers_changed(cur, (1, 2, 3), live, False, E).decision
        assert out.leader_epoch == 11
        assert out.controller_epoch == E


@pytest.mark.parametrize("assignment, live, expected", [
    ((1, 2, 3), {1, 2, 3}, lai(1, 0, [1, 2, 3], E)),
    ((2, 3, 1), {1, 3}, lai(3, 0, [3, 1], E)),
    ((1,), {2}, None),
])
def test_initial_state(assignment, live, expected):
    assert election.initial_state(assignment, live, E) == expected


@pytest.mark.parametrize("current, live, leader", [
    (lai(2, 1, [2, 1, 3]), {1, 2, 3}, 1),   # preferred live and in ISR
    (lai(2, 1, [2, 3]), {1, 2, 3}, None),   # preferred not in ISR
    (lai(2, 1, [2, 1]), {2, 3}, None),      # preferred dead
    (lai(1, 1, [1, 2]), {1, 2}, None),      # already leads
])
def test_preferred_election(current, live, leader):
    out = election.preferred_election(current, (1, 2, 3), live, E).decision
    assert (out.leader if out else None) == leader
    if out:
        assert out.isr == current.isr and out.leader_epoch == current.leader_epoch + 1


@pytest.mark.parametrize("state, problem", [
    (lai(1, 0, [1, 2]), None),
    (lai(-1, 0, [2]), None),
    (lai(9, 0, [9]), "leader 9 is not among the replicas [1, 2, 3]"),
    (lai(1, 0, [1, 8]), "ISR members [8] are not among the replicas [1, 2, 3]"),
])
def test_validate_against_assignment(state, problem):
    assert election.validate_against_assignment(state, (1, 2, 3)) == problem
