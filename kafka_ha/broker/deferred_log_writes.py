"""The disk work a LeaderAndIsr leaves for after its answer, done in one pass per batch.

Applying a LeaderAndIsr used to write per partition: a directory, a segment
file and an index file for each new log, and a leader-epoch checkpoint
(temporary file and rename) for each partition that became leader.  At 10,000
partitions that took several seconds before the controller got its answer.
Now the request only changes memory: new logs are created lazily
(``Log(lazy=True)``) and the new leaders' epochs are recorded with their
checkpoint write deferred.  Their logs are queued here, and the broker's
periodic pass (:meth:`DeferredLogWrites.finish`) catches up once LeaderAndIsr
has been quiet for a few seconds (``ReplicaManager.finish_deferred_writes_when_quiet``),
and stops at its next slice when another comes (most likely a failover, which needs the
whole loop):

- the directories of a chunk of new logs are created in one call in a native
  thread (``mkdir`` of thousands of directories is seconds of system time that
  the event loop need not wait for);
- back on the loop, in short slices with a rest after each (the pass is
  background work and takes a fifth of the loop at most), each log is marked as on disk and
  its pending epoch checkpoint written, if the log holds records (an empty
  log's waits for its flush: until then its records lie beyond its recovery
  point, which a restart after a crash re-reads anyway, and the loader's
  rebuild of the epochs from them costs little more).

Nothing depends on this pass for safety: a log writes what it needs itself
before its first append or flush (``Log.materialize``, ``LeaderEpochCache.sync``),
and a crash before the pass leaves what the loader already handles (the
reasoning is in :mod:`kafka_ha.log.epoch_cache` and docs/design.md).  The pass
keeps the files close to memory, so that a restart rarely needs the loader's
rebuild of an epoch cache from the batches.
"""
from __future__ import annotations

import logging
import os
from typing import Callable

import gevent

from kafka_ha.cooperative import yielding
from kafka_ha.broker.storage_failure import Halt, HaltOnIOError
from kafka_ha.log.log import Log
from kafka_ha.model import TopicPartition

log = logging.getLogger(__name__)

# Directories created per call in a native thread: each call is one pass through the
# thread pool, and a chunk's logs are then finished on the loop before the next one.
CHUNK = 500
# The pass is background work: a slice of this long on the loop, then a rest of
# BACKGROUND_REST_S, so it takes at most a fifth of the loop however long it lasts.
# (Yielding for a turn only, the first pass after a 10k-partition topic was created ran
# 12-14 s beside the first writes, taking as much of the loop as all the rest, and a
# controlled shutdown meanwhile wrote its states in 2.9-4.6 s instead of 1.8 s.)
BACKGROUND_SLICE_MS = 10
BACKGROUND_REST_S = 0.04


def rest() -> None:
    gevent.sleep(BACKGROUND_REST_S)


def make_dirs(paths: list[str]) -> None:
    """``mkdir -p`` each path (run in a native thread)."""
    for path in paths:
        os.makedirs(path, exist_ok=True)


class DeferredLogWrites:
    """Logs with a directory or an epoch checkpoint still to write."""

    def __init__(self, halt: Halt, current_log: Callable[[TopicPartition], Log | None],
                 run_in_thread: Callable[[Callable, tuple], object] = lambda fn, args: fn(*args),
                 slice_ms: int = BACKGROUND_SLICE_MS, rest: Callable[[], None] = rest) -> None:
        """``current_log(tp)``: the log manager's log of ``tp`` now (a log deleted while its
        directory was being created must not get it back); ``run_in_thread(fn, args)``
        runs ``fn(*args)`` off the event loop and returns when it is done; ``rest()`` is
        called after each ``slice_ms`` of work on the loop."""
        self._halt = halt
        self._current_log = current_log
        self._run_in_thread = run_in_thread
        self._slice_ms = slice_ms
        self._rest = rest
        self._waiting: dict[TopicPartition, Log] = {}
        self.stopped = False   # whether the last pass stopped early (pause() turned true)

    def add(self, lg: Log) -> None:
        if lg.disk_work_pending:
            self._waiting[lg.tp] = lg

    def __len__(self) -> int:
        return len(self._waiting)

    def finish(self, pause: Callable[[], bool] = lambda: False) -> int:
        """Do the queued work (yielding to the loop between slices); returns how many logs
        had any.  Logs queued meanwhile wait for the next call, and so do the logs left
        when ``pause()`` turns true after a slice (a LeaderAndIsr came: see
        ``ReplicaManager.finish_deferred_writes``)."""
        waiting, self._waiting = list(self._waiting.values()), {}
        done = 0
        self.stopped = False
        for i in range(0, len(waiting), CHUNK):
            if i and pause():
                self._requeue(waiting[i:])
                self.stopped = True
                break
            done += self._finish_chunk(waiting[i:i + CHUNK], pause)
        return done

    def _requeue(self, logs: list[Log]) -> None:
        for lg in logs:
            # A log queued meanwhile under the same partition is the newer one.
            self._waiting.setdefault(lg.tp, lg)

    def _finish_chunk(self, chunk: list[Log], pause: Callable[[], bool] = lambda: False) -> int:
        new_dirs = {lg: lg.dir for lg in chunk if not lg.on_disk}
        if new_dirs:
            with HaltOnIOError(self._halt, "creating the directories of", f"{len(new_dirs)} new logs",
                               os.path.dirname(next(iter(new_dirs.values())))):
                self._run_in_thread(make_dirs, (list(new_dirs.values()),))
        done = 0
        stopped = False
        left: list[Log] = []
        for lg in yielding(chunk, self._slice_ms, pause=self._rest):
            if self._current_log(lg.tp) is not lg:
                if lg in new_dirs:
                    self._remove_if_unused(lg.tp, new_dirs[lg])
                continue
            # Stopped, the pass still marks the directories it made (memory only: a
            # directory is never left behind unaccounted for), but writes no more files.
            stopped = stopped or pause()
            with HaltOnIOError(self._halt, "writing the leader epoch checkpoint of", lg.tp, lg.dir):
                created = lg.materialize(dir_exists=lg in new_dirs)
                # An empty log's checkpoint is left to its flush (see the module doc): a
                # topic's creation then costs no checkpoint writes at all.
                written = (not stopped and lg.log_end_offset > lg.log_start_offset
                           and lg.write_pending_checkpoint())
            if stopped and lg.disk_work_pending:
                left.append(lg)
            done += created or written
        self.stopped |= stopped
        self._requeue(left)
        return done

    def _remove_if_unused(self, tp: TopicPartition, path: str) -> None:
        """The log was deleted (renamed away) while the thread created its directory: an
        empty directory left behind would load as a log of a deleted partition."""
        current = self._current_log(tp)
        if current is not None and current.on_disk:
            return                           # a new log of the partition lives there now
        try:
            os.rmdir(path)                   # only if empty
        except OSError:
            pass
