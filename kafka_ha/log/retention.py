"""Which old segments retention may delete: a pure decision over a log's segments.

Retention only ever removes a prefix of the log, and only segments wholly
below the high watermark (the next segment's base offset <= HW): a leader's
uncommitted records may still be needed by the next leader, and a follower's
HW is what it knows to be committed.  The active (last) segment always stays.
Within that bound a segment goes when one of Kafka's three reasons holds:

- it is older than ``retention_ms`` (its newest timestamp, see ``age_stamp``);
- the log would still hold at least ``retention_bytes`` without it;
- it lies wholly below the log start offset (a follower moved its start to
  its leader's; Kafka's ``deleteLogStartOffsetBreachedSegments``).

>>> bases, sizes = [0, 16, 32, 48], [100, 100, 100, 10]
>>> deletable_count(bases, sizes, lambda i: 0, high_watermark=40, log_start_offset=0, now_ms=0,
...                 retention_ms=-1, retention_bytes=0)       # 16.. holds 16..31 < 40; 32.. holds 40
2
>>> deletable_count(bases, sizes, lambda i: 0, high_watermark=15, log_start_offset=0, now_ms=0,
...                 retention_ms=-1, retention_bytes=0)       # nothing is wholly committed
0
>>> deletable_count(bases, sizes, lambda i: 0, high_watermark=60, log_start_offset=20, now_ms=0,
...                 retention_ms=-1, retention_bytes=-1)      # only 0..15 is below the log start
1
"""
from __future__ import annotations

from typing import Callable, Sequence


def deletable_count(bases: Sequence[int], sizes: Sequence[int], age_stamp: Callable[[int], int],
                    high_watermark: int, log_start_offset: int, now_ms: int,
                    retention_ms: int, retention_bytes: int) -> int:
    """How many leading segments may be deleted.

    ``bases`` and ``sizes`` describe every segment, the active one last;
    ``age_stamp(i)`` is segment ``i``'s newest timestamp in ms (asked only of
    segments retention.ms could delete); a negative retention means no limit.
    """
    eligible = 0
    while eligible + 1 < len(bases) and bases[eligible + 1] <= high_watermark:
        eligible += 1
    by_start = 0
    while by_start < eligible and bases[by_start + 1] <= log_start_offset:
        by_start += 1
    by_time = 0
    if retention_ms >= 0:
        while by_time < eligible and now_ms - age_stamp(by_time) > retention_ms:
            by_time += 1
    by_size = 0
    if retention_bytes >= 0:
        excess = sum(sizes) - retention_bytes
        while by_size < eligible and excess >= sizes[by_size]:
            excess -= sizes[by_size]
            by_size += 1
    return max(by_start, by_time, by_size)
