"""The controller's ZooKeeper operations: election, epoch fencing, batched state writes.

It reports outcomes (written, conflict, missing, malformed) and never decides
policy; the controller decides.  Every write the controller makes after it won
is fenced: it goes into a multi that first checks the version of
``/controller_epoch``.  A failed check means another controller has taken over
since, and raises ``ControllerMoved`` so that this one resigns (KAFKA-6082).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError,
                              RolledBackError, RuntimeInconsistency, SessionExpiredError)

from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.client import create_parents, get_many
from kafka_ha.zk.errors import MalformedZnode

log = logging.getLogger("kafka_ha.controller")

# ZooKeeper refuses requests over jute.maxbuffer (1 MiB); a state set op is
# about 150 bytes, so 1,000 ops per multi stays far below it.
MULTI_CHUNK = 1000


class ControllerMoved(Exception):
    """Another broker is the controller now; this one must resign."""


@dataclass(frozen=True)
class Election:
    won: bool
    controller_id: int | None
    epoch: int = 0
    epoch_zk_version: int = -1


@dataclass
class WriteResult:
    """Outcome of a batch of conditional writes, per partition."""

    written: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    conflicts: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, str] = field(default_factory=dict)


class ControllerStore:
    def __init__(self, client: KazooClient, broker_id: int) -> None:
        self.zk = client
        self.broker_id = broker_id
        self.epoch_zk_version = -1

    # ---- election -------------------------------------------------------

    def controller_id(self, watch: Callable | None = None) -> int | None:
        """The registered controller, setting ``watch`` (an exists watch fires on create too)."""
        stat = self.zk.exists(zn.ControllerZNode.PATH, watch=watch)
        if stat is None:
            return None
        try:
            data, _ = self.zk.get(zn.ControllerZNode.PATH)
            return zn.ControllerZNode.decode(data, zn.ControllerZNode.PATH)
        except NoNodeError:
            return None
        except MalformedZnode as e:
            log.error("Ignoring malformed controller znode: %s", e)
            return -1

    def try_elect(self) -> Election:
        """Create ``/controller`` and bump ``/controller_epoch`` in one multi (KAFKA-6082).

        If the reply is lost (connection loss), re-read: owning ``/controller``
        in this session with the bumped epoch means the multi went through.
        """
        epoch, version = self._read_epoch()
        txn = self.zk.transaction()
        txn.create(zn.ControllerZNode.PATH,
                   zn.ControllerZNode.encode(self.broker_id, int(time.time() * 1000)),
                   ephemeral=True)
        txn.set_data(zn.ControllerEpochZNode.PATH, zn.ControllerEpochZNode.encode(epoch + 1),
                     version=version)
        try:
            results = txn.commit()
        except ConnectionLoss:
            results = [ConnectionLoss()]
        if not any(isinstance(r, Exception) for r in results):
            self.epoch_zk_version = results[1].version
            return Election(True, self.broker_id, epoch + 1, self.epoch_zk_version)
        return self._after_failed_election(epoch + 1)

    def _read_epoch(self) -> tuple[int, int]:
        try:
            data, stat = self.zk.get(zn.ControllerEpochZNode.PATH)
        except NoNodeError:
            # Kafka 2.1+ creates it as 0 and bumps it to 1 in the election
            # multi, so the first controller runs at epoch 1 either way.
            try:
                self.zk.create(zn.ControllerEpochZNode.PATH, zn.ControllerEpochZNode.encode(0))
            except NodeExistsError:
                pass
            data, stat = self.zk.get(zn.ControllerEpochZNode.PATH)
        return zn.ControllerEpochZNode.decode(data, zn.ControllerEpochZNode.PATH), stat.version

    def _after_failed_election(self, wanted_epoch: int) -> Election:
        try:
            data, owner_stat = self.zk.get(zn.ControllerZNode.PATH)
            owner = zn.ControllerZNode.decode(data, zn.ControllerZNode.PATH)
        except NoNodeError:
            return Election(False, None)
        except MalformedZnode:
            return Election(False, -1)
        epoch, version = self._read_epoch()
        if (owner == self.broker_id and owner_stat.ephemeralOwner == self.zk.client_id[0]
                and epoch == wanted_epoch):
            self.epoch_zk_version = version
            return Election(True, owner, epoch, version)
        return Election(False, owner)

    def resign(self) -> None:
        """Delete ``/controller`` if this session still owns it."""
        try:
            _, stat = self.zk.get(zn.ControllerZNode.PATH)
            if stat.ephemeralOwner == self.zk.client_id[0]:
                self.zk.delete(zn.ControllerZNode.PATH, version=stat.version)
        except (NoNodeError, BadVersionError, ConnectionLoss, SessionExpiredError):
            pass

    # ---- reads ----------------------------------------------------------

    def live_brokers(self, watch: Callable | None = None) -> dict[int, BrokerInfo]:
        ids = self.zk.get_children(zn.BROKER_IDS_PATH, watch=watch)
        paths = {zn.BrokerIdZNode.path(int(i)): int(i) for i in ids if i.isdigit()}
        brokers = {}
        for path, got in get_many(self.zk, paths).items():
            if got is None:
                continue  # gone between the listing and the read
            data, stat = got
            try:
                brokers[paths[path]] = zn.BrokerIdZNode.decode(data, path, czxid=stat.czxid)
            except MalformedZnode as e:
                log.error("Ignoring broker registration: %s", e)
        return brokers

    def topics(self, watch: Callable | None = None) -> list[str]:
        return self.zk.get_children(zn.BROKER_TOPICS_PATH, watch=watch)

    def topic_assignments(self, topics: Iterable[str],
                          watch_for: Callable[[str], Callable] | None = None
                          ) -> dict[str, TopicAssignment | None]:
        """Assignments by topic; None for a missing or malformed topic znode (logged)."""
        topics = list(topics)
        pending = [(t, self.zk.get_async(zn.TopicZNode.path(t),
                                         watch=watch_for(t) if watch_for else None))
                   for t in topics]
        out: dict[str, TopicAssignment | None] = {}
        for topic, result in pending:
            path = zn.TopicZNode.path(topic)
            try:
                data, stat = result.get()
                out[topic] = zn.TopicZNode.decode(data, path, zk_version=stat.version)
            except NoNodeError:
                out[topic] = None
            except MalformedZnode as e:
                log.error("Ignoring topic: %s", e)
                out[topic] = None
        return out

    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        paths = {azn.TopicConfigZNode.path(t): t for t in topics}
        out = {}
        for path, got in get_many(self.zk, paths).items():
            config = {}
            if got is not None:
                try:
                    config = azn.TopicConfigZNode.decode(got[0], path)
                except MalformedZnode as e:
                    log.error("Ignoring topic config: %s", e)
            out[paths[path]] = config
        return out

    def partition_states(self, partitions: Iterable[TopicPartition]
                         ) -> dict[TopicPartition, LeaderAndIsr | MalformedZnode | None]:
        """Current states with their versions; None if missing, the error if malformed."""
        paths = {zn.TopicPartitionStateZNode.path(*tp): tp for tp in partitions}
        out: dict[TopicPartition, LeaderAndIsr | MalformedZnode | None] = {}
        for path, got in get_many(self.zk, paths).items():
            tp = paths[path]
            if got is None:
                out[tp] = None
                continue
            try:
                out[tp] = zn.TopicPartitionStateZNode.decode(got[0], path, zk_version=got[1].version)
            except MalformedZnode as e:
                out[tp] = e
        return out

    # ---- fenced writes --------------------------------------------------

    def update_states(self, updates: dict[TopicPartition, LeaderAndIsr]) -> WriteResult:
        """Conditionally rewrite states at the ``zk_version`` each value carries."""
        ops = [(tp, zn.TopicPartitionStateZNode.path(*tp),
                zn.TopicPartitionStateZNode.encode(lai), lai) for tp, lai in updates.items()]
        return self._fenced_batches(ops, create=False)

    def create_states(self, creates: dict[TopicPartition, LeaderAndIsr]) -> WriteResult:
        """Create state znodes (and their data-less parents); an existing one is a conflict."""
        parents: dict[str, None] = {}
        for tp in creates:
            parents[zn.TopicPartitionsZNode.path(tp.topic)] = None
            parents[zn.TopicPartitionZNode.path(*tp)] = None
        create_parents(self.zk, parents)
        ops = [(tp, zn.TopicPartitionStateZNode.path(*tp),
                zn.TopicPartitionStateZNode.encode(lai), lai) for tp, lai in creates.items()]
        return self._fenced_batches(ops, create=True)

    def fenced_delete(self, path: str, version: int = -1) -> bool:
        """Delete a znode as the controller; False if it was already gone."""
        txn = self.zk.transaction()
        txn.check(zn.ControllerEpochZNode.PATH, self.epoch_zk_version)
        txn.delete(path, version=version)
        results = txn.commit()
        self._raise_if_fenced(results)
        return not isinstance(results[1], Exception)

    def _fenced_batches(self, ops: list, create: bool) -> WriteResult:
        result = WriteResult()
        chunks = [ops[i:i + MULTI_CHUNK] for i in range(0, len(ops), MULTI_CHUNK)]
        pending = [(chunk, self._fenced_txn(chunk, create).commit_async()) for chunk in chunks]
        retry_singly = []
        for chunk, async_result in pending:
            try:
                results = async_result.get()
            except (ConnectionLoss, SessionExpiredError) as e:
                # The multi may or may not have been applied; the caller
                # re-reads conflicts and compares content (KAFKA-1382).
                log.warning("Lost the reply to a batch of %d state writes (%s); re-reading them",
                            len(chunk), type(e).__name__)
                result.conflicts.extend(op[0] for op in chunk)
                continue
            self._raise_if_fenced(results)
            if not isinstance(results[0], Exception) and all(
                    not isinstance(r, Exception) for r in results[1:]):
                for (tp, _, _, lai), r in zip(chunk, results[1:]):
                    version = 0 if create else r.version
                    result.written[tp] = lai.with_zk_version(version)
                continue
            # ZooKeeper reports only the first failing op of a multi; the rest
            # are rolled back or unknown, so write them again one by one.
            for op, r in zip(chunk, results[1:]):
                if isinstance(r, (BadVersionError, NoNodeError, NodeExistsError)):
                    result.conflicts.append(op[0])
                elif isinstance(r, (RolledBackError, RuntimeInconsistency)) or not isinstance(r, Exception):
                    retry_singly.append(op)
                else:
                    result.failed[op[0]] = repr(r)
        if retry_singly:
            singles = [(op, self._fenced_txn([op], create).commit_async()) for op in retry_singly]
            for op, async_result in singles:
                try:
                    results = async_result.get()
                except (ConnectionLoss, SessionExpiredError):
                    result.conflicts.append(op[0])
                    continue
                self._raise_if_fenced(results)
                r = results[1]
                if not isinstance(r, Exception):
                    result.written[op[0]] = op[3].with_zk_version(0 if create else r.version)
                elif isinstance(r, (BadVersionError, NoNodeError, NodeExistsError)):
                    result.conflicts.append(op[0])
                else:
                    result.failed[op[0]] = repr(r)
        return result

    def _fenced_txn(self, ops: list, create: bool):
        txn = self.zk.transaction()
        txn.check(zn.ControllerEpochZNode.PATH, self.epoch_zk_version)
        for _, path, data, lai in ops:
            if create:
                txn.create(path, data)
            else:
                txn.set_data(path, data, version=lai.zk_version)
        return txn

    def _raise_if_fenced(self, results: list) -> None:
        if isinstance(results[0], BadVersionError) or isinstance(results[0], NoNodeError):
            raise ControllerMoved(
                f"/controller_epoch is no longer at version {self.epoch_zk_version}: "
                f"another controller has been elected")
