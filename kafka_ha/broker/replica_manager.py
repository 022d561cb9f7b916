"""The broker's side of LeaderAndIsr and StopReplica: its partitions, their roles, the fetchers.

Fencing: a request from a lower controller epoch than the
highest seen is refused whole with STALE_CONTROLLER_EPOCH; a partition entry
is applied only if its leader epoch is newer than the one this broker holds.
A partition whose topic is being deleted gets no LeaderAndIsr: a late one must
not create again a log that StopReplica(delete) removed.  LeaderAndIsr and
StopReplica are applied one at a time (Kafka's replicaStateChangeLock), so one
that yields halfway cannot interleave with the other.
Every transition is written to the state-change log as requested (by the
controller), received and completed (here): the lifecycle docs/operations.md §10 explains.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import gevent
from gevent.lock import BoundedSemaphore

from kafka_ha.broker import long_lived, storage_failure, truncation
from kafka_ha.broker.deferred_log_writes import DeferredLogWrites
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.isr_writer import IsrWriter
from kafka_ha.broker.log_loading import recovery_threads, run_in_threads
from kafka_ha.broker.partition import Partition
from kafka_ha.broker.replica_fetcher import ReplicaFetcher
from kafka_ha.broker.replica_log_tasks import ReplicaLogTasks
from kafka_ha.broker.state_changes import StateChanges
from kafka_ha.broker.storage_failure import Halt
from kafka_ha.clock import monotonic_ms
from kafka_ha.config import BrokerConfig
from kafka_ha.cooperative import in_a_thread, yield_to_io, yielding
from kafka_ha.model import BrokerEndpoint, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.partition_states import from_wire
from kafka_ha.state_change_log import LOGGER_NAME, StateChangeBatch

state_change = logging.getLogger(LOGGER_NAME)
# Longest stretch of LeaderAndIsr work between two yields to the hub (ZooKeeper pings).
YIELD_EVERY_MS = 50
# Intervals at or above this (~31 years) mean "never": gevent's timers cannot take Long.MAX_VALUE.
NEVER_MS = 10**12
# How often the directories of deleted logs are looked for and removed.
DELETE_LOGS_INTERVAL_S = 1.0
# How often the deferred disk work is looked for (run when state changes are quiet: state_changes.py).
DEFERRED_WRITES_INTERVAL_S = 0.2

log = logging.getLogger(__name__)


class ReplicaManager(ReplicaLogTasks):
    def __init__(self, config: BrokerConfig, log_manager, isr_writer: IsrWriter | None,
                 min_isr_for: Callable[[str], int], log_config_for: Callable[[str], Any],
                 endpoint_of: Callable[[int], BrokerEndpoint | None],
                 halt: Halt = storage_failure.halt, *,
                 being_deleted: Callable[[TopicPartition], bool] = lambda _tp: False,
                 partition_exists: Callable[[TopicPartition], bool] = lambda _tp: True,
                 follower_quota=None) -> None:
        """``being_deleted(tp)``: the controller announced tp's topic as being deleted
        (``MetadataCache.being_deleted``); without metadata nothing is.  ``partition_exists``:
        the cluster metadata knows the partition; without metadata every one counts as known."""
        self.config = config
        self._halt = halt
        # Held while a log-start-offset-checkpoint is written (see checkpoint_log_start_offsets).
        self._log_start_lock = BoundedSemaphore()
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.isr_writer = isr_writer
        self._min_isr_for = min_isr_for
        self._log_config_for = log_config_for
        self._endpoint_of = endpoint_of
        self._being_deleted = being_deleted
        self.follower_quota = follower_quota   # replication_quota.ReplicationQuota, or None
        self.state_changes = StateChanges()
        self.controller_epoch = 0
        self.partitions: dict[TopicPartition, Partition] = {}
        # The partitions as Produce, Fetch and the offset requests reach them
        # (replica_appends, replica_reads, replica_offsets); ``partition_exists`` (the
        # cluster metadata) tells which error a partition not hosted here gets.
        self.hosted = HostedPartitions(self.partitions, partition_exists)
        self.fetchers: dict[int, ReplicaFetcher] = {}
        # Partitions a fetcher stopped fetching after an error of their own (Kafka's
        # FailedPartitionsCount); the next LeaderAndIsr or StopReplica for one clears it.
        self.failed_partitions: set[TopicPartition] = set()
        self._checkpointed_hws = self._read_hw_checkpoints()
        self._hw_checkpoint_lock, self._hws_written = BoundedSemaphore(), None   # None: not written
        # What LeaderAndIsr leaves for after its answer: new logs' directories, new
        # leaders' epoch checkpoints (deferred_log_writes says why that is safe).
        self.deferred_writes = DeferredLogWrites(
            halt, lambda tp: self.log_manager.get_log(tp) if self.log_manager is not None else None,
            lambda fn, args: in_a_thread(fn, *args))
        self._tasks: list[gevent.Greenlet] = []

    # ---- lifecycle ----------------------------------------------------------

    def start_tasks(self) -> None:
        lag_ms = self.config["replica.lag.time.max.ms"]
        self._tasks = [
            gevent.spawn(self._every, lag_ms / 2000, self._shrink_isrs),
            gevent.spawn(self._every, self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000,
                         self.checkpoint_high_watermarks),
            gevent.spawn(self._every, self.config["log.retention.check.interval.ms"] / 1000,
                         self._run_retention),
            gevent.spawn(self._every, self.config["log.flush.offset.checkpoint.interval.ms"] / 1000,
                         self.checkpoint_recovery_points),
            gevent.spawn(self._every, DELETE_LOGS_INTERVAL_S, self._delete_doomed_logs),
            gevent.spawn(self._every, self.config["producer.id.expiration.check.interval.ms"] / 1000,
                         self.expire_idle_producers),
            gevent.spawn(self._every, DEFERRED_WRITES_INTERVAL_S, self.finish_deferred_writes_when_quiet),
        ]
        flush_check_ms = self.config["log.flush.scheduler.interval.ms"]
        if flush_check_ms < NEVER_MS:   # Kafka's default is Long.MAX_VALUE: no flusher at all
            self._tasks.append(gevent.spawn(self._every, flush_check_ms / 1000, self._flush_dirty_logs))

    def stop_leading(self) -> None:
        """The broker is stopping: it acknowledges nothing more as leader.

        Called once its controlled shutdown is over (the controller has moved every
        replicated leadership, or has given up), and again by :meth:`shutdown`.  Every
        pending acks=all answer is finished NOT_LEADER_FOR_PARTITION now, before the logs
        are flushed and closed (with that flush on the loop, such answers once reached
        producers only at the exit, 6.7 s after the new leaders were ready: issue 23), as
        Kafka completes a delayed produce when its leadership moves away.  Later appends
        get NOT_LEADER_FOR_PARTITION, so clients go to the new leaders."""
        stopped = [p for p in self.partitions.values() if p.is_leader]
        for partition in stopped:
            partition.stop()
        if stopped:
            log.info("Broker %d stopping: no longer leads %d partitions", self.broker_id, len(stopped))
            # Let the woken answers be finished and written before the caller goes on.
            yield_to_io()

    def shutdown(self) -> None:
        self.stop_leading()
        for task in self._tasks:
            task.kill(block=False)
        for fetcher in self.fetchers.values():
            fetcher.stop()
        if self.log_manager is not None:
            self.checkpoint_high_watermarks()
            # Producer snapshots at the log ends (as Kafka writes on a clean shutdown), so
            # the next start reads them instead of scanning; written in parallel.
            for partition in self.partitions.values():
                partition.producers.snapshot()
            for partition in self.partitions.values():
                partition.producers.settle()
            # close() flushes every log (in threads: on the loop, 10k logs' fsyncs held it 47 s),
            # checkpoints the recovery points, then writes the clean-shutdown marker; a failed
            # flush or checkpoint halts before the marker: the next start recovers the logs.
            threads = recovery_threads(self.config)
            with self._log_start_lock, self._writing("closing the logs"):
                self.log_manager.close(lambda flushes: run_in_threads(flushes, threads))

    @staticmethod
    def _every(interval_s: float, task: Callable[[], None]) -> None:
        while True:
            gevent.sleep(interval_s)
            try:
                task()
            except Exception:  # a periodic task never takes the broker down
                log.exception("Periodic task %s failed", getattr(task, "__name__", task))

    def finish_deferred_writes_when_quiet(self, now_ms: int | None = None) -> None:
        """The periodic pass: :meth:`finish_deferred_writes` once state changes have been
        quiet for a while (or the last pass is long ago)."""
        if self.state_changes.time_for_a_pass(monotonic_ms() if now_ms is None else now_ms):
            self.finish_deferred_writes()

    def finish_deferred_writes(self) -> None:
        # Not beside a LeaderAndIsr or StopReplica: both yield to the loop between slices,
        # and this pass took half of it (a restarted broker applied its 10k partitions in
        # 3.4 s instead of 0.5 s).  Nor after a state change: most likely a failover, whose
        # followers and new leaders need the whole loop for the next seconds.  What waits is
        # written by a later pass.
        if len(self.deferred_writes) and not self.state_changes.busy():
            started = monotonic_ms()
            done = self.deferred_writes.finish(pause=self.state_changes.since_now())
            log.info("Broker %d wrote the directories and leader epoch checkpoints that LeaderAndIsr "
                     "deferred for %d logs in %d ms%s", self.broker_id, done, monotonic_ms() - started,
                     "; stopped for a state change, the rest is left for a later pass"
                     if self.deferred_writes.stopped else "")

    def _shrink_isrs(self) -> None:
        lag_ms = self.config["replica.lag.time.max.ms"]
        for partition in list(self.partitions.values()):
            partition.shrink_isr_if_lagging(lag_ms)

    # ---- controller requests --------------------------------------------------

    def _stale(self, kind: str, controller_id: int, epoch: int, correlation_id: int) -> bool:
        if epoch < self.controller_epoch:
            state_change.warning(
                "Broker %d ignoring %s request correlation id %d from controller %d with epoch %d "
                "since its controller epoch %d is old. Latest known controller epoch is %d",
                self.broker_id, kind, correlation_id, controller_id, epoch, epoch,
                self.controller_epoch)
            return True
        self.controller_epoch = epoch
        return False

    def leader_and_isr(self, request: dict[str, Any], correlation_id: int) -> dict[str, Any]:
        with self.state_changes.applying():
            return self._leader_and_isr(request, correlation_id)

    def _leader_and_isr(self, request: dict[str, Any], correlation_id: int) -> dict[str, Any]:
        controller, epoch = request["controller_id"], request["controller_epoch"]
        if self._stale("LeaderAndIsr", controller, epoch, correlation_id):
            return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": []}
        live_leaders = {b["id"]: BrokerEndpoint(b["id"], b["host"], b["port"])
                        for b in request["live_leaders"]}
        errors = []
        lines = StateChangeBatch()
        source = f"correlation id {correlation_id} from controller {controller} epoch {epoch}"
        follow: dict[int, set[TopicPartition]] = {}
        started_ms = monotonic_ms()
        led = refused = 0
        created = self.log_manager.line_batch() if self.log_manager is not None else None
        hosted_before = len(self.partitions)
        # In slices: a big request must not starve the ZooKeeper heartbeat (on a loaded
        # machine 200 new logs took 2.5 s, and the session, 4 s, expired).
        for entry in yielding(request["partition_states"], YIELD_EVERY_MS):
            s = from_wire(entry)
            lines.info(f"Broker {self.broker_id} received LeaderAndIsr request {s.describe()} "
                       f"{source} for partition {s.tp}")
            error = self._apply(s, source, lines, follow, created)
            errors.append({"topic": s.tp.topic, "partition": s.tp.partition, "error_code": error})
            refused += error != ErrorCode.NONE
            led += error == ErrorCode.NONE and s.leader == self.broker_id
        for leader, tps in follow.items():
            self._fetch_from(leader, tps, live_leaders)
        lines.info(f"Broker {self.broker_id} handled LeaderAndIsr request {source}: {len(errors)} "
                   f"partitions ({led} become-leader, {len(errors) - led - refused} become-follower, "
                   f"{refused} refused) in {monotonic_ms() - started_ms} ms")
        lines.emit()
        if created is not None:
            created.emit()
        self._retire_idle_fetchers()
        if len(self.partitions) - hosted_before >= long_lived.FREEZE_AFTER_CREATED:
            long_lived.freeze()   # what it created lives on: out of the collector's way
        return {"error_code": ErrorCode.NONE, "partition_errors": errors}

    def _apply(self, s: PartitionStateInfo, source: str, lines: StateChangeBatch,
               follow: dict[int, set[TopicPartition]], created: StateChangeBatch | None = None) -> int:
        if self.broker_id not in s.replicas:
            lines.warning(f"Broker {self.broker_id} ignoring LeaderAndIsr request {source} for "
                          f"partition {s.tp} as itself is not in assigned replica list "
                          f"{list(s.replicas)}")
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if self._being_deleted(s.tp):
            lines.warning(f"Broker {self.broker_id} ignoring LeaderAndIsr request {source} for "
                          f"partition {s.tp} since its topic is being deleted")
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        current = self.partitions.get(s.tp)
        if current is not None and not current.takes_epoch(s.leader_epoch):
            # Not a warning: every controller failover re-sends current states.
            lines.info(f"Broker {self.broker_id} ignoring LeaderAndIsr request {source} for "
                       f"partition {s.tp} since its associated leader epoch {s.leader_epoch} is "
                       f"not higher than the current leader epoch {current.leader_epoch}")
            return ErrorCode.STALE_CONTROLLER_EPOCH
        try:
            partition = current or self._create_partition(s.tp, created)
        except OSError as e:
            # A disk problem with one partition must not fail the whole request
            # (the controller would resend it forever): report that partition.
            lines.warning(f"Broker {self.broker_id} cannot create the log of partition {s.tp} "
                          f"({e}); LeaderAndIsr {source} failed for it")
            return ErrorCode.KAFKA_STORAGE_ERROR
        if s.leader == self.broker_id:
            self._stop_fetching({s.tp})
            partition.make_leader(s, defer_checkpoint=True)
            transition = "become-leader"
        else:
            fetches_on = current is not None and truncation.fetches_on(
                current.leader, current.leader_epoch, s.leader, s.leader_epoch)
            partition.make_follower(s)
            if not (fetches_on and self._fetch_on(s.tp, s.leader)):
                self._stop_fetching({s.tp})
                if s.leader >= 0:
                    follow.setdefault(s.leader, set()).add(s.tp)
            transition = "become-follower"
        self.deferred_writes.add(partition.log)
        lines.info(f"Broker {self.broker_id} completed LeaderAndIsr request {source} for the "
                   f"{transition} transition for partition {s.tp}")
        return ErrorCode.NONE

    def _create_partition(self, tp: TopicPartition, lines: StateChangeBatch | None = None) -> Partition:
        log_ = self.log_manager.get_or_create_log(tp, self._log_config_for(tp.topic), lines)
        partition = Partition(tp, self.broker_id, log_, lambda: self._min_isr_for(tp.topic),
                              self.isr_writer, self._halt,
                              is_live=lambda b: self._endpoint_of(b) is not None,
                              defer_disk_work=self.deferred_writes.add)
        partition.restore_high_watermark(self._checkpointed_hws.get(tp, 0))
        self.partitions[tp] = partition
        return partition

    def _fetch_from(self, leader: int, tps: set[TopicPartition],
                    live_leaders: dict[int, BrokerEndpoint]) -> None:
        endpoint = live_leaders.get(leader) or self._endpoint_of(leader)
        if endpoint is None:
            log.warning("Broker %d: no address for leader %d of %s; not fetching yet",
                        self.broker_id, leader, sorted(tps))
            return
        fetcher = self.fetchers.get(leader)
        if fetcher is not None and fetcher.source != endpoint:
            # A new address: everything this fetcher had starts over there (with a
            # truncation round), the partitions that fetched on in this request too.
            tps = tps | fetcher.fetching | fetcher.needs_truncation
            fetcher.stop()
            fetcher = None
        if fetcher is None:
            cfg = self.config
            fetcher = ReplicaFetcher(self.broker_id, endpoint, self.partitions.get,
                                     cfg["replica.fetch.wait.max.ms"], cfg["replica.fetch.min.bytes"],
                                     cfg["replica.fetch.max.bytes"],
                                     cfg["controller.socket.timeout.ms"] / 1000,
                                     failed_partitions=self.failed_partitions,
                                     quota=self.follower_quota)
            self.fetchers[leader] = fetcher
        fetcher.add(tps)

    def _fetch_on(self, tp: TopicPartition, leader: int) -> bool:
        """Keep ``tp`` where it is in ``leader``'s fetcher, in its new epoch; False if it
        is not there (fenced, failed, or never added): then it starts over."""
        fetcher = self.fetchers.get(leader)
        return fetcher is not None and fetcher.fetch_on(tp)

    def _stop_fetching(self, tps: set[TopicPartition]) -> None:
        self.failed_partitions.difference_update(tps)
        for fetcher in self.fetchers.values():
            fetcher.remove(tps)

    def failed_partition_count(self) -> int:
        """Followed partitions not fetched since an error of their own (until their next LeaderAndIsr)."""
        return len(self.failed_partitions)

    def _retire_idle_fetchers(self) -> None:
        for leader, fetcher in list(self.fetchers.items()):
            if fetcher.idle:
                fetcher.stop()
                del self.fetchers[leader]

    def stop_replica(self, request: dict[str, Any], correlation_id: int) -> dict[str, Any]:
        with self.state_changes.applying():
            return self._stop_replica(request, correlation_id)

    def _stop_replica(self, request: dict[str, Any], correlation_id: int) -> dict[str, Any]:
        controller, epoch = request["controller_id"], request["controller_epoch"]
        if self._stale("StopReplica", controller, epoch, correlation_id):
            return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": []}
        delete = request["delete_partitions"]
        source = f"correlation id {correlation_id} from controller {controller} epoch {epoch}"
        errors = []
        lines = StateChangeBatch()
        for entry in request["partitions"]:
            tp = TopicPartition(entry["topic"], entry["partition"])
            lines.info(f"Broker {self.broker_id} received StopReplica (delete={str(delete).lower()}) "
                       f"{source} for partition {tp}")
            self._stop_fetching({tp})
            partition = self.partitions.pop(tp, None) if delete else self.partitions.get(tp)
            if partition is not None:
                partition.stop()
            if delete and self.log_manager is not None:
                with self._writing(f"deleting the log of {tp}"):
                    self.log_manager.delete_log(tp)      # a rename: the files go in the background
                self._checkpointed_hws.pop(tp, None)
            lines.info(f"Broker {self.broker_id} completed StopReplica (delete={str(delete).lower()}) "
                       f"{source} for partition {tp}")
            errors.append({"topic": tp.topic, "partition": tp.partition, "error_code": ErrorCode.NONE})
        lines.emit()
        self._retire_idle_fetchers()
        return {"error_code": ErrorCode.NONE, "partition_errors": errors}

    def led_partitions(self) -> list[TopicPartition]:
        return [tp for tp, p in self.partitions.items() if p.is_leader]
