"""Pure replication decisions a leader makes: high watermark, ISR shrink and expand.

No I/O and no clock: the caller passes ``now_ms`` and the followers' fetch
state, so these are table-testable (the T1-T10 timeline of docs/design.md §6.1 is one).
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka_ha.protocol.errors import ErrorCode


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower from its fetch requests."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    # the leader's LEO and the time at the follower's previous fetch (Kafka's
    # Replica.updateFetchState): reaching that LEO now means the follower was
    # caught up as of that earlier time
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    # the follower's log start as its fetches report it (Fetch v5+; -1 until one does):
    # the partition's low watermark, which DeleteRecords waits on, is the lowest of all
    log_start_offset: int = -1


def on_follower_fetch(state: FollowerState, fetch_offset: int, leader_leo: int, now_ms: int,
                      log_start_offset: int = 0) -> bool:
    """Record a follower's fetch at ``fetch_offset`` (its LEO) while the leader is at ``leader_leo``.

    Only an offset the leader can read from, ``log_start_offset <= fetch_offset <= leader_leo``,
    is the follower's position (Kafka updates a follower's state only after a successful
    read).  Any other fetch is answered OFFSET_OUT_OF_RANGE and says nothing about what
    the follower holds: one that followed another leader further, or asks for an offset
    its truncation has not reached yet, must not count as caught up, or it could rejoin
    the ISR and the HW pass records it does not have.  Returns whether it was recorded.

    >>> s = FollowerState()
    >>> on_follower_fetch(s, 5, 10, now_ms=1000), s.last_caught_up_ms
    (True, 0)
    >>> on_follower_fetch(s, 10, 12, now_ms=1500), s.last_caught_up_ms   # caught up as of 1000
    (True, 1000)
    >>> on_follower_fetch(s, 12, 12, now_ms=1700), s.last_caught_up_ms
    (True, 1700)
    >>> on_follower_fetch(s, 40, 12, now_ms=1900), s.log_end_offset, s.last_caught_up_ms
    (False, 12, 1700)
    """
    if not log_start_offset <= fetch_offset <= leader_leo:
        return False
    if fetch_offset >= leader_leo:
        state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
    elif fetch_offset >= state.last_fetch_leader_leo >= 0:
        state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
    state.log_end_offset = fetch_offset
    state.last_fetch_leader_leo = leader_leo
    state.last_fetch_ms = now_ms
    return True


def new_high_watermark(current_hw: int, leader_leo: int, isr: tuple[int, ...], leader_id: int,
                       followers: dict[int, FollowerState], min_isr: int) -> int:
    """HW = the smallest LEO over the ISR; it never moves back.

    It does not move at all while the ISR is smaller than min.insync.replicas
    (the KIP-966 lesson): a write acknowledged by a lone leader must not
    become visible as committed.

    >>> f = {2: FollowerState(log_end_offset=7), 3: FollowerState(log_end_offset=9)}
    >>> new_high_watermark(5, 10, (1, 2, 3), 1, f, min_isr=1)
    7
    >>> new_high_watermark(5, 10, (1,), 1, f, min_isr=2)
    5
    """
    if len(isr) < min_isr:
        return current_hw
    leos = [leader_leo if r == leader_id else followers.get(r, FollowerState()).log_end_offset
            for r in isr]
    return max(current_hw, min(leos))


def acks_all_answer(high_watermark: int, last_offset: int, isr_size: int, min_isr: int) -> ErrorCode | None:
    """The answer to an acks=all append of offsets up to ``last_offset`` now; None: keep waiting.

    Below min.insync.replicas the HW does not move, so a waiter would only time out:
    it is told at once, as Kafka does, with the retriable NOT_ENOUGH_REPLICAS_AFTER_APPEND
    (the record is in the leader's log but not acknowledged).  Kafka gives the same answer
    when the HW did pass the append but the ISR that got it is smaller than required.

    >>> acks_all_answer(10, 9, 2, 2), acks_all_answer(9, 9, 2, 2), acks_all_answer(9, 9, 1, 2)
    (<ErrorCode.NONE: 0>, None, <ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: 20>)
    """
    if isr_size < min_isr:
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    if high_watermark > last_offset:
        return ErrorCode.NONE
    return None


def latest_offset_known(high_watermark: int, epoch_start_offset: int, isr_size: int, min_isr: int) -> bool:
    """Whether a leader may answer ListOffsets with its HW as the latest committed offset.

    A new leader learns the committed offset only from its followers' fetches
    (KAFKA-2334): until its HW reaches the start of its epoch, it may be below an HW
    that consumers already saw from the previous leader, and the answer is a retriable
    error for the short while that takes.  While the ISR is below min.insync.replicas,
    though, the HW cannot move at all: waiting would refuse the partition's offsets for
    as long as the ISR stays small, so the HW is answered as it is.

    >>> latest_offset_known(7, 10, 2, 2), latest_offset_known(10, 10, 2, 2), latest_offset_known(7, 10, 1, 2)
    (False, True, True)
    """
    return high_watermark >= epoch_start_offset or isr_size < min_isr


def out_of_sync_followers(isr: tuple[int, ...], leader_id: int, followers: dict[int, FollowerState],
                          now_ms: int, lag_time_max_ms: int) -> list[int]:
    """ISR followers not caught up to the leader within ``replica.lag.time.max.ms`` (0.9+ rule).

    >>> f = {2: FollowerState(last_caught_up_ms=1000), 3: FollowerState(last_caught_up_ms=9500)}
    >>> out_of_sync_followers((1, 2, 3), 1, f, now_ms=11001, lag_time_max_ms=10000)
    [2]
    """
    return [r for r in isr if r != leader_id
            and now_ms - followers.get(r, FollowerState()).last_caught_up_ms > lag_time_max_ms]


def isr_reached(isr: tuple[int, ...], leader_id: int, followers: dict[int, FollowerState],
                offset: int) -> bool:
    """Whether every ISR follower has fetched from ``offset`` on (a new leader's epoch
    start): from then on the HW can pass what the new leader appends.

    >>> f = {2: FollowerState(log_end_offset=10), 3: FollowerState(log_end_offset=-1)}
    >>> isr_reached((1, 2), 1, f, 10), isr_reached((1, 2, 3), 1, f, 10), isr_reached((1,), 1, {}, 10)
    (True, False, True)
    """
    return all(followers.get(r, FollowerState()).log_end_offset >= offset for r in isr if r != leader_id)


def may_join_isr(follower: FollowerState, high_watermark: int, epoch_start_offset: int) -> bool:
    """A non-ISR follower rejoins once its LEO reaches the HW and the current epoch's start.

    The second condition is KAFKA-7128: a follower that has not yet fetched
    anything of the current leader epoch may still hold a divergent tail.

    >>> may_join_isr(FollowerState(log_end_offset=10), 10, 10), may_join_isr(FollowerState(log_end_offset=10), 10, 12)
    (True, False)
    """
    return follower.log_end_offset >= high_watermark and follower.log_end_offset >= epoch_start_offset


def leader_epoch_error(requested: int, current: int) -> int:
    """KIP-320: a Fetch (v9+) or OffsetsForLeaderEpoch (v2+) names the leader epoch its
    sender believes current; the leader answers only a sender in its own epoch.

    An older epoch is FENCED_LEADER_EPOCH: the sender missed a LeaderAndIsr, and a
    follower that went on fetching would be counted as caught up in an epoch whose
    start it never truncated to (a divergent log re-admitted to the ISR).  A newer
    one is UNKNOWN_LEADER_EPOCH: this leader has not taken its own LeaderAndIsr yet,
    ask again.  -1 (an older request version) is not checked.

    >>> leader_epoch_error(-1, 5) == leader_epoch_error(5, 5) == ErrorCode.NONE
    True
    >>> leader_epoch_error(4, 5) == ErrorCode.FENCED_LEADER_EPOCH
    True
    >>> leader_epoch_error(6, 5) == ErrorCode.UNKNOWN_LEADER_EPOCH
    True
    """
    if requested < 0 or requested == current:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH
