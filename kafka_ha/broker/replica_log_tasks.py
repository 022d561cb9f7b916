"""The replica manager's periodic disk work: checkpoints, flushes, retention, clean-up.

A base class of ``ReplicaManager`` (kept apart so that each stays readable); it uses
the manager's ``config``, ``broker_id``, ``log_manager`` (None in tests without logs),
``partitions``, ``fetchers`` and ``_halt``, and the HW and log-start checkpoint state
the manager sets up in its constructor.  Every write that touches the disk runs in a
native thread or under ``_writing``, which halts the broker on an OSError, as Kafka
does for a failed log directory.
"""
from __future__ import annotations

import logging
import shutil
import time

import gevent

from kafka_ha.broker.storage_failure import HaltOnIOError
from kafka_ha.clock import monotonic_ms, now_ms
from kafka_ha.cooperative import fsync_in_a_thread, in_a_thread, yielding
from kafka_ha.log.checkpoints import CorruptCheckpointError, OffsetCheckpointFile
from kafka_ha.model import TopicPartition

log = logging.getLogger("kafka_ha.broker.replica_manager")


class ReplicaLogTasks:
    def _read_hw_checkpoints(self) -> dict[TopicPartition, int]:
        if self.log_manager is None:
            return {}
        try:
            return self.log_manager.high_watermarks()
        except CorruptCheckpointError as e:
            # Safe to rebuild: the HW only gates what consumers see and never
            # truncates a log here; leaders recompute it from follower fetches.
            log.error("Ignoring a corrupt high-watermark checkpoint (%s); high watermarks restart "
                      "from the log start offsets and advance as replicas confirm", e)
            return {}

    def checkpoint_high_watermarks(self) -> None:
        """If any HW moved since the last write: in a native thread, one write at a time (at 10k
        partitions sorting, rendering and fsyncing it held the loop 0.1-0.27 s every 5 s)."""
        if self.log_manager is not None:
            with self._hw_checkpoint_lock:   # (read inside: a waiting call must not write older HWs)
                hws = {**self._checkpointed_hws, **{tp: p.high_watermark for tp, p in self.partitions.items()}}
                if hws == self._hws_written:
                    return
                with self._writing("writing the high watermark checkpoint"):
                    in_a_thread(self.log_manager.checkpoint_high_watermarks, hws)
                self._hws_written = hws

    def checkpoint_recovery_points(self) -> None:
        """How far each log is known to be on disk, so that a restart after a crash
        recovers only what came after (log.flush.offset.checkpoint.interval.ms).
        Rolled segments are flushed first, as Kafka does on every roll: without flush
        settings the recovery points would otherwise never move while the broker runs."""
        if self.log_manager is not None:
            with self._writing("flushing rolled log segments"):
                self.log_manager.flush_rolled_segments(fsync_in_a_thread)
            with self._log_start_lock, self._writing("writing the recovery point checkpoint"):
                self.log_manager.checkpoint_recovery_points()

    def checkpoint_log_start_offsets(self) -> None:
        """Write the log start offsets now (DeleteRecords moved one), in a native thread;
        one writer at a time, since the periodic checkpoint rewrites the same files."""
        if self.log_manager is not None:
            with self._log_start_lock, self._writing("writing the log start offset checkpoint"):
                for path, offsets in self.log_manager.log_start_checkpoints().items():
                    in_a_thread(OffsetCheckpointFile(path).write, offsets)

    def _flush_dirty_logs(self) -> None:
        if self.log_manager is not None:
            with self._writing("flushing logs"):
                self.log_manager.flush_dirty_logs(monotonic_ms(), fsync_in_a_thread)

    def _writing(self, action: str) -> HaltOnIOError:
        """Guards a write to the log directories: an OSError in it halts the broker."""
        return HaltOnIOError(self._halt, action, None, ", ".join(self.log_manager.log_dirs))

    def _run_retention(self) -> None:
        if self.log_manager is not None:
            # Only below each replica's own HW (uncommitted records outlive any retention setting).
            hws = {tp: p.high_watermark for tp, p in self.partitions.items()}   # none: keep all
            starts = {tp: p.log.log_start_offset for tp, p in self.partitions.items()}
            if self.log_manager.run_retention(now_ms(), hws):   # (no pause: the same partitions)
                # A leader's fetch sessions answer a moved log start, a follower's fetcher sends it.
                moved = {tp for tp, p in self.partitions.items() if p.log.log_start_offset != starts[tp]}
                for tp in moved:
                    self.partitions[tp].log_start_moved()
                for fetcher in self.fetchers.values():
                    fetcher.positions_changed(moved)

    def expire_idle_producers(self) -> int:
        """Forget, in every partition, the idempotent producers idle for longer than
        ``transactional.id.expiration.ms`` (Kafka's rule); pauses for the event loop
        between slices of partitions.  Returns how many were forgotten."""
        now, max_idle = now_ms(), self.config["transactional.id.expiration.ms"]
        expired = sum(p.producers.expire(now, max_idle) for p in yielding(list(self.partitions.values())))
        if expired:
            log.info("Broker %d forgot %d producer(s) idle for %d ms or more", self.broker_id, expired,
                     max_idle)
        return expired

    def _delete_doomed_logs(self) -> None:
        """Remove the renamed directories of deleted logs, in a native thread: unlinking
        gigabytes takes a while, and the gevent loop keeps serving meanwhile.  Like
        retention, this only deletes: a failure is logged and tried again."""
        if self.log_manager is not None:
            pool = gevent.get_hub().threadpool
            self.log_manager.delete_doomed_logs(time.monotonic(), lambda path: pool.apply(shutil.rmtree, (path,)))
