"""The controller's ZooKeeper operations: election, reads, and the fenced writes of its term.

It reports outcomes (written, conflict, missing, malformed) and never decides
policy; the controller decides.  Every write the controller makes after it won
is fenced (:mod:`kafka_ha.zk.state_writes`, which also writes the partition
states in batches): a write after another controller took over raises
``ControllerMoved``, so that this one resigns (KAFKA-6082).
Every request goes through a ``SessionBoundClient``: a connection loss makes
it wait for the next connection and go again, within the controller's session.
Failures are the project's errors (:mod:`kafka_ha.zk.errors`); the end of the
session is ZkSessionExpired.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

from kazoo.client import KazooClient

from kafka_ha.clock import now_ms
from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.errors import (MalformedZnode, ZkBadVersion, ZkConnectionLost, ZkError,
                                ZkNodeExists, ZkNoNode, ZkRolledBack, translated)
from kafka_ha.zk.mapped_client import SessionState
from kafka_ha.zk.session_bound import SessionBoundClient
from kafka_ha.zk.state_writes import MULTI_CHUNK, FencedWrites

log = logging.getLogger("kafka_ha.controller")
T = TypeVar("T")

@dataclass(frozen=True)
class Election:
    won: bool
    controller_id: int | None
    epoch: int = 0
    epoch_zk_version: int = -1


class ControllerStore(FencedWrites):
    def __init__(self, client: KazooClient, broker_id: int) -> None:
        super().__init__(SessionBoundClient(client))
        self.broker_id = broker_id

    # ---- the session ----------------------------------------------------

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Call ``listener`` (which must not block) with each change of the session's state."""
        self.zk.add_session_listener(listener)

    def run_in_session(self, what: str, send: Callable[[], T]) -> T:
        """Run ``send``, requests that are safe to repeat (the broker registration), as the
        store runs its own: sent again after a connection loss, never in a later session."""
        return self.zk.call(what, send)

    # ---- election -------------------------------------------------------

    def controller_id(self, watch: Callable | None = None) -> int | None:
        """The registered controller, setting ``watch`` (an exists watch fires on create too)."""
        stat = self.zk.exists(zn.ControllerZNode.PATH, watch=watch)
        if stat is None:
            return None
        try:
            data, _ = self.zk.get(zn.ControllerZNode.PATH)
            return zn.ControllerZNode.decode(data, zn.ControllerZNode.PATH)
        except ZkNoNode:
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
                   zn.ControllerZNode.encode(self.broker_id, now_ms()),
                   ephemeral=True)
        txn.set_data(zn.ControllerEpochZNode.PATH, zn.ControllerEpochZNode.encode(epoch + 1),
                     version=version)
        try:
            results = txn.commit()
        except ZkConnectionLost as lost:
            results = [lost]
        if not any(isinstance(r, Exception) for r in results):
            self.epoch_zk_version = results[1].version
            self.zk.bind()  # the term lasts as long as this session
            return Election(True, self.broker_id, epoch + 1, self.epoch_zk_version)
        return self._after_failed_election(epoch + 1)

    def delete_controller_of_previous_process(self) -> bool:
        """Delete ``/controller`` if it names this broker under another session while this
        session holds the broker's registration: only a previous process of this broker,
        killed before its session expired, leaves that.  True if deleted."""
        try:
            data, stat = self.zk.get(zn.ControllerZNode.PATH)
            owner = zn.ControllerZNode.decode(data, zn.ControllerZNode.PATH)
            _, registration = self.zk.get(zn.BrokerIdZNode.path(self.broker_id))
            session = self.zk.session_id
            if owner != self.broker_id or session in (stat.ephemeralOwner, None) \
                    or registration.ephemeralOwner != session:
                return False
            self.zk.delete(zn.ControllerZNode.PATH, version=stat.version)
        except (ZkNoNode, ZkBadVersion, MalformedZnode):
            return False
        log.info("Deleted /controller left by the previous process of broker %d (session 0x%x)",
                 self.broker_id, stat.ephemeralOwner)
        return True

    def _read_epoch(self) -> tuple[int, int]:
        try:
            data, stat = self.zk.get(zn.ControllerEpochZNode.PATH)
        except ZkNoNode:
            # Kafka 2.1+ creates it as 0 and bumps it to 1 in the election
            # multi, so the first controller runs at epoch 1 either way.
            try:
                self.zk.create(zn.ControllerEpochZNode.PATH, zn.ControllerEpochZNode.encode(0))
            except ZkNodeExists:
                pass
            data, stat = self.zk.get(zn.ControllerEpochZNode.PATH)
        return zn.ControllerEpochZNode.decode(data, zn.ControllerEpochZNode.PATH), stat.version

    def _after_failed_election(self, wanted_epoch: int) -> Election:
        try:
            data, owner_stat = self.zk.get(zn.ControllerZNode.PATH)
            owner = zn.ControllerZNode.decode(data, zn.ControllerZNode.PATH)
        except ZkNoNode:
            return Election(False, None)
        except MalformedZnode:
            return Election(False, -1)
        epoch, version = self._read_epoch()
        if (owner == self.broker_id and owner_stat.ephemeralOwner == self.zk.session_id
                and epoch == wanted_epoch):
            self.epoch_zk_version = version
            self.zk.bind()
            return Election(True, owner, epoch, version)
        return Election(False, owner)

    def resign(self, delete_znode: bool) -> None:
        """End the term; with ``delete_znode`` delete ``/controller`` if this session owns it
        (raw, not retried: a broker shutting down must not wait for ZooKeeper)."""
        self.zk.unbind()
        self.epoch_zk_version = None  # no more writes until it wins again
        if not delete_znode:
            return
        try:
            with translated():
                _, stat = self.zk.client.get(zn.ControllerZNode.PATH)
                if stat.ephemeralOwner == self.zk.session_id:
                    self.zk.client.delete(zn.ControllerZNode.PATH, version=stat.version)
        except ZkError:
            pass  # gone, someone else's by now, or no connection: its session ends it

    # ---- reads ----------------------------------------------------------

    def live_brokers(self, watch: Callable | None = None) -> dict[int, BrokerInfo]:
        ids = self.zk.get_children(zn.BROKER_IDS_PATH, watch=watch)
        paths = {zn.BrokerIdZNode.path(int(i)): int(i) for i in ids if i.isdigit()}
        brokers = {}
        for path, got in self.zk.get_many(paths).items():
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
            except ZkNoNode:
                out[topic] = None
            except MalformedZnode as e:
                log.error("Ignoring topic: %s", e)
                out[topic] = None
        return out

    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        paths = {azn.TopicConfigZNode.path(t): t for t in topics}
        out = {}
        for path, got in self.zk.get_many(paths).items():
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
        for path, got in self.zk.get_many(paths).items():
            tp = paths[path]
            if got is None:
                out[tp] = None
                continue
            try:
                out[tp] = zn.TopicPartitionStateZNode.decode(got[0], path, zk_version=got[1].version)
            except MalformedZnode as e:
                out[tp] = e
        return out

    def isr_change_notifications(self, watch: Callable | None = None) -> list[str]:
        """Paths of the pending notifications, oldest first; sets a child watch."""
        children = self.zk.get_children(azn.IsrChangeNotificationZNode.PATH, watch=watch)
        return [f"{azn.IsrChangeNotificationZNode.PATH}/{c}" for c in sorted(children)
                if c.startswith("isr_change_")]

    def read_isr_change_notifications(self, paths: list[str]) -> set[TopicPartition]:
        changed: set[TopicPartition] = set()
        for path, got in self.zk.get_many(paths).items():
            if got is None:
                continue
            try:
                changed.update(azn.IsrChangeNotificationZNode.decode(got[0], path))
            except MalformedZnode as e:
                log.error("Ignoring ISR change notification: %s", e)
        return changed

    def read_admin_znode(self, path: str, decode: Callable, watch: Callable | None = None):
        """An admin request znode (reassignment, preferred election): (value, version).

        Sets an exists watch (it fires when the node is created, changed or
        deleted).  Returns (None, -1) if absent; raises MalformedZnode if it
        cannot be parsed, so the caller reports and removes it.
        """
        if self.zk.exists(path, watch=watch) is None:
            return None, -1
        try:
            data, stat = self.zk.get(path)
        except ZkNoNode:
            return None, -1
        return decode(data, path), stat.version

    def deletion_markers(self, watch: Callable | None = None) -> list[str]:
        return self.zk.get_children(zn.DELETE_TOPICS_PATH, watch=watch)

    def delete_topic_znodes(self, topic: str) -> None:
        """The last step of topic deletion: states, assignment, config and marker, all fenced.

        Children go before their parents, a thousand deletes to a fenced multi,
        so a controller deposed meanwhile (whose StopReplica round may have
        been cut short) deletes nothing from the moment it lost the epoch.
        """
        paths = self._subtree(zn.TopicZNode.path(topic))[::-1]
        paths += [p for p in (azn.TopicConfigZNode.path(topic), azn.DeleteTopicZNode.path(topic))
                  if self.zk.exists(p) is not None]
        self.fenced_delete_all(paths)

    def fenced_delete_all(self, paths: list[str]) -> int:
        """Delete ``paths`` as the controller, in order, a thousand to a fenced multi (a round
        trip each, where the event that deletes them waits); one already gone is skipped.
        How many went."""
        deleted = 0
        for start in range(0, len(paths), MULTI_CHUNK - 1):
            chunk = paths[start:start + MULTI_CHUNK - 1]
            while chunk:
                results = self._fenced_deletes(chunk).commit()
                self._raise_if_fenced(results)
                # ZooKeeper names the op that failed (the rest are rolled back): a znode
                # gone since the listing leaves the chunk, which goes again without it.
                failed = [(path, r) for path, r in zip(chunk, results[1:])
                          if isinstance(r, Exception) and not isinstance(r, ZkRolledBack)]
                if not failed:
                    if any(isinstance(r, Exception) for r in results):
                        # Rolled back with no delete to blame (not expected of ZooKeeper
                        # once the fence passed): say so rather than count them deleted.
                        raise next(r for r in results if isinstance(r, Exception))
                    deleted += len(chunk)
                    break
                for _, error in failed:
                    if not isinstance(error, ZkNoNode):
                        raise error
                gone = {path for path, _ in failed}
                chunk = [path for path in chunk if path not in gone]
        return deleted

    def _subtree(self, root: str) -> list[str]:
        """``root`` and every znode under it, parents before children; [] if ``root`` is gone."""
        found: list[str] = []
        level = [root]
        while level:
            children = self.zk.get_children_many(level)
            found += [p for p in level if children[p] is not None]
            level = [f"{p}/{c}" for p in level for c in children[p] or ()]
        return found

    def write_assignment(self, topic: str, partitions: dict[int, tuple[int, ...]]) -> None:
        """Rewrite ``/brokers/topics/<t>`` (a reassignment's last step), fenced."""
        self.fenced_set(zn.TopicZNode.path(topic),
                        zn.TopicZNode.encode(TopicAssignment(topic, partitions)))

