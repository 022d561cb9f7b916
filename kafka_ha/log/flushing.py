"""How a log's records become durable: ``flush.messages`` and ``flush.ms``, and the flush
itself, which fsyncs the segments below a target and advances the recovery point.  A part
of :class:`.log.Log` (it inherits this), apart to keep that module small, as
:mod:`.segment_removal` is; it works on the log's own state (``_segments``, ``_bases``,
``recovery_point``, ``epoch_cache``, the dirty-directory flags).
"""
from __future__ import annotations

import os
from typing import Callable

from kafka_ha import clock

from .checkpoints import fsync_dir


class Flushing:
    def _maybe_flush(self) -> None:
        """flush.messages: after the epochs of the appended records are known (0 flushes
        every append, as in Kafka)."""
        if self.config.flush_messages is not None and self._unflushed_messages >= self.config.flush_messages:
            self.flush()

    def flush_due(self, now: int) -> bool:
        """flush.ms: whether appends have waited long enough for the broker's flusher
        (``now`` from :func:`kafka_ha.clock.monotonic_ms`)."""
        return self.config.flush_ms is not None and now - self.last_flush_ms >= self.config.flush_ms

    def flush(self, up_to: int | None = None, fsync: Callable[[int], None] | None = None) -> None:
        """fsync the segments holding offsets in ``[recovery_point, up_to)`` and advance
        the recovery point (default: to the LEO).

        ``fsync`` (default ``os.fsync``) syncs the segment files; the broker passes one
        that runs in a native thread, so other greenlets may append to, truncate or
        flush this log meanwhile.  Appends after the start are not claimed; after a
        truncation meanwhile the recovery point does not advance (the flushed
        offsets may hold other records by now).
        """
        self.materialize()
        leo, truncations, unflushed = self.log_end_offset, self._truncations, self._unflushed_messages
        target = leo if up_to is None else min(up_to, leo)
        if target == leo:
            self.last_flush_ms = clock.monotonic_ms()   # flush.ms counts what is still unflushed
        if self._dir_dirty:
            self._dir_dirty = False
            fsync_dir(self.dir)       # new or deleted segment files must survive a crash too
        if self._parent_dirty:
            self._parent_dirty = False
            fsync_dir(os.path.dirname(self.dir))     # and so must the log's own directory
        # The epochs of the records about to become durable, and of any truncation.
        self.epoch_cache.sync()
        if target <= self.recovery_point:
            return
        for segment, next_base in zip(list(self._segments), self._bases[1:] + [None]):
            if self._truncations != truncations:
                return
            if segment.base_offset < self._bases[0]:
                continue                  # retention deleted it meanwhile
            if segment.base_offset < target and (next_base is None or next_base > self.recovery_point):
                segment.flush(fsync)
        if self._truncations != truncations:
            return
        self.recovery_point = max(self.recovery_point, target)
        if target == leo:
            self._unflushed_messages = max(0, self._unflushed_messages - unflushed)

    def flush_rolled_segments(self, fsync: Callable[[int], None] | None = None) -> bool:
        """Flush up to the active segment, as Kafka does when a segment rolls, so that the
        recovery point moves without flush settings; False if there was nothing to do."""
        active_base = self._bases[-1]
        if active_base <= self.recovery_point:
            return False
        self.flush(active_base, fsync)
        return True

