"""When a log rolls its active segment on time (``segment.ms`` / ``log.roll.hours``).

Kafka's rule (``LogSegment.shouldRoll`` since KIP-33): a non-empty active
segment rolls when the time it has waited exceeds ``segment.ms`` minus the
segment's jitter.  The wait is measured from its first batch's timestamp to
the timestamp of the batch being appended; a segment whose first batch has no
timestamp (magic 0) measures wall-clock time since the segment was created.
The jitter is drawn once per segment, uniformly below
``min(segment.jitter.ms, segment.ms)``, so that the partitions of a broker
created together do not all roll in the same second.

>>> time_to_roll(first_timestamp=1000, created_ms=0, reference_ms=5000, now_ms=9999,
...              segment_ms=4000, jitter_ms=0)      # waited 4000: not more than 4000
False
>>> time_to_roll(1000, 0, 5001, 9999, 4000, 0)
True
>>> time_to_roll(-1, created_ms=100, reference_ms=-1, now_ms=4101, segment_ms=4000, jitter_ms=0)
True
>>> time_to_roll(1000, 0, 4500, 0, 4000, jitter_ms=600)
True
"""
from __future__ import annotations

import random

from kafka_ha.records.shallow import iter_entries


def roll_jitter_ms(segment_ms: int, segment_jitter_ms: int, rng: random.Random | None = None) -> int:
    """The jitter of a new segment (Kafka's ``LogConfig.randomSegmentJitter``).

    >>> roll_jitter_ms(1000, 0)
    0
    >>> 0 <= roll_jitter_ms(1000, 5000) < 1000
    True
    """
    bound = min(segment_jitter_ms, segment_ms)
    if bound <= 0:
        return 0
    return (rng or random).randrange(bound)


def time_to_roll(first_timestamp: int, created_ms: int, reference_ms: int, now_ms: int,
                 segment_ms: int, jitter_ms: int) -> bool:
    """Whether an active segment has waited long enough to roll.

    ``first_timestamp``: its first batch's max timestamp (< 0: none);
    ``reference_ms``: the timestamp compared with it, the appended batch's max
    timestamp on append, ``now_ms`` in the periodic pass; ``created_ms``:
    wall-clock creation time, used when the first batch has no timestamp.
    """
    waited = reference_ms - first_timestamp if first_timestamp >= 0 else now_ms - created_ms
    return waited > segment_ms - jitter_ms


def expired_active_segment(newest_ms: int, now_ms: int, retention_ms: int, log_end_offset: int,
                           high_watermark: int) -> bool:
    """Whether the retention pass rolls a non-empty active segment so that it can go.

    segment.ms is checked on append only (Kafka's rule) and retention deletes
    closed segments only, so a topic that stops receiving data would keep its
    last segment forever.  As in Kafka 1.1+, an active segment that is all
    committed (LEO <= HW) and whose newest record is older than retention.ms
    is rolled, and then deleted with the closed ones in the same pass.

    Rolling quiet segments on segment.ms against the clock was left out: it
    would delete nothing sooner (retention still waits for the newest record
    to age), and would roll on every pass for producers whose timestamps lag
    the broker's clock.

    >>> expired_active_segment(1000, 62_000, 60_000, 10, 10)
    True
    >>> expired_active_segment(1000, 61_000, 60_000, 10, 10)     # exactly retention.ms old
    False
    >>> expired_active_segment(1000, 99_000, 60_000, 10, 9), expired_active_segment(1000, 99_000, -1, 10, 10)
    (False, False)
    """
    return retention_ms >= 0 and log_end_offset <= high_watermark and now_ms - newest_ms > retention_ms


def segment_sized_runs(buf, first_offset: int, segment_bytes: int) -> list[tuple[int, int, int, int, int]]:
    """``(first offset, last offset, start, end, max timestamp)`` of runs of the whole
    entries of ``buf``, each at most ``segment_bytes`` long (an entry larger than that
    is a run of its own, which the append then refuses): a follower appends a fetch
    that spans several of its leader's segments one run per segment.

    >>> from kafka_ha.records import Record, build_v2_batch
    >>> batch = lambda base: build_v2_batch([Record(b"k", b"v" * 30, 5)] * 2, base_offset=base)
    >>> data = batch(0) + batch(2) + batch(7)               # offsets 4..6 compacted away
    >>> len(batch(0)), [run[:4] for run in segment_sized_runs(data, 0, 280)]
    (137, [(0, 3, 0, 274), (7, 8, 274, 411)])
    """
    runs, start, first, prev_last, max_ts = [], 0, first_offset, first_offset - 1, -1
    for entry in iter_entries(buf):
        if entry.end - start > segment_bytes and entry.position > start:
            runs.append((first, prev_last, start, entry.position, max_ts))
            start, first, max_ts = entry.position, prev_last + 1, -1
        if entry.position == start and entry.first_offset is not None:
            first = entry.first_offset
        prev_last, max_ts = entry.last_offset, max(max_ts, entry.max_timestamp)
    runs.append((first, prev_last, start, len(buf), max_ts))
    return runs
