"""The broker's log cleaner: a greenlet that compacts the dirtiest compacted log, one pass
at a time, and records how far each log is clean in ``cleaner-offset-checkpoint``.

Each pass's file work runs in gevent's threadpool (:mod:`kafka_ha.log.cleaner`);
the greenlet itself only chooses, swaps segments in and writes the checkpoint.
Leaders and followers clean their own logs independently, as in Kafka: each
below its own high watermark.  A pass that fails (a full disk, a log deleted
meanwhile) is logged and the cleaner goes on with the next; a log whose data it cannot
parse is marked uncleanable until the broker restarts (Kafka's KIP-346).

The checkpoint (Kafka's format: version, count, ``topic partition offset``
lines, one file per log directory) holds each log's first dirty offset.  A
value outside a log's range, or any truncation of the log while the broker
runs, makes the log's next pass start from its log start offset.
"""
from __future__ import annotations

import logging
import os
from typing import Callable, Mapping

import gevent

from kafka_ha.cooperative import in_a_thread, yielding
from kafka_ha.clock import now_ms
from kafka_ha.config import BrokerConfig
from kafka_ha.log.checkpoints import CorruptCheckpointError, OffsetCheckpointFile
from kafka_ha.log.cleaner import CLEANER_CHECKPOINT, Throttler, clean_log, segment_newest_ms
from kafka_ha.log.compaction import (LogToClean, choose_log_to_clean, first_uncleanable_offset, section_sizes,
                                     tombstone_horizon)
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import TopicPartition
from kafka_ha.records.errors import RecordsError

log = logging.getLogger(__name__)


class LogCleaner:
    def __init__(self, log_manager: LogManager, high_watermarks: Callable[[], Mapping[TopicPartition, int]],
                 config: BrokerConfig, offload=in_a_thread) -> None:
        self.log_manager = log_manager
        self.high_watermarks = high_watermarks
        self.backoff_s = config["log.cleaner.backoff.ms"] / 1000
        self.map_budget = config["log.cleaner.dedupe.buffer.size"]
        self.throttler = Throttler(config["log.cleaner.io.max.bytes.per.second"])
        self.offload = offload
        self.first_dirty: dict[TopicPartition, int] = {}
        self.uncleanable: set[TopicPartition] = set()     # until the broker restarts (KIP-346)
        # (end offset, time) of each log's passes, for tombstone_horizon; in memory only:
        # after a restart tombstones wait for new passes, later rather than too early.
        self.passes: dict[TopicPartition, list[tuple[int, int]]] = {}
        self._truncations_seen: dict[TopicPartition, tuple[object, int]] = {}
        self._greenlet: gevent.Greenlet | None = None
        for log_dir in log_manager.log_dirs:
            path = os.path.join(log_dir, CLEANER_CHECKPOINT)
            try:
                self.first_dirty.update(OffsetCheckpointFile(path).read())
            except CorruptCheckpointError as exc:
                # Only costs work: every log is cleaned again from its start.
                log.warning("%s; the logs in %s are cleaned from their start", exc, log_dir)

    def start(self) -> None:
        log.info("Starting the log cleaner")
        self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _run(self) -> None:
        while True:
            try:
                cleaned = self.clean_once()
            except Exception:      # the cleaner never takes the broker down
                log.exception("The log cleaner failed; it tries again in %.1f s", self.backoff_s)
                cleaned = False
            gevent.sleep(0 if cleaned else self.backoff_s)

    def _first_dirty(self, tp: TopicPartition, lg) -> int:
        """The checkpointed first dirty offset, or the log start when it is out of range or
        the log was truncated since the last look (what was clean may have been replaced)."""
        seen = self._truncations_seen.get(tp)
        self._truncations_seen[tp] = (lg, lg.truncations)
        offset = self.first_dirty.get(tp, lg.log_start_offset)
        if seen is not None and seen != (lg, lg.truncations):
            offset = lg.log_start_offset
            self.passes.pop(tp, None)        # what was cleaned past may have been replaced
        if not lg.log_start_offset <= offset <= lg.log_end_offset:
            offset = lg.log_start_offset
        return offset

    def candidates(self, now: int) -> list[LogToClean]:
        hws = self.high_watermarks()
        found = []
        logs = self.log_manager.all_logs()
        for gone in [tp for tp in self._truncations_seen if tp not in logs]:
            del self._truncations_seen[gone]     # a deleted log; a new one starts from its start
            self.passes.pop(gone, None)
        for tp, lg in yielding(logs.items()):      # thousands of logs: let requests in between
            if not lg.config.compact or tp not in hws or tp in self.uncleanable:
                continue
            segments = lg.segments()
            bases = [s.base_offset for s in segments]
            end = first_uncleanable_offset(bases, lambda i: segment_newest_ms(segments[i]), hws[tp], now,
                                           lg.config.min_compaction_lag_ms)
            clean, dirty = section_sizes(bases, [s.size for s in segments], self._first_dirty(tp, lg), end)
            found.append(LogToClean(tp, clean, dirty, lg.config.min_cleanable_dirty_ratio))
        return found

    def clean_once(self) -> bool:
        """Clean the dirtiest log, if one is dirty enough; True if a pass ran to its end
        (False also when it stopped because the log changed: the next try waits)."""
        now = now_ms()
        chosen = choose_log_to_clean(self.candidates(now))
        if chosen is None:
            return False
        tp = chosen.key
        lg = self.log_manager.get_log(tp)
        hw = self.high_watermarks().get(tp)
        if lg is None or hw is None:
            return False
        start = self._first_dirty(tp, lg)
        log.info("Beginning cleaning of log %s (dirty ratio %.2f, from offset %d)", tp, chosen.ratio, start)
        passes = self.passes.setdefault(tp, [])
        horizon = tombstone_horizon(passes, now, lg.config.delete_retention_ms)
        try:
            result = clean_log(lg, start, hw, now, self.map_budget, self.throttler, self.offload, horizon)
        except RecordsError as exc:
            # Data the cleaner cannot parse would fail every pass and starve the other logs.
            log.error("Unexpected exception thrown when cleaning log %s. Marking its partition (%s) "
                      "as uncleanable: %s", lg.dir, tp, exc)
            self.uncleanable.add(tp)
            return False
        if self.log_manager.get_log(tp) is not lg:
            return True                   # deleted meanwhile: nothing to record
        self.first_dirty[tp] = result.first_dirty
        self._truncations_seen[tp] = (lg, lg.truncations)
        if result.completed:
            # Only the newest pass old enough to matter, and the younger ones, are needed.
            passes[:] = [p for p in passes if p[0] >= horizon] + [(result.first_dirty, now)]
        log.info("Log cleaner cleaned %s up to offset %d: %d segments rewritten, %.1f MB read, "
                 "%.1f MB written%s", tp, result.first_dirty, result.segments_rewritten,
                 result.bytes_read / 1e6, result.bytes_written / 1e6,
                 "" if result.completed else " (stopped: the log changed meanwhile)")
        self.offload(self._checkpoint, os.path.dirname(lg.dir), self._offsets_in(os.path.dirname(lg.dir)))
        return result.completed

    def _offsets_in(self, log_dir: str) -> dict[TopicPartition, int]:
        return {tp: offset for tp, offset in self.first_dirty.items()
                if (lg := self.log_manager.get_log(tp)) is not None and os.path.dirname(lg.dir) == log_dir}

    @staticmethod
    def _checkpoint(log_dir: str, offsets: dict[TopicPartition, int]) -> None:
        OffsetCheckpointFile(os.path.join(log_dir, CLEANER_CHECKPOINT)).write(offsets)

