"""The segments a log gives up: retention's deletions and the cleaner's swaps, and the
graveyard that closes a removed segment's file only after a delay (a fetch in flight may
still send from it).  A part of :class:`.log.Log` (it inherits this), apart to keep that
module small; it works on the log's own state (``_segments``, ``_bases``, ``_graveyard``).
"""
from __future__ import annotations

import logging
import time

from .clean_swap import commit_cleaned
from .retention import deletable_count
from .segment import LogSegment
from .time_index import write_merged

log = logging.getLogger("kafka_ha.log.log")


class SegmentRemoval:
    # --- retention ----------------------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int, high_watermark: int) -> int:
        """Delete the old segments :func:`.retention.deletable_count` allows; returns how many.

        ``high_watermark`` bounds what may go: only segments wholly below it.
        A segment's age is its largest known timestamp, or its file's mtime if
        it has none.
        """
        self._bury_dead(time.monotonic())
        self.roll_expired_active_segment(now_ms, high_watermark)

        def age_stamp(i: int) -> int:
            segment = self._segments[i]
            return segment.largest_timestamp if segment.largest_timestamp > 0 else segment.last_modified_ms()
        deleting = self.config.delete      # compact alone: only what lies below the log start goes
        count = deletable_count(self._bases, [s.size for s in self._segments], age_stamp, high_watermark,
                                self._log_start_offset, now_ms,
                                self.config.retention_ms if deleting else -1,
                                self.config.retention_bytes if deleting else -1)
        if count:
            for segment in self._segments[:count]:
                self._retire(segment)
            del self._segments[:count], self._bases[:count]
            self._log_start_offset = max(self._log_start_offset, self._bases[0])
            self.epoch_cache.truncate_from_start(self._log_start_offset)
            log.info("%s: retention deleted %d segments, log start is now %d", self.tp, count,
                     self.log_start_offset)
        return count

    # --- compaction (the file work is in :mod:`.cleaner`) ------------------------------------------

    @property
    def truncations(self) -> int:
        """How many times the log was truncated: a cleaning pass that saw it change stops."""
        return self._truncations

    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    def swap_in_cleaned(self, group: list[LogSegment], sizes: list[int], truncations: int,
                        last_offset: int) -> bool:
        """Replace the consecutive closed segments ``group`` by their cleaned copy (last offset
        ``last_offset``, :mod:`.clean_swap`); False, changing nothing, if the log changed."""
        first = next((i for i, s in enumerate(self._segments) if s is group[0]), -1)
        end = first + len(group)
        if first < 0 or end >= len(self._segments) or self._truncations != truncations \
                or self._segments[first:end] != group or [s.size for s in group] != sizes:
            return False
        later = group[1:]
        for segment in group:
            segment.drop_index_writes()     # never written over the new files
        commit_cleaned(group[0].log_path, group[0].index_path,
                       [lambda s=s: self._retire(s) for s in later if s.base_offset > last_offset],
                       [lambda s=s: self._retire(s) for s in later if s.base_offset <= last_offset])
        write_merged([s.time_index for s in group], last_offset)   # before the copy opens it
        self._segments[first:end] = [LogSegment(self.dir, group[0].base_offset, self.config.index_interval_bytes)]
        self._bases[first:end] = [group[0].base_offset]
        # The old descriptor stays readable for fetches in flight.
        self._graveyard.append((time.monotonic() + self.config.file_delete_delay_ms / 1000, group[0]))
        self._dir_dirty = True
        return True

    def _retire(self, segment: LogSegment) -> None:
        # Unlink now, close later: a FileSlice of it may still be going out by sendfile.
        segment.delete(close=False)
        self._graveyard.append((time.monotonic() + self.config.file_delete_delay_ms / 1000, segment))
        self._dir_dirty = True

    def _bury_dead(self, now: float) -> None:
        alive = []
        for deadline, segment in self._graveyard:
            if deadline <= now:
                segment.close()
            else:
                alive.append((deadline, segment))
        self._graveyard = alive
