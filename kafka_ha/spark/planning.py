"""Pure planning arithmetic for the Spark source: offset ranges and admission control.

>>> [(r.topic, r.partition, r.start, r.end) for r in split_ranges(
...     [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 5)], min_partitions=None)]
[('t', 0, 0, 10)]
>>> [(r.start, r.end) for r in split_ranges([OffsetRange("t", 0, 0, 10)], min_partitions=3)]
[(0, 3), (3, 6), (6, 10)]
>>> cap_by_backlog({("a", 0): 0, ("b", 0): 0}, {("a", 0): 90, ("b", 0): 10}, 30)
{('a', 0): 27, ('b', 0): 3}
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from pyspark.sql.datasource import InputPartition

TP = tuple[str, int]


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark input partition: offsets ``[start, end)`` of one topic partition.

    ``end`` never exceeds the high watermark seen at planning, so a retried task
    (or a replayed micro-batch) reads exactly the same committed records.
    """

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def __repr__(self) -> str:
        return f"OffsetRange([{self.topic},{self.partition}] {self.start}..{self.end})"


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None,
                 max_records: int | None = None) -> list[OffsetRange]:
    """Drop empty ranges; with ``min_partitions`` more than the ranges left, split big ones.
    With ``max_records`` (Spark's ``maxRecordsPerPartition``) no piece has more offsets than
    that, and there are still at least ``min_partitions`` pieces.

    >>> [(r.start, r.end) for r in split_ranges([OffsetRange("t", 0, 0, 10)], 2, 4)]
    [(0, 3), (3, 6), (6, 10)]
    >>> [(r.start, r.end) for r in split_ranges([OffsetRange("t", 0, 0, 10)], 5, 4)]
    [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]

    Like Spark's ``KafkaOffsetRangeCalculator`` the pieces are shared out in
    proportion to the ranges' sizes, but by largest remainder, so the result
    has exactly ``min_partitions`` pieces (unless there are fewer offsets).

    >>> sizes = lambda rs: [r.size for r in rs]
    >>> sizes(split_ranges([OffsetRange("t", p, 0, n) for p, n in enumerate((780, 1200, 1020))], 7))
    [390, 390, 400, 400, 400, 510, 510]
    >>> sizes(split_ranges([OffsetRange("t", 0, 0, 2), OffsetRange("t", 1, 0, 100)], 5))
    [2, 25, 25, 25, 25]
    """
    ranges = [r for r in ranges if r.size > 0]
    if max_records:
        def cut(rs):
            return [piece for r in rs for piece in _cut(r, -(-r.size // max_records))]
        by_max = cut(ranges)
        return by_max if len(by_max) >= (min_partitions or 0) else cut(
            split_ranges(ranges, min_partitions))
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    # one piece each, then the extra pieces in proportion to size
    shares = [(min_partitions - len(ranges)) * r.size / total for r in ranges]
    pieces = [min(r.size, 1 + int(s)) for r, s in zip(ranges, shares)]
    order = sorted(range(len(ranges)), key=lambda i: (-(shares[i] - int(shares[i])), i))
    while sum(pieces) < min_partitions and any(p < r.size for p, r in zip(pieces, ranges)):
        for i in order:
            if sum(pieces) >= min_partitions:
                break
            if pieces[i] < ranges[i].size:
                pieces[i] += 1
    return [piece for r, parts in zip(ranges, pieces) for piece in _cut(r, parts)]


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` in ``parts`` consecutive pieces whose sizes differ by at most one."""
    out: list[OffsetRange] = []
    remaining, start = r.size, r.start
    for i in range(parts):
        this = remaining // (parts - i)
        remaining -= this
        out.append(OffsetRange(r.topic, r.partition, start, start + this))
        start += this
    return out


def delay_batch(backlog: int, min_offsets: int, now_ms: float, last_trigger_ms: float,
                max_delay_ms: int) -> tuple[bool, float]:
    """Spark's ``minOffsetsPerTrigger`` / ``maxTriggerDelay`` decision: ``(delay, last_trigger_ms)``.

    A batch waits while fewer than ``min_offsets`` offsets are new, unless
    ``max_delay_ms`` has passed since the last batch let through (the first call
    never waits).  ``last_trigger_ms`` moves to ``now_ms`` whenever a batch may run.

    >>> delay_batch(10, 50, now_ms=1000, last_trigger_ms=900, max_delay_ms=500)
    (True, 900)
    >>> delay_batch(60, 50, now_ms=1000, last_trigger_ms=900, max_delay_ms=500)
    (False, 1000)
    >>> delay_batch(10, 50, now_ms=1400, last_trigger_ms=900, max_delay_ms=500)
    (False, 1400)
    """
    if now_ms - last_trigger_ms >= max_delay_ms or backlog >= min_offsets:
        return False, now_ms
    return True, last_trigger_ms


def cap_by_backlog(start: Mapping[TP, int], end: Mapping[TP, int], max_rows: int) -> dict[TP, int]:
    """``end`` limited so that at most ``max_rows`` offsets are admitted, split by backlog.

    Each partition gets the floor of its proportional share of ``max_rows``;
    the offsets left over go one each to the largest fractional shares, so the
    total is exactly ``min(max_rows, total backlog)`` and a partition with a
    small backlog is not starved forever.  Partitions without a start offset
    are taken as starting at their end (nothing admitted).

    >>> cap_by_backlog({("t", 0): 5, ("t", 1): 0}, {("t", 0): 8, ("t", 1): 1}, 100)
    {('t', 0): 8, ('t', 1): 1}
    >>> cap_by_backlog({("t", 0): 0, ("t", 1): 0, ("t", 2): 0},
    ...                {("t", 0): 10, ("t", 1): 10, ("t", 2): 10}, 2)
    {('t', 0): 1, ('t', 1): 1, ('t', 2): 0}
    """
    backlog = {tp: max(0, e - start.get(tp, e)) for tp, e in end.items()}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    shares = {tp: max_rows * b / total for tp, b in backlog.items()}
    take = {tp: int(s) for tp, s in shares.items()}
    left = max_rows - sum(take.values())
    by_fraction = sorted((tp for tp in backlog if backlog[tp] > take[tp]),
                         key=lambda tp: (-(shares[tp] - take[tp]), -backlog[tp], tp))
    for tp in by_fraction[:left]:
        take[tp] += 1
    return {tp: (start[tp] + take[tp] if tp in start else e) for tp, e in end.items()}
