"""Where a follower truncates its log after a leader change (KIP-101, KIP-279).

A pure decision, apart from the fetcher that asks the leader and truncates:
the follower sends OffsetsForLeaderEpoch with its latest epoch, and the leader
answers with the largest epoch it knows at or below that one and where that
epoch ends in its log.  If the follower holds that very epoch, both logs agree
up to where the shorter of the two copies of it ends, and truncation is done.
If it does not, the follower cannot tell yet where the logs part: everything
it has after the largest epoch of its own below the leader's answer is in
epochs the leader never had, so it cuts there and asks again with the epoch
that is now its latest (Kafka 2.0+, ``AbstractFetcherThread``).  Each round
removes at least the follower's latest epoch, so the rounds end.

Stopping after one round keeps a divergent suffix after two leader changes:
with the leader at epochs {0: 0, 2: 4, 4: 10} (epoch: start offset; it leads
epoch 4) and log end 10, and the follower at {0: 0, 1: 6, 3: 8} with log end
9, the leader answers epoch 3 with (2, 10); the follower's end of epoch 2 is where its epoch 3
starts, 8, and cutting to 8 would keep offsets 4..7 of its epochs 0 and 1
beside the leader's epoch 2 records at the same offsets.  A second round,
asked for epoch 1, is answered (0, 4) and cuts to 4.

>>> decide_truncation(2, 10, (1, 8), log_end_offset=9, high_watermark=3, log_start_offset=0)
Truncation(offset=8, complete=False)
>>> decide_truncation(0, 4, (0, 6), log_end_offset=8, high_watermark=3, log_start_offset=0)
Truncation(offset=4, complete=True)

Both hold the epoch: cut where the shorter copy of it ends (never past the LEO).

>>> decide_truncation(3, 120, (3, 100), log_end_offset=100, high_watermark=90, log_start_offset=0)
Truncation(offset=100, complete=True)
>>> decide_truncation(3, 80, (3, 100), log_end_offset=100, high_watermark=70, log_start_offset=0)
Truncation(offset=80, complete=True)

No epoch to compare (the leader's answer or the follower's lookup is
undefined): fall back to the high watermark, never below the log start.

>>> decide_truncation(-1, -1, (-1, -1), log_end_offset=50, high_watermark=42, log_start_offset=0)
Truncation(offset=42, complete=True)
>>> decide_truncation(4, 30, (-1, -1), log_end_offset=50, high_watermark=5, log_start_offset=20)
Truncation(offset=20, complete=True)
"""
from __future__ import annotations

from dataclasses import dataclass

UNDEFINED = -1


@dataclass(frozen=True)
class Truncation:
    offset: int        # truncate the log to this offset (may equal the LEO: nothing to cut)
    complete: bool     # False: truncate, then ask the leader again with the new latest epoch


def decide_truncation(leader_epoch: int, leader_end: int, follower_epoch_end: tuple[int, int],
                      log_end_offset: int, high_watermark: int, log_start_offset: int) -> Truncation:
    """One round of KIP-279 truncation.

    ``(leader_epoch, leader_end)`` is the leader's answer for our latest epoch;
    ``follower_epoch_end`` is our own ``(epoch, end offset)`` for the largest
    epoch we hold at or below ``leader_epoch`` (``Log.end_offset_for_epoch``),
    ``(-1, -1)`` when there is none or the leader's epoch is undefined.
    """
    follower_epoch, follower_end = follower_epoch_end
    if leader_epoch == UNDEFINED or leader_end < 0 or follower_epoch == UNDEFINED or follower_end < 0:
        # Nothing to compare: Kafka's pre-KIP-101 fallback.  Never below the high
        # watermark, which this follower may have acknowledged as committed.
        return Truncation(min(log_end_offset, max(high_watermark, log_start_offset)), True)
    if follower_epoch != leader_epoch:
        # We never saw the leader's epoch: what we hold after the end of our own
        # largest epoch below it is from epochs the leader never had.
        return Truncation(min(follower_end, log_end_offset), False)
    return Truncation(min(leader_end, follower_end, log_end_offset), True)


def fetches_on(old_leader: int, old_epoch: int, new_leader: int, new_epoch: int) -> bool:
    """Whether a follower keeps its place across a LeaderAndIsr, with no new truncation round.

    Kafka's rule since 2.1 (KAFKA-7164): only when the leader stays and the epoch moves
    by exactly one, which is the controller shrinking the ISR (a follower died or is
    shutting down).  The leader then led without a break, never truncating, and this
    follower, which fetched only from it, holds a prefix of its log.  A skipped epoch
    may hide another leader in between whose records this log still holds, so it
    truncates again, as after any change of leader.  (A follower still truncating, or
    one fenced or failed in its fetcher, is the caller's to send through a round.)

    >>> fetches_on(1, 4, 1, 5), fetches_on(1, 4, 1, 6), fetches_on(1, 4, 2, 5)
    (True, False, False)
    >>> fetches_on(-1, 4, 1, 5)     # stopped, or led by none: it starts over
    False
    """
    return old_leader >= 0 and new_leader == old_leader and new_epoch == old_epoch + 1
