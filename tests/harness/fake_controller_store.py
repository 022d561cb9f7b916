"""``FakeControllerStore``: the controller's store (kafka_ha/zk/controller_store.py) in memory.

Same public methods, same outcomes: the election multi that creates
``/controller`` and bumps ``/controller_epoch``; every write fenced by the
version of ``/controller_epoch`` (``ControllerMoved`` once another controller
was elected); conditional state writes sorted into written, conflicts and
failed; missing znodes as None and malformed ones as the real store reports
them; one-shot watches.  The znodes live in a ``FakeZooKeeper`` as the bytes
the real codecs write, so a hand-written malformed znode fails to decode here
as it does against ZooKeeper.  tests/contract/test_controller_store.py runs
the same tests against this and against the real store, which keeps the two
in step.

Like the real store it raises the project's errors (kafka_ha/zk/errors.py),
never kazoo's, and runs the requests it is given to repeat (the broker
registration) once.  It is simpler than the real store because nothing here
can be lost on the way: each partition's ops are one fenced multi, applied when submitted (as
ZooKeeper applies a pipelined multi while the caller goes on), and reported
by ``collect``.

The functions at the end change the namespace as other parties would (a
broker registering, another controller taking over, a leader rewriting a
state); they take any kazoo-like client, so contract tests use them on a real
``KazooClient`` too.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterable

from kazoo.exceptions import NoNodeError

from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.controller_store import Election
from kafka_ha.zk.errors import (MalformedZnode, ZkBadVersion, ZkNodeExists, ZkNoNode, ZkRolledBack,
                                error_text, translated, translated_error)
from kafka_ha.zk.mapped_client import SessionState
from kafka_ha.zk.state_writes import ControllerMoved, WriteResult
from tests.harness.fake_zookeeper import FakeZkClient

log = logging.getLogger("kafka_ha.controller")

EPOCH_PATH = zn.ControllerEpochZNode.PATH
CONTROLLER_PATH = zn.ControllerZNode.PATH


class _ProjectErrors:
    """A fake session whose requests fail with the project's errors, as the real store's do."""

    def __init__(self, client: FakeZkClient) -> None:
        self.client = client
        self.session_id = client.session_id

    def __getattr__(self, name: str) -> Callable:
        request = getattr(self.client, name)

        def send(*args, **kwargs):
            with translated():
                return request(*args, **kwargs)
        return send

    def multi(self, ops: list[tuple]) -> list:
        return [translated_error(r) if isinstance(r, Exception) else r for r in self.client.multi(ops)]


class FakeControllerStore:
    def __init__(self, zk: FakeZkClient, broker_id: int) -> None:
        self.zk = _ProjectErrors(zk)
        self.broker_id = broker_id
        self.epoch_zk_version: int | None = None  # outside a term
        self.session_listeners: list[Callable[[SessionState], None]] = []

    # ---- the session ----------------------------------------------------

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Kept for a test to call: the fake's sessions change only when a test says so."""
        self.session_listeners.append(listener)

    def run_in_session(self, _what: str, send: Callable):
        """Run requests the real store would repeat after a connection loss (never lost here)."""
        return send()

    # ---- election -------------------------------------------------------

    def controller_id(self, watch: Callable | None = None) -> int | None:
        if self.zk.exists(CONTROLLER_PATH, watch=watch) is None:
            return None
        try:
            return zn.ControllerZNode.decode(self.zk.get(CONTROLLER_PATH)[0], CONTROLLER_PATH)
        except ZkNoNode:
            return None
        except MalformedZnode as e:
            log.error("Ignoring malformed controller znode: %s", e)
            return -1

    def try_elect(self) -> Election:
        epoch, version = self._read_epoch()
        results = self.zk.multi([
            ("create", CONTROLLER_PATH, zn.ControllerZNode.encode(self.broker_id, _now_ms()), True,
             False),
            ("set", EPOCH_PATH, zn.ControllerEpochZNode.encode(epoch + 1), version)])
        if not _failed(results):
            self.epoch_zk_version = results[1].version
            return Election(True, self.broker_id, epoch + 1, self.epoch_zk_version)
        try:
            data, owner_stat = self.zk.get(CONTROLLER_PATH)
            owner = zn.ControllerZNode.decode(data, CONTROLLER_PATH)
        except ZkNoNode:
            return Election(False, None)
        except MalformedZnode:
            return Election(False, -1)
        epoch_now, version = self._read_epoch()
        if (owner == self.broker_id and owner_stat.ephemeralOwner == self.zk.session_id
                and epoch_now == epoch + 1):
            self.epoch_zk_version = version
            return Election(True, owner, epoch_now, version)
        return Election(False, owner)

    def delete_controller_of_previous_process(self) -> bool:
        try:
            data, stat = self.zk.get(CONTROLLER_PATH)
            owner = zn.ControllerZNode.decode(data, CONTROLLER_PATH)
            _, registration = self.zk.get(zn.BrokerIdZNode.path(self.broker_id))
            session = self.zk.session_id
            if owner != self.broker_id or stat.ephemeralOwner == session \
                    or registration.ephemeralOwner != session:
                return False
            self.zk.delete(CONTROLLER_PATH, version=stat.version)
        except (ZkNoNode, ZkBadVersion, MalformedZnode):
            return False
        return True

    def _read_epoch(self) -> tuple[int, int]:
        try:
            data, stat = self.zk.get(EPOCH_PATH)
        except ZkNoNode:
            try:
                self.zk.create(EPOCH_PATH, zn.ControllerEpochZNode.encode(0))
            except ZkNodeExists:
                pass
            data, stat = self.zk.get(EPOCH_PATH)
        return zn.ControllerEpochZNode.decode(data, EPOCH_PATH), stat.version

    def resign(self, delete_znode: bool) -> None:
        self.epoch_zk_version = None
        if not delete_znode:
            return
        try:
            _, stat = self.zk.get(CONTROLLER_PATH)
            if stat.ephemeralOwner == self.zk.session_id:
                self.zk.delete(CONTROLLER_PATH, version=stat.version)
        except (ZkNoNode, ZkBadVersion):
            pass

    # ---- reads ----------------------------------------------------------

    def live_brokers(self, watch: Callable | None = None) -> dict[int, BrokerInfo]:
        brokers = {}
        for child in self.zk.get_children(zn.BROKER_IDS_PATH, watch=watch):
            if not child.isdigit():
                continue
            path = zn.BrokerIdZNode.path(int(child))
            try:
                data, stat = self.zk.get(path)
                brokers[int(child)] = zn.BrokerIdZNode.decode(data, path, czxid=stat.czxid)
            except ZkNoNode:
                continue
            except MalformedZnode as e:
                log.error("Ignoring broker registration: %s", e)
        return brokers

    def topics(self, watch: Callable | None = None) -> list[str]:
        return self.zk.get_children(zn.BROKER_TOPICS_PATH, watch=watch)

    def topic_assignments(self, topics: Iterable[str],
                          watch_for: Callable[[str], Callable] | None = None
                          ) -> dict[str, TopicAssignment | None]:
        out: dict[str, TopicAssignment | None] = {}
        for topic in topics:
            path = zn.TopicZNode.path(topic)
            try:
                data, stat = self.zk.get(path, watch=watch_for(topic) if watch_for else None)
                out[topic] = zn.TopicZNode.decode(data, path, zk_version=stat.version)
            except ZkNoNode:
                out[topic] = None
            except MalformedZnode as e:
                log.error("Ignoring topic: %s", e)
                out[topic] = None
        return out

    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        out = {}
        for topic in topics:
            path = azn.TopicConfigZNode.path(topic)
            out[topic] = {}
            try:
                out[topic] = azn.TopicConfigZNode.decode(self.zk.get(path)[0], path)
            except ZkNoNode:
                pass
            except MalformedZnode as e:
                log.error("Ignoring topic config: %s", e)
        return out

    def partition_states(self, partitions: Iterable[TopicPartition]
                         ) -> dict[TopicPartition, LeaderAndIsr | MalformedZnode | None]:
        out: dict[TopicPartition, LeaderAndIsr | MalformedZnode | None] = {}
        for tp in partitions:
            path = zn.TopicPartitionStateZNode.path(*tp)
            try:
                data, stat = self.zk.get(path)
                out[tp] = zn.TopicPartitionStateZNode.decode(data, path, zk_version=stat.version)
            except ZkNoNode:
                out[tp] = None
            except MalformedZnode as e:
                out[tp] = e
        return out

    def isr_change_notifications(self, watch: Callable | None = None) -> list[str]:
        children = self.zk.get_children(azn.IsrChangeNotificationZNode.PATH, watch=watch)
        return [f"{azn.IsrChangeNotificationZNode.PATH}/{c}" for c in sorted(children)
                if c.startswith("isr_change_")]

    def read_isr_change_notifications(self, paths: list[str]) -> set[TopicPartition]:
        changed: set[TopicPartition] = set()
        for path in paths:
            try:
                changed.update(azn.IsrChangeNotificationZNode.decode(self.zk.get(path)[0], path))
            except ZkNoNode:
                continue
            except MalformedZnode as e:
                log.error("Ignoring ISR change notification: %s", e)
        return changed

    def read_admin_znode(self, path: str, decode: Callable, watch: Callable | None = None):
        if self.zk.exists(path, watch=watch) is None:
            return None, -1
        try:
            data, stat = self.zk.get(path)
        except ZkNoNode:
            return None, -1
        return decode(data, path), stat.version

    def deletion_markers(self, watch: Callable | None = None) -> list[str]:
        return self.zk.get_children(zn.DELETE_TOPICS_PATH, watch=watch)

    # ---- fenced writes --------------------------------------------------

    def delete_topic_znodes(self, topic: str) -> None:
        """Every znode of the topic, children first, in one fenced multi."""
        paths = self._subtree(zn.TopicZNode.path(topic))[::-1]
        paths += [p for p in (azn.TopicConfigZNode.path(topic), azn.DeleteTopicZNode.path(topic))
                  if self.zk.exists(p) is not None]
        if not paths:
            return  # as the real store: no multi, so no fence to meet
        results = self._fenced([("delete", path, -1) for path in paths])
        if _failed(results):
            raise next(r for r in results[1:] if not _rolled_back(r))

    def _subtree(self, path: str) -> list[str]:
        """``path`` and everything under it, parents first; [] if it is gone."""
        try:
            children = self.zk.get_children(path)
        except ZkNoNode:
            return []
        return [path] + [p for c in children for p in self._subtree(f"{path}/{c}")]

    def write_assignment(self, topic: str, partitions: dict[int, tuple[int, ...]]) -> None:
        self.fenced_set(zn.TopicZNode.path(topic),
                        zn.TopicZNode.encode(TopicAssignment(topic, partitions)))

    def fenced_set(self, path: str, data: bytes) -> None:
        results = self._fenced([("set", path, data, -1)])
        if _failed(results):
            raise results[1]

    def fenced_delete(self, path: str, version: int = -1) -> bool:
        return not _failed(self._fenced([("delete", path, version)]))

    def fenced_delete_all(self, paths: list[str]) -> int:
        """As the real store's (which batches them into multis): the ones gone are skipped."""
        return sum(self.fenced_delete(path) for path in paths)

    def update_states(self, updates: dict[TopicPartition, LeaderAndIsr]) -> WriteResult:
        return self.collect([self.submit_updates(updates)])

    def submit_updates(self, updates: dict[TopicPartition, LeaderAndIsr],
                       checks: dict[TopicPartition, LeaderAndIsr] | None = None) -> list:
        """Apply each partition's write (or version check) now; ``collect`` reports them."""
        submitted = []
        for tp, lai in updates.items():
            path = zn.TopicPartitionStateZNode.path(*tp)
            op = ("set", path, zn.TopicPartitionStateZNode.encode(lai), lai.zk_version)
            submitted.append((tp, lai, self._fenced_outcome([op])))
        for tp, lai in (checks or {}).items():
            op = ("check", zn.TopicPartitionStateZNode.path(*tp), lai.zk_version)
            submitted.append((tp, lai, self._fenced_outcome([op])))
        return submitted

    def create_states(self, creates: dict[TopicPartition, LeaderAndIsr]) -> WriteResult:
        """Create state znodes with their missing data-less parents; an existing one conflicts."""
        submitted = []
        for tp, lai in creates.items():
            ops = [("create", path, b"", False, False)
                   for path in (zn.TopicPartitionsZNode.path(tp.topic), zn.TopicPartitionZNode.path(*tp))
                   if self.zk.exists(path) is None]
            ops.append(("create", zn.TopicPartitionStateZNode.path(*tp),
                        zn.TopicPartitionStateZNode.encode(lai), False, False))
            submitted.append((tp, lai, self._fenced_outcome(ops)))
        return self.collect([submitted])

    def collect(self, submissions: list[list]) -> WriteResult:
        result = WriteResult()
        for submitted in submissions:
            for tp, lai, outcome in submitted:
                if isinstance(outcome, ControllerMoved):
                    raise outcome
                if isinstance(outcome, (ZkBadVersion, ZkNoNode, ZkNodeExists)):
                    result.conflicts.append(tp)
                elif isinstance(outcome, Exception):
                    result.failed[tp] = error_text(outcome)
                else:
                    result.written[tp] = lai.with_zk_version(outcome)
        return result

    def _fenced_outcome(self, ops: list[tuple]) -> int | Exception:
        """The new version of the last op's znode (or the checked one), or the error."""
        try:
            results = self._fenced(ops)
        except ControllerMoved as moved:
            return moved
        if _failed(results):
            return next(r for r in results[1:] if not _rolled_back(r))
        last = results[-1]
        if ops[-1][0] == "check":
            return ops[-1][2]
        return last.version if hasattr(last, "version") else 0

    def _fenced(self, ops: list[tuple]) -> list:
        """Run ``ops`` in one multi behind a check of ``/controller_epoch``'s version."""
        if self.epoch_zk_version is None:
            raise ControllerMoved("this broker is not the controller")
        results = self.zk.multi([("check", EPOCH_PATH, self.epoch_zk_version)] + ops)
        if isinstance(results[0], (ZkBadVersion, ZkNoNode)):
            raise ControllerMoved(f"/controller_epoch is no longer at version "
                                  f"{self.epoch_zk_version}: another controller has been elected")
        return results


def _failed(results: list) -> bool:
    return any(isinstance(r, Exception) for r in results)


def _rolled_back(result: object) -> bool:
    return isinstance(result, ZkRolledBack)


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---- other parties' writes, on any kazoo-like client --------------------------------------

def prepare_namespace(zk) -> None:
    """The paths a broker creates at start-up (what the controller expects to find)."""
    for path in zn.PERSISTENT_PATHS:
        zk.ensure_path(path)


def register_broker(zk, broker_id: int, host: str = "127.0.0.1", port: int | None = None) -> None:
    """Register ``broker_id`` as an ephemeral of ``zk``'s session (a new czxid each time)."""
    info = BrokerInfo(broker_id, host, port or 9000 + broker_id, timestamp_ms=_now_ms())
    zk.create(zn.BrokerIdZNode.path(broker_id), zn.BrokerIdZNode.encode(info), ephemeral=True,
              makepath=True)


def deregister_broker(zk, broker_id: int) -> None:
    zk.delete(zn.BrokerIdZNode.path(broker_id))


def write_topic(zk, topic: str, partitions: dict[int, tuple[int, ...]]) -> None:
    """Create ``/brokers/topics/<topic>`` as the topic tools do (the controller does the rest)."""
    zk.create(zn.TopicZNode.path(topic), zn.TopicZNode.encode(TopicAssignment(topic, partitions)),
              makepath=True)


def write_topic_partitions(zk, topic: str, partitions: dict[int, tuple[int, ...]]) -> None:
    """Rewrite an existing ``/brokers/topics/<topic>`` (partitions added or reassigned)."""
    zk.set(zn.TopicZNode.path(topic), zn.TopicZNode.encode(TopicAssignment(topic, partitions)))


def write_state(zk, tp: TopicPartition, state: LeaderAndIsr) -> None:
    """Rewrite a partition's state underneath the controller (as a leader changing its ISR)."""
    zk.set(zn.TopicPartitionStateZNode.path(*tp), zn.TopicPartitionStateZNode.encode(state))


def read_state(zk, tp: TopicPartition) -> LeaderAndIsr | None:
    path = zn.TopicPartitionStateZNode.path(*tp)
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return None
    return zn.TopicPartitionStateZNode.decode(data, path, zk_version=stat.version)


def take_over(zk, broker_id: int) -> int:
    """Another broker becomes controller: ``/controller`` is replaced and the epoch bumped,
    which deposes whoever held it.  Returns the new epoch."""
    try:
        zk.delete(CONTROLLER_PATH)
    except NoNodeError:
        pass
    data, stat = zk.get(EPOCH_PATH)
    epoch = zn.ControllerEpochZNode.decode(data) + 1
    zk.set(EPOCH_PATH, zn.ControllerEpochZNode.encode(epoch), version=stat.version)
    zk.create(CONTROLLER_PATH, zn.ControllerZNode.encode(broker_id, _now_ms()), ephemeral=True)
    return epoch


def change_isr(zk, tp: TopicPartition, isr: tuple[int, ...]) -> LeaderAndIsr:
    """What a leader does when its ISR changes: rewrite the state (same leader and epoch)
    and leave an ISR change notification for the controller."""
    current = read_state(zk, tp)
    new = LeaderAndIsr(current.leader, current.leader_epoch, isr, current.controller_epoch)
    zk.set(zn.TopicPartitionStateZNode.path(*tp), zn.TopicPartitionStateZNode.encode(new),
           version=current.zk_version)
    zk.create(azn.IsrChangeNotificationZNode.PREFIX, azn.IsrChangeNotificationZNode.encode([tp]),
              sequence=True)
    return new
