"""The replicated log of one partition: ordered segments plus its leader epoch cache.

Appends take a producer's (leader) or the leader's (follower) record set as
opaque bytes: :mod:`kafka_ha.records.validate` assigns or checks offsets, and
the buffer is written to the active segment in one ``write``.  Reads return
file slices, never copies.  Nothing here starts threads or timers; the broker
calls :meth:`Log.flush`, :meth:`Log.flush_rolled_segments` and :meth:`Log.delete_old_segments`
periodically.  Startup recovery is in :mod:`.loader`, retention's and the cleaner's removals in
:mod:`.segment_removal`.
"""
from __future__ import annotations

import bisect
import logging
import os
from typing import Iterator, NamedTuple

from kafka_ha import clock
from kafka_ha.model import TopicPartition
from kafka_ha.records.shallow import Entry
from kafka_ha.records.timestamps import apply_timestamp_type
from kafka_ha.records.recompress import recompress
from kafka_ha.records.validate import assign_offsets, validate_follower_records

from .compaction import require_keys
from .config import LogConfig
from .errors import OffsetOutOfRangeError, RecordSetTooLargeError
from .loader import load_epoch_cache, load_segments, new_epoch_cache
from .rolling import expired_active_segment, roll_jitter_ms, segment_sized_runs, time_to_roll
from .segment import MAX_RELATIVE_OFFSET, FileSlice, LogSegment
from .flushing import Flushing
from .segment_removal import SegmentRemoval

log = logging.getLogger(__name__)

LATEST_TIMESTAMP = -1      # ListOffsets: the log end offset
EARLIEST_TIMESTAMP = -2    # ListOffsets: the log start offset


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int       # first_offset - 1 when nothing was appended
    count: int
    max_timestamp: int
    shallow_count: int
    log_append_time: int = -1   # the leader's stamp (message.timestamp.type=LogAppendTime), else -1


class FetchData(NamedTuple):
    first_offset: int              # the offset that was asked for
    slices: list                   # [FileSlice]; empty at the log end

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)

    def to_bytes(self) -> bytes:
        """The slices' bytes (tests and non-sendfile paths)."""
        return b"".join(s.read() for s in self.slices)


class Log(Flushing, SegmentRemoval):
    """Segments ``[log_start_offset, log_end_offset)`` of one partition in ``dir``.

    The log start offset may lie inside the first segment (a follower follows
    its leader's, which may have deleted at other segment boundaries): offsets
    below it are gone for readers, and their segment goes at the next retention.
    """

    def __init__(self, dir: str, tp: TopicPartition, config: LogConfig, recovery_point: int = 0,
                 clean_shutdown: bool = False, log_start_offset: int = 0, *, lazy: bool = False) -> None:
        """``lazy``: a new, empty log that touches the disk only when it must (see
        :meth:`materialize`); ``dir`` must not exist yet."""
        self.dir, self.tp, self.config = dir, tp, config
        self.on_disk = not lazy
        if lazy:
            self._segments, recovered = [LogSegment(dir, 0, config.index_interval_bytes, new=True)], []
        else:
            os.makedirs(dir, exist_ok=True)
            self._segments, recovered = load_segments(dir, config, recovery_point, clean_shutdown)
        self._bases = [s.base_offset for s in self._segments]
        self._segments[-1].roll_jitter_ms = self._draw_jitter()
        # A checkpointed start beyond what recovery kept cannot be honoured: clamp it.
        self._log_start_offset = max(self._bases[0], min(log_start_offset, self.log_end_offset))
        self.epoch_cache = new_epoch_cache(dir) if lazy else load_epoch_cache(dir, self._segments, recovered)
        self.epoch_cache.truncate_from_start(self._log_start_offset)
        # After recovery everything up to the LEO has been verified (Kafka does the same).
        self.recovery_point = self.log_end_offset if recovered or clean_shutdown \
            else min(recovery_point, self.log_end_offset)
        self._unflushed_messages = 0
        self.last_flush_ms = clock.monotonic_ms()  # flush.ms counts from here (Kafka: lastFlushedTime)
        self._dir_dirty = False
        self._parent_dirty = False     # this process created the directory: its name is not durable
        self._graveyard: list[tuple[float, LogSegment]] = []
        self._truncations = 0          # a flush that yields checks it did not change meanwhile
        if lazy:
            self.epoch_cache.hold()
        else:
            log.info("loaded log %s: offsets %d..%d in %d segments, epochs %s", tp, self.log_start_offset,
                     self.log_end_offset, len(self._segments), self.epoch_cache.entries())

    def materialize(self, dir_exists: bool = False) -> bool:
        """Create the directory of a lazily created log; False if it was on disk already.
        ``dir_exists``: the caller created it (the broker does that for many logs at once,
        off its event loop).  A pending epoch checkpoint stays pending (see :mod:`.epoch_cache`).

        An empty log needs nothing on disk: after a crash the broker starts without it,
        as with an empty one, until the next LeaderAndIsr creates it again.  Whatever
        writes the log's files calls this first; the segment file comes with its first write.
        """
        if self.on_disk:
            return False
        if not dir_exists:
            os.makedirs(self.dir, exist_ok=True)
        self.on_disk = True
        self._dir_dirty = self._parent_dirty = True   # the next flush makes the new names durable
        self.epoch_cache.release()
        return True

    # --- offsets -------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start up to ``offset`` (at most the LEO); False if it is not higher.

        Offsets below it can no longer be read; the segments wholly below it
        are deleted by the next :meth:`delete_old_segments`.  Callers bound
        ``offset`` by their high watermark (Kafka's ``maybeIncrementLogStartOffset``).
        """
        offset = min(offset, self.log_end_offset)
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        log.info("%s: incremented the log start offset to %d", self.tp, offset)
        return True

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def active_segment_base_offset(self) -> int:
        return self._bases[-1]

    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch (KIP-279): ``(largest epoch <= epoch, its end offset)``."""
        return self.epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int | None = None,
                                  defer_write: bool = False) -> None:
        """Record a new leader epoch starting at ``start_offset`` (default: the LEO).

        A new leader calls this when it takes over (Kafka 2.1+), so it can
        answer OffsetsForLeaderEpoch before it has appended anything.  With
        ``defer_write`` the checkpoint file is left to :meth:`write_pending_checkpoint`
        or the next flush (why that is safe: :mod:`.epoch_cache`).
        """
        start = self.log_end_offset if start_offset is None else start_offset
        if defer_write:
            self.epoch_cache.assign_deferred(epoch, start)
        else:
            self.epoch_cache.assign(epoch, start)

    @property
    def disk_work_pending(self) -> bool:
        """Whether the directory or the epoch checkpoint still waits to be written."""
        return not self.on_disk or self.epoch_cache.pending

    def write_pending_checkpoint(self) -> bool:
        """Write an epoch checkpoint change that was deferred; False if there was none."""
        return self.on_disk and self.epoch_cache.write_pending()

    def offset_for_time(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets' ``(offset, timestamp)``: -1 the LEO, -2 the log start (timestamp -1), else
        the first record with a timestamp >= ``timestamp`` (through the time indexes; None if none)."""
        if timestamp in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
            return (self.log_end_offset if timestamp == LATEST_TIMESTAMP else self.log_start_offset), -1
        first = bisect.bisect_right(self._bases, self._log_start_offset) - 1
        return next((found for segment in self._segments[first:]
                     if (found := segment.offset_for_time(timestamp, self._log_start_offset)) is not None), None)

    def headers(self, from_offset: int = 0) -> Iterator[Entry]:
        """The header of every entry from the one holding ``from_offset`` (the offset index
        finds where to start; entries just before it may come too), to the end: a scan
        that reads no bodies."""
        first = max(0, bisect.bisect_right(self._bases, from_offset) - 1)
        for i, segment in enumerate(self._segments[first:]):
            yield from segment.headers(segment.index.lookup(from_offset) if i == 0 else 0)

    # --- appends ---------------------------------------------------------------------------------

    # An OSError from an append leaves the log as it was if writing the records
    # failed (nothing of them is kept, in the file or here).  If it comes later,
    # from the index, the epoch checkpoint or a flush, the records are appended
    # and the epoch cache knows their epochs: only their durability is in doubt.
    # The broker halts on either (kafka_ha.broker.storage_failure).

    def append_as_leader(self, records, leader_epoch: int) -> AppendInfo:
        """Assign offsets from the LEO and append; records a new ``leader_epoch`` in the cache."""
        # compression.type: a batch in another codec is rewritten before offsets are assigned.
        records = recompress(records, self.config.codec, self.config.max_message_bytes)
        assigned = assign_offsets(records, self.log_end_offset, leader_epoch, self.config.max_message_bytes,
                                  allow_zstd=True)   # Produce v0-6 refuse zstd before (produce_checks)
        if self.config.compact:
            require_keys(assigned.buffer, f"{self.tp.topic}-{self.tp.partition}")
        max_ts, append_time = apply_timestamp_type(assigned.buffer, assigned.max_timestamp, self.config.log_append_time,
                                                   self.config.timestamp_difference_max_ms, clock.now_ms())
        self._append(assigned.first_offset, assigned.last_offset, assigned.buffer, max_ts, assigned.count)
        self.epoch_cache.assign(leader_epoch, assigned.first_offset)
        self._maybe_flush()
        return AppendInfo(assigned.first_offset, assigned.last_offset, assigned.count, max_ts,
                          assigned.shallow_count, append_time)

    def append_as_follower(self, records, defer_epoch_checkpoint: bool = False) -> AppendInfo:
        """Append fetched entries that must continue the log at or after the LEO.

        A partial trailing entry is dropped (the next fetch asks for it again);
        the epochs of v2 batches go into the epoch cache, with the checkpoint
        write left for later if ``defer_epoch_checkpoint`` (as a new leader's:
        after a failover every follower sees a new epoch in thousands of
        partitions at once; why deferring is safe: :mod:`.epoch_cache`).
        """
        leo = self.log_end_offset
        # Gaps are allowed (Kafka's rule): a compacted leader log has them, and any
        # log may have been compacted before its topic's cleanup.policy changed.
        checked = validate_follower_records(records, leo, allow_gaps=True)
        if not checked.valid_bytes:
            return AppendInfo(leo, leo - 1, 0, -1, 0)
        count = checked.last_offset - leo + 1
        valid = memoryview(records)[:checked.valid_bytes]
        if len(valid) <= self.config.segment_bytes:
            self._append(checked.first_offset, checked.last_offset, valid, checked.max_timestamp, count)
        else:
            # A lagging follower's fetch may span several of the leader's segments.
            for first, last, start, end, max_ts in segment_sized_runs(valid, checked.first_offset,
                                                                      self.config.segment_bytes):
                self._append(first, last, valid[start:end], max_ts, last - first + 1)
        for epoch, start in checked.epochs:
            if defer_epoch_checkpoint:
                self.epoch_cache.assign_deferred(epoch, start)
            else:
                self.epoch_cache.assign(epoch, start)
        self._maybe_flush()
        return AppendInfo(leo, checked.last_offset, count, checked.max_timestamp, checked.shallow_count)

    def _append(self, first: int, last: int, buffer, max_timestamp: int, count: int) -> None:
        if len(buffer) > self.config.segment_bytes:
            raise RecordSetTooLargeError(f"{self.tp}: a {len(buffer)}-byte append does not fit in a "
                                         f"segment of {self.config.segment_bytes} bytes")
        self.materialize()
        active = self._segments[-1]
        if not active.is_empty() and (active.size + len(buffer) > self.config.segment_bytes
                                      or last - active.base_offset > MAX_RELATIVE_OFFSET
                                      or self._waited_to_roll(active, max_timestamp)):
            active = self._roll(first)
        active.append(first, last, buffer, max_timestamp)
        self._unflushed_messages += count

    def _draw_jitter(self) -> int:
        return roll_jitter_ms(self.config.segment_ms, self.config.segment_jitter_ms)

    def _waited_to_roll(self, active: LogSegment, reference_ms: int) -> bool:
        """segment.ms (Kafka's rule, :mod:`.rolling`): ``reference_ms`` is the appended
        batch's max timestamp."""
        return time_to_roll(active.first_batch_timestamp(), active.created_ms, reference_ms,
                            clock.now_ms(), self.config.segment_ms, active.roll_jitter_ms)

    def roll_expired_active_segment(self, now_ms: int, high_watermark: int) -> bool:
        """Roll a quiet, committed active segment that retention.ms would delete, so that
        it goes with the closed ones (:func:`.rolling.expired_active_segment`)."""
        active = self._segments[-1]
        newest = active.largest_timestamp if active.largest_timestamp > 0 else active.last_modified_ms()
        if active.is_empty() or not self.config.delete or not expired_active_segment(
                newest, now_ms, self.config.retention_ms, self.log_end_offset, high_watermark):
            return False
        log.info("%s: rolling the active segment at offset %d: its newest record is older than "
                 "retention.ms %d", self.tp, active.base_offset, self.config.retention_ms)
        self._roll(self.log_end_offset)
        return True

    def _roll(self, base_offset: int) -> LogSegment:
        segment = LogSegment(self.dir, base_offset, self.config.index_interval_bytes)
        if not segment.is_empty():
            raise RuntimeError(f"{self.tp}: cannot roll to {segment.log_path}: it already holds data")
        segment.roll_jitter_ms = self._draw_jitter()
        self._segments.append(segment)
        self._bases.append(base_offset)
        self._dir_dirty = True
        log.info("%s: rolled a new segment at offset %d", self.tp, base_offset)
        return segment

    # --- reads -------------------------------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True, cut_oversized: bool = True) -> FetchData:
        """Whole entries from the one holding ``start_offset``, at most ``max_bytes``.

        Only entries whose last offset is below ``max_offset`` are returned (the
        HW for consumers).  A first entry over ``max_bytes``: see
        :meth:`LogSegment.read`.  ``start_offset`` must be within ``[log_start_offset,
        log_end_offset]``; at the LEO the result is empty.
        """
        leo = self.log_end_offset
        if not self.log_start_offset <= start_offset <= leo:
            raise OffsetOutOfRangeError(f"{self.tp}: offset {start_offset} is outside the log's "
                                        f"range [{self.log_start_offset}, {leo}]")
        slices: list[FileSlice] = []
        if start_offset == leo or (max_offset is not None and start_offset >= max_offset):
            return FetchData(start_offset, slices)
        remaining = max_bytes
        for i in range(bisect.bisect_right(self._bases, start_offset) - 1, len(self._segments)):
            segment = self._segments[i]
            max_position = None
            if max_offset is not None and not (i + 1 < len(self._bases) and self._bases[i + 1] <= max_offset):
                max_position = segment.position_of(max_offset)
            piece = segment.read(start_offset, remaining, max_position, min_one_message and not slices,
                                 cut_oversized or bool(slices))
            if piece is not None and piece.length:
                slices.append(piece)
                remaining -= piece.length
            if max_position is not None or remaining <= 0 or \
                    (piece is not None and piece.position + piece.length < segment.size):
                break
        return FetchData(start_offset, slices)

    # --- truncation -------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove offsets >= ``offset`` (a follower diverging from its leader).

        Cuts at an entry boundary, so the new LEO may be below ``offset`` when
        ``offset`` falls inside a batch.  Returns False when there was no
        record to remove; epochs starting at or after the LEO go even then.
        """
        if offset < 0:
            raise ValueError(f"{self.tp}: cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            # An epoch that starts at the LEO holds no records: this broker led it
            # without appending, and the leader it now follows never had it.  Kept,
            # it would hide the leader's smaller epochs appended after it (Kafka's
            # Log.truncateTo drops it too).
            self.epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if offset < self._bases[0]:
            self.truncate_fully_and_start_at(offset)
            return True
        self._truncations += 1
        keep = bisect.bisect_right(self._bases, offset)
        for segment in self._segments[keep:]:
            self._retire(segment)
        del self._segments[keep:], self._bases[keep:]
        removed = self._segments[-1].truncate_to(offset)
        log.info("%s: truncated to offset %d (new log end %d, %d bytes removed from the active segment)",
                 self.tp, offset, self.log_end_offset, removed)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._log_start_offset = min(self._log_start_offset, self.log_end_offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and continue empty at ``offset`` (e.g. the leader's log start moved past ours)."""
        self.materialize()           # the new start must survive a restart: its segment file holds it
        self._truncations += 1
        for segment in self._segments:
            self._retire(segment)
        self._segments = [LogSegment(self.dir, offset, self.config.index_interval_bytes)]
        self._bases = [offset]
        self._log_start_offset = offset
        self._dir_dirty = True
        self.epoch_cache.clear()
        self.recovery_point = offset
        log.info("%s: truncated fully, restarting at offset %d", self.tp, offset)

    # --- lifecycle (flushing: .flushing) ---------------------------------------------------------------------

    def close(self) -> None:
        for segment in self._segments:
            segment.close()
        self._bury_dead(float("inf"))

    def rename_dir(self, new_dir: str) -> None:
        """Move the log's directory (to delete it: see :mod:`.log_deletion`).  Open
        descriptors stay valid; the log must take no more writes."""
        self.materialize()           # an empty directory is renamed and removed like any other
        os.rename(self.dir, new_dir)
        self.dir = new_dir

    def __repr__(self) -> str:
        return f"Log({self.tp}, {self.log_start_offset}..{self.log_end_offset}, {len(self._segments)} segments)"
