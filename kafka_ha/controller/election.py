"""Pure leader-election and ISR decisions (no ZooKeeper, no sockets, no clock).

The controller's whole policy for a partition's leader and ISR, as functions of
plain values: the current ``LeaderAndIsr``, the assigned replicas in preference
order (the first is the preferred leader), the live brokers and the epoch of the
controller deciding.

- ``initial_state`` gives a new partition's first state (leader epoch 0), or
  None while none of its replicas is live.
- ``on_brokers_changed`` (``remove_from_isr`` while the leader lives,
  ``offline_election`` once it is gone), ``preferred_election``,
  ``controlled_shutdown_election`` and ``reassignment_election`` return an
  ``Outcome``: the new ``LeaderAndIsr`` (leader epoch + 1, stamped with the
  deciding controller's epoch, ``zk_version`` left for the caller to set) or
  None when nothing changes, the one-line reason the state-change log shows,
  and whether the election was unclean.
- ``validate_against_assignment`` says why a stored state cannot belong to an
  assignment, or returns None.

The controller writes each decision conditionally on the version of the state
it decided from; on a version conflict it re-reads and calls the same function
again, so these must stay free of side effects.

>>> cur = LeaderAndIsr(leader=1, leader_epoch=4, isr=(1, 2, 3), controller_epoch=2)
>>> offline_election(cur, (1, 2, 3), live={2, 3}, unclean=False, controller_epoch=3).decision
LeaderAndIsr(leader=2, leader_epoch=5, isr=(2, 3), controller_epoch=3, zk_version=-1)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from kafka_ha.model import NO_LEADER, LeaderAndIsr


@dataclass(frozen=True, slots=True)
class Outcome:
    """A decision plus the one-line reason an operator reads in the state-change log."""

    decision: LeaderAndIsr | None
    reason: str
    unclean: bool = False


def initial_state(assignment: Iterable[int], live: set[int], controller_epoch: int) -> LeaderAndIsr | None:
    """New -> Online: leader is the first live replica, ISR all live replicas, epoch 0.

    >>> initial_state((2, 3, 1), live={1, 3}, controller_epoch=1)
    LeaderAndIsr(leader=3, leader_epoch=0, isr=(3, 1), controller_epoch=1, zk_version=-1)
    >>> initial_state((2,), live={1}, controller_epoch=1) is None
    True
    """
    live_replicas = tuple(r for r in assignment if r in live)
    if not live_replicas:
        return None
    return LeaderAndIsr(live_replicas[0], 0, live_replicas, controller_epoch)


def _shrunk_isr(isr: tuple[int, ...], dead: set[int]) -> tuple[int, ...]:
    """Remove dead members one at a time, but never the last one (KAFKA-5083).

    The retained member is the one a clean election must wait for: it is the
    only replica known to hold every committed message.

    >>> _shrunk_isr((1, 2, 3), {1, 2, 3})
    (3,)
    >>> _shrunk_isr((1, 2, 3), {2})
    (1, 3)
    """
    remaining = list(isr)
    for replica in isr:
        if replica in dead and len(remaining) > 1:
            remaining.remove(replica)
    return tuple(remaining)


def offline_election(current: LeaderAndIsr, assignment: tuple[int, ...], live: set[int],
                     unclean: bool, controller_epoch: int) -> Outcome:
    """Bring a partition whose leader is gone (or that has none) back online.

    Leader: the first assigned replica that is live and in the ISR.  If no ISR
    member is live the partition stays offline (leader -1, ISR keeps its last
    member) unless unclean election is enabled, in which case the first live
    assigned replica leads alone and committed messages may be lost.
    """
    live_isr = tuple(r for r in current.isr if r in live)
    candidates = [r for r in assignment if r in live_isr]
    if candidates:
        leader = candidates[0]
        new = LeaderAndIsr(leader, current.leader_epoch + 1, live_isr, controller_epoch)
        return Outcome(new, f"elected leader {leader} from the live ISR {list(live_isr)}")
    live_replicas = [r for r in assignment if r in live]
    if unclean and live_replicas:
        leader = live_replicas[0]
        new = LeaderAndIsr(leader, current.leader_epoch + 1, (leader,), controller_epoch)
        return Outcome(new, f"no ISR member of {list(current.isr)} is alive; unclean election "
                            f"of {leader}, which is outside the ISR: data loss is possible", True)
    dead = set(current.isr) - live
    kept_isr = _shrunk_isr(current.isr, dead)
    if current.leader == NO_LEADER and kept_isr == current.isr:
        return Outcome(None, f"still offline: no live ISR member of {list(current.isr)}")
    new = LeaderAndIsr(NO_LEADER, current.leader_epoch + 1, kept_isr, controller_epoch)
    return Outcome(new, f"offline: no ISR member of {list(current.isr)} is alive "
                        f"(unclean election disabled); waiting for {list(kept_isr)}")


def remove_from_isr(current: LeaderAndIsr, dead: set[int], controller_epoch: int) -> Outcome:
    """A follower died while the leader lives: drop it from the ISR, epoch +1.

    >>> cur = LeaderAndIsr(1, 0, (1, 2, 3), 1)
    >>> remove_from_isr(cur, {3}, 2).decision
    LeaderAndIsr(leader=1, leader_epoch=1, isr=(1, 2), controller_epoch=2, zk_version=-1)
    """
    new_isr = _shrunk_isr(current.isr, dead)
    if new_isr == current.isr:
        return Outcome(None, "dead replicas were not in the ISR")
    new = LeaderAndIsr(current.leader, current.leader_epoch + 1, new_isr, controller_epoch)
    removed = [r for r in current.isr if r not in new_isr]
    return Outcome(new, f"removed {removed} from the ISR")


def on_brokers_changed(current: LeaderAndIsr, assignment: tuple[int, ...], live: set[int],
                       unclean: bool, controller_epoch: int) -> Outcome:
    """The decision for one partition after the live broker set changed.

    A live leader keeps leading and only loses dead ISR members; a dead or
    missing leader triggers the offline election.
    """
    if current.leader != NO_LEADER and current.leader in live:
        return remove_from_isr(current, set(current.isr) - live, controller_epoch)
    return offline_election(current, assignment, live, unclean, controller_epoch)


def preferred_election(current: LeaderAndIsr, assignment: tuple[int, ...], live: set[int],
                       controller_epoch: int) -> Outcome:
    """Move leadership to the preferred (first assigned) replica if it is live and in the ISR."""
    preferred = assignment[0]
    if current.leader == preferred:
        return Outcome(None, f"preferred replica {preferred} already leads")
    if preferred not in live or preferred not in current.isr:
        return Outcome(None, f"preferred replica {preferred} is not live and in the ISR "
                             f"{list(current.isr)}")
    new = LeaderAndIsr(preferred, current.leader_epoch + 1, current.isr, controller_epoch)
    return Outcome(new, f"moved leadership to preferred replica {preferred}")


def controlled_shutdown_election(current: LeaderAndIsr, assignment: tuple[int, ...], live: set[int],
                                 shutting_down: set[int], controller_epoch: int) -> Outcome:
    """Move leadership off brokers that are shutting down and take them out of the ISR.

    New leader (2.x rule): the first assigned replica that is live, in the
    ISR and not shutting down.  With no such replica the partition keeps its
    leader until the broker is gone (the broker reports it as remaining).

    >>> controlled_shutdown_election(LeaderAndIsr(1, 3, (1, 2, 3), 1), (1, 2, 3), {1, 2, 3}, {1}, 2).decision
    LeaderAndIsr(leader=2, leader_epoch=4, isr=(2, 3), controller_epoch=2, zk_version=-1)
    >>> controlled_shutdown_election(LeaderAndIsr(1, 3, (1,), 1), (1, 2), {1, 2}, {1}, 2).decision is None
    True
    """
    new_isr = tuple(r for r in current.isr if r not in shutting_down)
    if current.leader in shutting_down:
        candidates = [r for r in assignment if r in live and r in new_isr and r not in shutting_down]
        if not candidates:
            return Outcome(None, f"no other live ISR member to take over from {current.leader}")
        new = LeaderAndIsr(candidates[0], current.leader_epoch + 1, new_isr, controller_epoch)
        return Outcome(new, f"controlled shutdown of {current.leader}: moved leadership to "
                            f"{candidates[0]}")
    if new_isr == current.isr or not new_isr:
        return Outcome(None, "no shutting-down replica in the ISR")
    new = LeaderAndIsr(current.leader, current.leader_epoch + 1, new_isr, controller_epoch)
    return Outcome(new, f"controlled shutdown: removed {sorted(set(current.isr) - set(new_isr))} "
                        f"from the ISR")


def reassignment_election(current: LeaderAndIsr, new_replicas: tuple[int, ...], live: set[int],
                          controller_epoch: int) -> Outcome:
    """Leader from the reassigned replicas: the first that is live and in the ISR; ISR unchanged."""
    candidates = [r for r in new_replicas if r in live and r in current.isr]
    if not candidates:
        return Outcome(None, f"none of the new replicas {list(new_replicas)} is live and in the ISR")
    leader = candidates[0]
    return Outcome(LeaderAndIsr(leader, current.leader_epoch + 1, current.isr, controller_epoch),
                   f"reassignment: leader {leader} from the new replicas {list(new_replicas)}")


def validate_against_assignment(state: LeaderAndIsr, assignment: tuple[int, ...]) -> str | None:
    """Why a stored state cannot belong to this assignment, or None when it can.

    A hand-edited state whose leader is not a replica must not be acted on.

    >>> validate_against_assignment(LeaderAndIsr(7, 0, (7,), 1), (1, 2, 3))
    'leader 7 is not among the replicas [1, 2, 3]'
    """
    if state.leader != NO_LEADER and state.leader not in assignment:
        return f"leader {state.leader} is not among the replicas {list(assignment)}"
    strangers = [r for r in state.isr if r not in assignment]
    if strangers:
        return f"ISR members {strangers} are not among the replicas {list(assignment)}"
    return None
