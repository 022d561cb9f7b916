"""One simulated broker process: the project's real ReplicaManager, Partitions, Logs and DataApis.

What is real: ``LogManager``/``Log`` on a directory (tmpfs), ``ReplicaManager``'s
LeaderAndIsr handling (controller-epoch and leader-epoch fencing, become-leader,
become-follower, truncation on every epoch change), ``Partition`` (HW, ISR,
follower positions), ``MetadataCache`` (which brokers are live, for ISR joins)
and ``DataApis`` (Fetch, OffsetsForLeaderEpoch, ListOffsets as the leader
answers them, through ``replica_reads``/``replica_offsets``).  What is simulated: the replica fetcher (:mod:`tests.sim.fetcher`),
the ISR writer (:mod:`tests.sim.isr_writer`), the ZooKeeper session and the
periodic tasks, which the world schedules.

A crash ends the process: its logs are closed without a flush.  A process
crash keeps everything written (the page cache survives); a power loss keeps
the fsynced prefix of each log (up to its recovery point) plus a random part of
the rest, possibly ending inside an entry, which the next start's recovery
cuts (see :func:`cut_unflushed`).  Truncations are taken as durable, and the
leader-epoch checkpoint survives as last written (the file is replaced by a
rename, which the file systems Kafka runs on order after its data); the
high-watermark and recovery-point checkpoints are fsynced by the real code.
"""
from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING, Any

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import TopicPartition
from kafka_ha.records.shallow import iter_entries
from tests.sim.fetcher import SimFetcher
from tests.sim.isr_writer import SimIsrWriter

if TYPE_CHECKING:
    from tests.sim.world import World


class SimHalt(Exception):
    """The broker's storage-failure halt: never expected on tmpfs, so it stops the run."""


def _halt(message: str):
    raise SimHalt(message)


class SimReplicaManager(ReplicaManager):
    """The real ReplicaManager; only its fetcher management goes to the simulated fetchers."""

    def __init__(self, process: BrokerProcess, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._process = process

    def _fetch_from(self, leader, tps, live_leaders) -> None:
        for tp in sorted(tps):
            self._process.fetcher(tp).start(leader)

    def _fetch_on(self, tp, leader) -> bool:
        return self._process.fetcher(tp).fetch_on(leader)

    def _stop_fetching(self, tps) -> None:
        for tp in sorted(tps):
            self._process.fetcher(tp).stop()

    def _retire_idle_fetchers(self) -> None:
        pass        # one fetcher per partition here; an idle one costs nothing


class BrokerProcess:
    """One incarnation of broker ``broker_id``: from a start to its crash."""

    def __init__(self, world: World, broker_id: int, number: int, log_dir: str) -> None:
        self.world = world
        self.broker_id = broker_id
        self.number = number              # incarnation counter of this broker id
        self.log_dir = log_dir
        self.alive = True
        self.greenlets: set = set()       # the ISR writer's and periodic tasks' greenlets
        params = world.params
        self.log_manager = LogManager([log_dir], world.log_config)
        self.metadata = MetadataCache(broker_id)
        self.isr_writer = SimIsrWriter(self)
        config = BrokerConfig({"broker.id": broker_id, "zookeeper.connect": "sim:2181",
                               "log.dirs": log_dir, "min.insync.replicas": params.min_isr,
                               "replica.lag.time.max.ms": params.lag_time_max_ms})
        self.rm = SimReplicaManager(self, config=config, log_manager=self.log_manager,
                                    isr_writer=self.isr_writer,
                                    min_isr_for=lambda _topic: params.min_isr,
                                    log_config_for=lambda _topic: world.log_config,
                                    endpoint_of=lambda b: self.metadata.brokers.get(b), halt=_halt)
        # The request layer over the replica manager's partitions, as server.py wires it.
        self.data_apis = DataApis(self.rm.hosted, lambda _topic: world.log_config.max_message_bytes)
        self.fetchers: dict[TopicPartition, SimFetcher] = {}
        self.session = world.zk.new_session(broker_id)
        self.zk_connected = True
        self.disconnects = 0              # counts ZooKeeper disconnections (to match reconnects)
        self.broker_epoch = -1            # czxid of our registration, once registered

    def __repr__(self) -> str:
        return f"B{self.broker_id}#{self.number}"

    def fetcher(self, tp: TopicPartition) -> SimFetcher:
        if tp not in self.fetchers:
            self.fetchers[tp] = SimFetcher(self, tp)
        return self.fetchers[tp]

    def partition(self, tp: TopicPartition):
        return self.rm.partitions.get(tp)

    def shutdown_cleanly(self) -> None:
        """A clean stop: ReplicaManager.shutdown's checkpoints, flush and clean-shutdown marker."""
        self.alive = False
        for greenlet in self.greenlets:
            greenlet.kill(block=False)
        self.greenlets.clear()
        self.rm.checkpoint_high_watermarks()
        self.log_manager.close()

    def crash(self, power_loss: bool, rng: random.Random) -> dict[TopicPartition, str]:
        """End this process; returns what each log lost."""
        self.alive = False
        for greenlet in self.greenlets:
            greenlet.kill(block=False)    # they die with the process, wherever they wait
        self.greenlets.clear()
        logs = self.log_manager.all_logs()
        flushed = {tp: lg.recovery_point for tp, lg in logs.items()}
        for lg in logs.values():
            lg.close()                    # no flush: only the index pages reach the file
        lost = {}
        if power_loss:
            for tp, lg in sorted(logs.items()):
                kept, total = cut_unflushed(lg.dir, flushed[tp], rng)
                if kept < total:
                    lost[tp] = f"kept {kept} of {total} bytes (fsynced: offsets < {flushed[tp]})"
        return lost


def segment_files(log_dir: str) -> list[str]:
    if not os.path.isdir(log_dir):
        return []                         # a new log that was never written (created lazily)
    return sorted(os.path.join(log_dir, n) for n in os.listdir(log_dir) if n.endswith(".log"))


def log_bytes(log_dir: str) -> bytes:
    """The log's entries as stored: its segment files in offset order."""
    chunks = []
    for path in segment_files(log_dir):
        with open(path, "rb") as f:
            chunks.append(f.read())
    return b"".join(chunks)


def cut_unflushed(log_dir: str, recovery_point: int, rng: random.Random) -> tuple[int, int]:
    """Power loss: keep the log's bytes up to the fsynced offset ``recovery_point`` and a
    random part of the rest (on an entry boundary half the time); returns (kept, total)."""
    files = []
    for path in segment_files(log_dir):
        with open(path, "rb") as f:
            files.append((path, f.read()))
    flushed_pos, position, boundaries = 0, 0, []
    for _, data in files:
        for entry in iter_entries(data):
            end = position + entry.position + entry.size
            if entry.last_offset < recovery_point:
                flushed_pos = end
            boundaries.append(end)
        position += len(data)
    total = position
    candidates = [b for b in boundaries if b >= flushed_pos] + [flushed_pos]
    cut = rng.choice(candidates) if rng.random() < 0.5 else rng.randint(flushed_pos, total)
    start = 0
    for i, (path, data) in enumerate(files):
        end = start + len(data)
        if cut <= start and i > 0:
            os.unlink(path)
            index = path[:-4] + ".index"
            if os.path.exists(index):
                os.unlink(index)
        elif cut < end:
            os.truncate(path, max(0, cut - start))
        start = end
    return cut, total
