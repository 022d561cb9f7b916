"""Where a follower truncates its log after a leader change (KIP-101 / KIP-279), as a pure decision.

The follower sends OffsetsForLeaderEpoch with its latest epoch; the leader
answers with the largest epoch it knows at or below that one and where that
epoch ends in its log (``Log.end_offset_for_epoch``).  The caller looks up its
own end of the leader's answered epoch and asks this function where to cut.

This is the one-round rule the replica fetcher applies today: it cuts to the
smallest of the leader's end, its own end of that epoch and its LEO, and is
then done (``complete`` is always True).  The ``complete`` flag is the
interface of a multi-round decision: a caller truncates to ``offset`` and,
while ``complete`` is False, asks the leader again with its new latest epoch.

>>> decide_truncation(3, 120, (3, 100), log_end_offset=100, high_watermark=90, log_start_offset=0)
Truncation(offset=100, complete=True)
>>> decide_truncation(2, 10, (1, 8), log_end_offset=9, high_watermark=3, log_start_offset=0)
Truncation(offset=8, complete=True)

No epoch to compare (the leader knows none up to ours, or our log has none):
fall back to the high watermark, never below the log start.

>>> decide_truncation(-1, -1, (-1, -1), log_end_offset=50, high_watermark=42, log_start_offset=0)
Truncation(offset=42, complete=True)
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
    """``(leader_epoch, leader_end)``: the leader's answer for our latest epoch;
    ``follower_epoch_end``: our own ``Log.end_offset_for_epoch(leader_epoch)``
    (``(-1, -1)`` when our log holds no epoch)."""
    follower_epoch, follower_end = follower_epoch_end
    if leader_epoch == UNDEFINED or leader_end < 0 or follower_epoch == UNDEFINED or follower_end < 0:
        # Kafka's fallback: truncate to our high watermark.  Never lower: a
        # follower in the ISR must keep what is committed.
        return Truncation(min(log_end_offset, max(high_watermark, log_start_offset)), True)
    # The logs agree up to the end of the largest epoch both know.
    return Truncation(min(leader_end, follower_end, log_end_offset), True)
