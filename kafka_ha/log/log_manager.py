"""All partition logs of a broker across its log directories, and their checkpoints.

Each log directory holds ``<topic>-<partition>`` subdirectories (and, for
deleted logs, ``<topic>-<partition>.<id>-delete`` ones: :mod:`.log_deletion`) plus four
files: ``recovery-point-offset-checkpoint`` (how far each log is known to be
flushed), ``replication-offset-checkpoint`` (high watermarks),
``log-start-offset-checkpoint`` (log start offsets that lie inside a log's
first segment) and, between a clean shutdown and the next start,
``.kafka_cleanshutdown``.  The manager runs
no threads or greenlets: the broker calls :meth:`LogManager.flush_all`,
:meth:`LogManager.checkpoint_high_watermarks`, :meth:`LogManager.run_retention`
and :meth:`LogManager.delete_doomed_logs` on its own schedule.

Damage policy: a corrupt recovery-point checkpoint only costs time (every log
is recovered from offset 0), and a corrupt log-start checkpoint only makes
logs start at their first segment again, so both are logged and ignored; a
corrupt high-watermark checkpoint raises :class:`CorruptCheckpointError`, because
guessing high watermarks could expose or hide committed data.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from functools import partial
from typing import Callable, Mapping, Sequence, TypeVar

from kafka_ha.model import TopicPartition
from kafka_ha.state_change_log import StateChangeBatch

from .checkpoints import CorruptCheckpointError, OffsetCheckpointFile
from .config import LogConfig
from .log import Log
from .log_deletion import DoomedLogs, is_doomed_dir_name

log = logging.getLogger(__name__)
T = TypeVar("T")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


OpenLogs = Callable[[Sequence[Callable[[], Log]]], list[Log]]
# Runs one call per log (the shutdown's flushes) and returns when all are done.
RunEach = Callable[[Sequence[Callable[[], None]]], object]


def one_by_one(calls: Sequence[Callable[[], T]]) -> list[T]:
    """The calls' results, run in order on the calling thread (tools and tests; the broker
    runs the file work of opening and of the shutdown flush off its event loop)."""
    return [call() for call in calls]


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """``"my-topic-3"`` -> ``TopicPartition("my-topic", 3)``; None if it is not one.

    >>> parse_log_dir_name("my-topic-3"), parse_log_dir_name("lost+found")
    (TopicPartition(topic='my-topic', partition=3), None)
    """
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or any(c.isspace() for c in topic):
        return None
    return TopicPartition(topic, int(partition))


class LogManager:
    """Creates, loads, finds and deletes :class:`Log` s; owns the per-directory checkpoints."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig,
                 config_for: Callable[[str], LogConfig] | None = None,
                 open_logs: OpenLogs = one_by_one) -> None:
        """Loads the logs found in ``log_dirs``; ``open_logs`` runs the file work of
        opening them (the broker runs it off its event loop: :mod:`kafka_ha.broker.log_loading`)."""
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self._config_for = config_for or (lambda topic: default_config)
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        # Logs per directory, kept as they come and go: counting them for every new
        # log made creating 10,000 partitions quadratic (4.5 s of CPU).
        self._log_count = {d: 0 for d in self.log_dirs}
        # Partitions whose log was deleted since the checkpoints were last written:
        # their old recovery point and log start must not apply to a new log.
        self._deleted_since_checkpoint: set[TopicPartition] = set()
        self._doomed = DoomedLogs()
        for log_dir in self.log_dirs:
            os.makedirs(log_dir, exist_ok=True)
            self._load_dir(log_dir, open_logs)

    def use_topic_configs(self, config_for: Callable[[str], LogConfig]) -> None:
        """From now on each topic's logs take ``config_for(topic)``, the loaded ones too."""
        self._config_for = config_for
        for tp, log_ in self._logs.items():
            log_.config = config_for(tp.topic)

    def _load_dir(self, log_dir: str, open_logs: OpenLogs) -> None:
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER)
        clean = os.path.exists(marker)
        try:
            recovery_points = OffsetCheckpointFile(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT)).read()
        except CorruptCheckpointError as exc:
            log.warning("%s; recovering every log in %s from offset 0", exc, log_dir)
            recovery_points, clean = {}, False
        try:
            log_starts = OffsetCheckpointFile(os.path.join(log_dir, LOG_START_CHECKPOINT)).read()
        except CorruptCheckpointError as exc:
            log.warning("%s; the logs in %s start at their first segment", exc, log_dir)
            log_starts = {}
        if clean:
            log.info("Found clean shutdown file. Skipping recovery for all logs in data directory: %s", log_dir)
        found: list[TopicPartition] = []
        openers: list[Callable[[], Log]] = []
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if is_doomed_dir_name(name):
                self._doomed.found_at_start_up(path)      # never loaded, whatever is left of it
                continue
            tp = parse_log_dir_name(name)
            if tp is None:
                log.warning("skipping directory %s: not a <topic>-<partition> name", path)
                continue
            if tp in self._logs:
                raise RuntimeError(f"partition {tp} has a log in both {self._dir_of[tp]} and {log_dir}")
            found.append(tp)
            openers.append(partial(Log, path, tp, self._config_for(tp.topic), recovery_points.get(tp, 0),
                                   clean, log_starts.get(tp, 0)))
        # The manager's own state changes here only, on the caller's thread: ``open_logs``
        # may run the openers on other threads.
        for tp, opened in zip(found, open_logs(openers)):
            self._logs[tp] = opened
            self._dir_of[tp] = log_dir
            self._log_count[log_dir] += 1
        if clean:
            os.unlink(marker)     # from now on a crash must trigger recovery again

    # --- lookup and lifecycle of logs -------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def log_dir_of(self, tp: TopicPartition) -> str | None:
        return self._dir_of.get(tp)

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def line_batch(self) -> StateChangeBatch:
        """For :meth:`get_or_create_log`'s lines, when a caller creates many logs at once."""
        return StateChangeBatch(log)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None,
                          lines: StateChangeBatch | None = None) -> Log:
        """The log of ``tp``; a new one goes to the directory with the fewest partitions.
        Its "created" line goes to ``lines`` if given (emitted by the caller)."""
        existing = self._logs.get(tp)
        if existing is not None:
            return existing
        if tp in self._deleted_since_checkpoint:
            self.checkpoint_recovery_points()         # rare: a partition deleted and created again
        log_dir = min(self.log_dirs, key=self._log_count.__getitem__)
        path = os.path.join(log_dir, f"{tp.topic}-{tp.partition}")
        # Lazily: a LeaderAndIsr creates thousands of logs, and a directory, a segment
        # and an index file each took most of its time; an empty log needs none of
        # them until its first write (Log.materialize says why a crash cannot hurt).
        created = Log(path, tp, config or self._config_for(tp.topic), lazy=not os.path.exists(path))
        self._logs[tp], self._dir_of[tp] = created, log_dir
        self._log_count[log_dir] += 1
        if lines is not None:
            lines.info(f"created log for {tp} in {log_dir}")
        else:
            log.info("created log for %s in %s", tp, log_dir)
        return created

    def delete_log(self, tp: TopicPartition) -> bool:
        """Rename the log of ``tp`` for deletion (one rename, no fsync, nothing removed
        yet: :meth:`delete_doomed_logs` does that); False if there is none."""
        doomed = self._logs.get(tp)
        if doomed is None:
            return False
        path = self._doomed.doom(doomed, time.monotonic())
        del self._logs[tp]
        self._log_count[self._dir_of.pop(tp)] -= 1
        self._deleted_since_checkpoint.add(tp)
        log.info("Log for partition %s is renamed to %s and is scheduled for deletion", tp, path)
        return True

    def delete_doomed_logs(self, now: float, remove_tree: Callable[[str], None] = shutil.rmtree) -> int:
        """Remove the directories of deleted logs, close their files once file.delete.delay.ms
        has passed (``now`` from ``time.monotonic()``); returns how many directories went."""
        return self._doomed.remove_due(now, remove_tree)

    # --- checkpoints ------------------------------------------------------------------------------------

    def high_watermarks(self) -> dict[TopicPartition, int]:
        """The checkpointed high watermarks of every directory; raises CorruptCheckpointError."""
        result: dict[TopicPartition, int] = {}
        for log_dir in self.log_dirs:
            result.update(OffsetCheckpointFile(os.path.join(log_dir, HIGH_WATERMARK_CHECKPOINT)).read())
        return result

    def checkpoint_high_watermarks(self, hws: Mapping[TopicPartition, int]) -> None:
        """Write each directory's file with the high watermarks of the logs it holds."""
        self._write_per_dir(HIGH_WATERMARK_CHECKPOINT, {tp: hw for tp, hw in hws.items() if tp in self._dir_of})

    def checkpoint_recovery_points(self) -> None:
        """Write each directory's recovery points, and its log start offsets that a restart
        could not see in the segment files (as Kafka, those above their log's first segment)."""
        self._write_per_dir(RECOVERY_POINT_CHECKPOINT,
                            {tp: lg.recovery_point for tp, lg in self._logs.items()})
        for path, offsets in self.log_start_checkpoints().items():
            OffsetCheckpointFile(path).write(offsets)
        self._deleted_since_checkpoint.clear()

    def log_start_checkpoints(self) -> dict[str, dict[TopicPartition, int]]:
        """Each directory's ``log-start-offset-checkpoint`` path and what it should hold now:
        the log start offsets that a restart could not see in the segment files (as Kafka,
        those above their log's first segment).  Apart from the writing, so that a caller
        can write them off its event loop."""
        starts = {tp: lg.log_start_offset for tp, lg in self._logs.items()
                  if lg.log_start_offset > lg.segment_base_offsets()[0]}
        return {os.path.join(log_dir, LOG_START_CHECKPOINT):
                {tp: off for tp, off in starts.items() if self._dir_of.get(tp) == log_dir}
                for log_dir in self.log_dirs}

    def _write_per_dir(self, file_name: str, offsets: Mapping[TopicPartition, int]) -> None:
        for log_dir in self.log_dirs:
            mine = {tp: off for tp, off in offsets.items() if self._dir_of.get(tp) == log_dir}
            OffsetCheckpointFile(os.path.join(log_dir, file_name)).write(mine)

    # --- periodic work -------------------------------------------------------------------------------------

    def run_retention(self, now_ms: int, high_watermarks: Mapping[TopicPartition, int]) -> int:
        """Apply retention to every log, each below its high watermark; returns the number
        of segments deleted.  A log without one (no LeaderAndIsr for it yet) keeps everything."""
        deleted = 0
        for tp, lg in self._logs.items():
            deleted += lg.delete_old_segments(now_ms, high_watermarks.get(tp, lg.log_start_offset))
        return deleted

    def flush_dirty_logs(self, now: int, fsync: Callable[[int], None] | None = None) -> int:
        """Flush every log whose flush.ms has passed since its last flush (Kafka's
        ``flushDirtyLogs``; ``now`` from ``clock.monotonic_ms``); returns how many.
        ``fsync``: see :meth:`Log.flush`."""
        due = [lg for lg in self._logs.values() if lg.flush_due(now)]
        for lg in due:
            lg.flush(fsync=fsync)
        return len(due)

    def flush_rolled_segments(self, fsync: Callable[[int], None] | None = None) -> int:
        """Flush every log up to its active segment (Kafka flushes on every roll), so that
        recovery points advance without flush settings; returns how many logs were flushed."""
        return sum(lg.flush_rolled_segments(fsync) for lg in list(self._logs.values()))

    def flush_all(self, run_each: RunEach = one_by_one) -> None:
        """fsync every log up to its LEO (``run_each`` runs the per-log flushes), then record
        the new recovery points."""
        run_each([lg.flush for lg in self._logs.values()])
        self.checkpoint_recovery_points()

    def close(self, run_each: RunEach = one_by_one) -> None:
        """Flush (see :meth:`flush_all`), checkpoint, mark the shutdown clean and close every
        log.  The broker's shutdown runs the flushes in native threads: at 10,000 logs they
        are some 50,000 fsyncs (segment, indexes, epoch checkpoint, directory)."""
        self.flush_all(run_each)
        for lg in self._logs.values():
            lg.close()
        self._doomed.close()
        for log_dir in self.log_dirs:
            with open(os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER), "w"):
                pass
        self._logs.clear()
