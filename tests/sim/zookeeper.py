"""A simulated ZooKeeper: sessions, ephemeral registrations, versioned znodes, conditional writes.

Only what replication depends on: ``/brokers/ids/<id>`` (ephemeral, with a czxid
as the broker epoch of KIP-380), ``/controller`` (ephemeral) and
``/controller_epoch`` (versioned), and each partition's state znode, stored in
the project's own encoding (``TopicPartitionStateZNode``) with a version that
every conditional write must name.  Operations are plain method calls: the
caller (a :class:`~tests.sim.scheduler.Call`) decides when they reach the
server and when the answer comes back.  Errors are kazoo's exceptions, so the
code paths that handle them are the ones a real client takes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, SessionExpiredError

from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.zk import znodes as zn


class ControllerFenced(Exception):
    """A controller's write carried a controller-epoch version that is no longer current."""


@dataclass
class Session:
    session_id: int
    broker_id: int
    expired: bool = False


class SimZooKeeper:
    def __init__(self, on_brokers_changed: Callable[[], None],
                 on_controller_gone: Callable[[], None],
                 on_state_written: Callable[[TopicPartition, LeaderAndIsr, str], None]) -> None:
        self._zxid = 0
        self._next_session = 0
        self.sessions: dict[int, Session] = {}
        self.registrations: dict[int, tuple[int, int]] = {}     # broker -> (session, czxid)
        self.controller: tuple[int, int] | None = None          # (broker, session)
        self.controller_epoch = 0
        self.controller_epoch_version = 0
        self.states: dict[TopicPartition, tuple[bytes, int]] = {}
        self._decoded: dict[TopicPartition, LeaderAndIsr] = {}     # states, decoded once per write
        self.writes = 0
        self.conflicts = 0
        self._on_brokers_changed = on_brokers_changed
        self._on_controller_gone = on_controller_gone
        self._on_state_written = on_state_written

    # ---- sessions ------------------------------------------------------------

    def new_session(self, broker_id: int) -> int:
        self._next_session += 1
        self.sessions[self._next_session] = Session(self._next_session, broker_id)
        return self._next_session

    def session_alive(self, session_id: int) -> bool:
        s = self.sessions.get(session_id)
        return s is not None and not s.expired

    def _check(self, session_id: int) -> None:
        if not self.session_alive(session_id):
            raise SessionExpiredError()

    def expire(self, session_id: int) -> bool:
        """The server ends a session: its ephemeral znodes go, watches fire."""
        s = self.sessions.get(session_id)
        if s is None or s.expired:
            return False
        s.expired = True
        registered = [b for b, (sid, _) in self.registrations.items() if sid == session_id]
        for b in registered:
            del self.registrations[b]
        if registered:
            self._on_brokers_changed()
        if self.controller is not None and self.controller[1] == session_id:
            self.controller = None
            self._on_controller_gone()
        return True

    # ---- brokers -----------------------------------------------------------

    def register(self, session_id: int, broker_id: int) -> int:
        """Create ``/brokers/ids/<id>``; returns its czxid (the broker epoch)."""
        self._check(session_id)
        if broker_id in self.registrations:
            if self.registrations[broker_id][0] == session_id:
                return self.registrations[broker_id][1]
            raise NodeExistsError()
        self._zxid += 1
        self.registrations[broker_id] = (session_id, self._zxid)
        self._on_brokers_changed()
        return self._zxid

    def live_brokers(self) -> dict[int, int]:
        """Registered brokers and their epochs (czxid)."""
        return {b: czxid for b, (_, czxid) in sorted(self.registrations.items())}

    def get_live_brokers(self, session_id: int) -> dict[int, int]:
        """A client's read of the registrations."""
        self._check(session_id)
        return self.live_brokers()

    # ---- controller ----------------------------------------------------------

    def elect_controller(self, session_id: int, broker_id: int) -> tuple[int, int]:
        """Create ``/controller`` and bump ``/controller_epoch``; returns (epoch, epoch version)."""
        self._check(session_id)
        if self.controller is not None:
            raise NodeExistsError()
        self.controller = (broker_id, session_id)
        self.controller_epoch += 1
        self.controller_epoch_version += 1
        return self.controller_epoch, self.controller_epoch_version

    def get_controller(self, session_id: int) -> tuple[int | None, int]:
        """A client's read of ``/controller`` (its broker id, None if absent) and ``/controller_epoch``."""
        self._check(session_id)
        return (None if self.controller is None else self.controller[0]), self.controller_epoch

    def delete_controller(self) -> bool:
        """An operator (or a resigning controller) deletes ``/controller``."""
        if self.controller is None:
            return False
        self.controller = None
        self._on_controller_gone()
        return True

    # ---- partition states ----------------------------------------------------

    def get_state(self, session_id: int, tp: TopicPartition) -> LeaderAndIsr:
        self._check(session_id)
        return self.read_state(tp)

    def read_state(self, tp: TopicPartition) -> LeaderAndIsr:
        """The stored state with its version (also the checkers' view: no session needed)."""
        if tp not in self.states:
            raise NoNodeError()
        return self._decoded[tp]

    def set_raw(self, session_id: int, tp: TopicPartition, data: bytes, version: int, writer: str) -> int:
        """A leader's conditional write of the state znode's bytes; returns the new version."""
        self._check(session_id)
        state = zn.TopicPartitionStateZNode.decode(data, zn.TopicPartitionStateZNode.path(*tp))
        return self._set(tp, state, version, writer)

    def get_raw(self, session_id: int, tp: TopicPartition) -> tuple[bytes, int]:
        self._check(session_id)
        if tp not in self.states:
            raise NoNodeError()
        return self.states[tp]

    def controller_write(self, session_id: int, epoch_version: int, tp: TopicPartition,
                         state: LeaderAndIsr, version: int, writer: str) -> int:
        """The controller's write: a multi of "controller epoch version unchanged" and the
        conditional set (or a create when ``version`` is -1)."""
        self._check(session_id)
        if epoch_version != self.controller_epoch_version:
            raise ControllerFenced(f"controller epoch version {epoch_version} is not "
                                   f"{self.controller_epoch_version}")
        if version < 0:
            if tp in self.states:
                raise NodeExistsError()
            self._store(tp, state, 0)
            self.writes += 1
            self._on_state_written(tp, state.with_zk_version(0), writer)
            return 0
        return self._set(tp, state, version, writer)

    def controller_check(self, session_id: int, epoch_version: int, tp: TopicPartition, version: int) -> int:
        """The controller's version check of a state it decided to leave as it is (a fenced
        multi of "check"), so that a stale cached version shows up as a conflict."""
        self._check(session_id)
        if epoch_version != self.controller_epoch_version:
            raise ControllerFenced(f"controller epoch version {epoch_version} is not "
                                   f"{self.controller_epoch_version}")
        if tp not in self.states or self.states[tp][1] != version:
            self.conflicts += 1
            raise BadVersionError()
        return version

    def _store(self, tp: TopicPartition, state: LeaderAndIsr, version: int) -> None:
        self.states[tp] = (zn.TopicPartitionStateZNode.encode(state), version)
        self._decoded[tp] = state.with_zk_version(version)

    def _set(self, tp: TopicPartition, state: LeaderAndIsr, version: int, writer: str) -> int:
        if tp not in self.states:
            raise NoNodeError()
        _, current = self.states[tp]
        if current != version:
            self.conflicts += 1
            raise BadVersionError()
        self._store(tp, state, current + 1)
        self.writes += 1
        self._on_state_written(tp, state.with_zk_version(current + 1), writer)
        return current + 1
