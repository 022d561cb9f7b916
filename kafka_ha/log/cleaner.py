"""One compaction pass over one log: the offset map, the cleaned copies, the swaps.

The decisions are in :mod:`.compaction`; this module reads and writes files.
Everything that reads or writes segment data runs through ``offload`` (the
broker passes one that runs it in gevent's threadpool), so the event loop
only takes the cheap steps: choosing segments, and swapping a cleaned copy in
(renames, then opening the new segment, whose index was written beside it).

The loop keeps serving while a copy is written, so the log may change
meanwhile: retention may delete the segment, or a follower truncate the log.
:meth:`Log.swap_in_cleaned` refuses a copy when the segment is gone or
changed, or when the log was truncated since the pass began (the offset map
might name records that no longer exist); the pass then stops and its files
are removed.  Crash safety of the swap itself: :mod:`.clean_swap`.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Iterator, NamedTuple

from gevent import monkey

from kafka_ha.records.shallow import Entry, iter_entries

from .checkpoints import fsync_dir
from .clean_swap import cleaned_paths, discard_cleaned
from .compaction import first_uncleanable_offset, group_segments, map_entry_cost, keep_record, keyed_offsets, \
    rewrite_batch
from .offset_index import OffsetIndex
from .segment_scan import whole_entries

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
READ_CHUNK = 1 << 20

# The cleaner's file work runs in native threads: a real sleep there, never gevent's.
_real_sleep = monkey.get_original("time", "sleep")


def _run_here(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


class Throttler:
    """log.cleaner.io.max.bytes.per.second: :meth:`acquire` sleeps until the bytes read
    and written since the window opened fit the rate.  The window restarts every
    second of being on time, so an idle spell does not allow a burst later."""

    def __init__(self, bytes_per_second: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = _real_sleep) -> None:
        self.rate, self.clock, self.sleep = bytes_per_second, clock, sleep
        self._start, self._bytes = clock(), 0
        self.slept = 0.0

    def acquire(self, n: int) -> None:
        self._bytes += n
        elapsed = self.clock() - self._start
        due = self._bytes / self.rate
        if due > elapsed:
            self.sleep(due - elapsed)
            self.slept += due - elapsed
        elif elapsed >= 1.0:
            self._start, self._bytes = self.clock(), 0


def read_entries(path: str, size: int, throttle: Throttler) -> Iterator[tuple[bytes, Entry]]:
    """``(buffer, entry)`` for the whole entries in the first ``size`` bytes of the file,
    ``entry.position`` relative to ``buffer``; reads count against ``throttle``."""
    with open(path, "rb") as f:
        yield from whole_entries(f.fileno(), size, READ_CHUNK, throttle.acquire)


def build_offset_map(segments: list[tuple[str, int, int]], start_offset: int, budget_bytes: int,
                     throttle: Throttler) -> tuple[dict[bytes, int], int]:
    """``key -> last offset`` over the records at or after ``start_offset`` of
    ``segments`` (``(path, size, next_base)`` each, in order), and the offset up to
    which the map is complete: it takes whole segments while their keys fit in
    ``budget_bytes`` (:func:`.compaction.map_entry_cost`; at least one segment, as
    Kafka insists), and the rest waits for the next pass."""
    offset_map: dict[bytes, int] = {}
    mapped_end, used = start_offset, 0
    for path, size, next_base in segments:
        segment_map: dict[bytes, int] = {}
        for buf, entry in read_entries(path, size, throttle):
            if entry.last_offset >= start_offset:
                for key, offset in keyed_offsets(buf, entry):
                    if offset >= start_offset:
                        segment_map[key] = offset
        cost = sum(map_entry_cost(key) for key in segment_map if key not in offset_map)
        if offset_map and used + cost > budget_bytes:
            break
        offset_map.update(segment_map)
        mapped_end, used = next_base, used + cost
    return offset_map, mapped_end


class CleanedCopy(NamedTuple):
    changed: bool                  # False: one segment, every entry kept as it was (discarded)
    bytes_read: int
    bytes_written: int
    last_offset: int               # of the copy's last entry; base offset - 1 if it is empty


def write_cleaned_segment(sources: list[tuple[str, int, Callable]], log_path: str, index_path: str,
                          base_offset: int, index_interval_bytes: int, mtime_s: float,
                          throttle: Throttler) -> CleanedCopy:
    """Write the cleaned copy of a group of segments (``(path, size, keep)`` each: the
    first ``size`` bytes, keeping the records ``keep`` accepts) as one segment based at
    ``base_offset`` (:func:`.clean_swap.cleaned_paths` of ``log_path``), with its index,
    fsynced, and with the group's newest mtime (retention.ms of compact,delete topics
    counts from when the data was appended, not cleaned)."""
    cleaned_log, cleaned_index = cleaned_paths(log_path, index_path)
    index = OffsetIndex(cleaned_index, base_offset, index_interval_bytes)
    changed, read, written, prev_last = len(sources) > 1, 0, 0, base_offset - 1
    with open(cleaned_log, "wb") as out:
        for path, size, keep in sources:
            read += size
            for buf, entry in read_entries(path, size, throttle):
                kept, entry_changed = rewrite_batch(buf, entry, keep)
                changed = changed or entry_changed
                if kept is None:
                    continue
                for piece in iter_entries(kept):          # a batch may come back as several
                    first = piece.first_offset if piece.first_offset is not None else prev_last + 1
                    index.on_entry(first, written + piece.position, piece.size)
                    prev_last = piece.last_offset
                out.write(kept)
                throttle.acquire(len(kept))
                written += len(kept)
        out.flush()
        os.fsync(out.fileno())
    index.rewrite()
    fd = os.open(cleaned_index, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.utime(cleaned_log, (mtime_s, mtime_s))
    return CleanedCopy(changed, read, written, prev_last)


class PassResult(NamedTuple):
    first_dirty: int               # where the next pass's dirty section starts
    segments_rewritten: int
    bytes_read: int
    bytes_written: int
    completed: bool                # False: the log changed meanwhile and the pass stopped


def segment_newest_ms(segment) -> int:
    return segment.largest_timestamp if segment.largest_timestamp > 0 else segment.last_modified_ms()


def clean_log(lg, first_dirty: int, high_watermark: int, now_ms: int, map_budget_bytes: int,
              throttle: Throttler, offload: Callable[..., Any] = _run_here,
              tombstones_removable_below: int = 0) -> PassResult:
    """One compaction pass over ``lg`` (see the module doc); ``first_dirty`` comes from
    the cleaner checkpoint, clamped by the caller to the log's range; tombstones below
    ``tombstones_removable_below`` go (:func:`.compaction.tombstone_horizon`)."""
    config = lg.config
    segments = lg.segments()
    bases = [s.base_offset for s in segments]
    end = first_uncleanable_offset(bases, lambda i: segment_newest_ms(segments[i]), high_watermark,
                                   now_ms, config.min_compaction_lag_ms)
    closed = [(s, next_base) for s, next_base in zip(segments, bases[1:]) if next_base <= end]
    dirty = [(s.log_path, s.size, next_base) for s, next_base in closed if next_base > first_dirty]
    if not dirty:
        return PassResult(first_dirty, 0, 0, 0, True)
    truncations = lg.truncations
    offset_map, mapped_end = offload(build_offset_map, dirty, first_dirty, map_budget_bytes, throttle)
    rewritten = read = written = 0
    cleanable = [s for s, next_base in closed if next_base <= mapped_end]

    def keep(record) -> bool:
        return keep_record(record.offset, record.key, record.tombstone,
                           offset_map.get(record.key) if record.key is not None else None,
                           record.offset < tombstones_removable_below)
    for i, j in group_segments(bases, [s.size for s in segments], len(cleanable), config.segment_bytes):
        group = cleanable[i:j]
        sources = [(segment.log_path, segment.size, keep) for segment in group]
        mtimes = [segment.last_modified_ms() for segment in group]
        head = group[0]
        try:
            copy = offload(write_cleaned_segment, sources, head.log_path, head.index_path, head.base_offset,
                           config.index_interval_bytes, max(mtimes) / 1000, throttle)
        except BaseException:          # a full disk, a log deleted meanwhile, a stopped cleaner
            discard_cleaned(head.log_path, head.index_path)
            raise
        read += copy.bytes_read
        if not copy.changed:
            discard_cleaned(head.log_path, head.index_path)
            continue
        if not lg.swap_in_cleaned(group, [size for _, size, _ in sources], truncations, copy.last_offset):
            discard_cleaned(head.log_path, head.index_path)
            log.info("%s: the log changed while segments %d..%d were being cleaned; the pass stops there",
                     lg.tp, head.base_offset, group[-1].base_offset)
            return PassResult(first_dirty, rewritten, read, written, False)
        rewritten += len(group)
        written += copy.bytes_written
    offload(fsync_dir, lg.dir)
    return PassResult(mapped_end, rewritten, read, written, True)

