"""An in-memory ZooKeeper namespace for unit tests, with kazoo's method names and errors.

``FakeZooKeeper`` holds the znodes (data, version, czxid, ephemeral owner,
children) and the one-shot watches; ``FakeZooKeeper.client()`` opens a
``FakeZkClient``, one session, whose ``get``/``set``/``create``/``delete``/
``exists``/``get_children``/``ensure_path`` take the same arguments, return
the same values (``ZnodeStat``) and raise the same kazoo exceptions as
``KazooClient``'s.  So a test helper written against that subset runs against
the fake and against the real ensemble alike (tests/contract does both).

What it models, because the controller depends on it: versions that every
write bumps; conditional writes; a multi that applies all of its ops or none
(kazoo's result list, with the first failing op's error); a parent that must
exist and be empty to delete; sequential names from the parent's cversion;
ephemeral nodes that go with their session; and watches that fire once, as
kazoo's do (an exists watch on create, change and delete; a data watch on
change and delete; a child watch when a child comes or goes or the node is
deleted).  What it leaves out: ACLs, connection loss, and chroots.  Watches
fire synchronously, after the write that triggers them has been applied.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from kazoo.exceptions import (BadVersionError, NoChildrenForEphemeralsError, NodeExistsError,
                              NoNodeError, NotEmptyError, RolledBackError, RuntimeInconsistency)
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat


@dataclass
class _Znode:
    data: bytes
    czxid: int
    ctime: int
    ephemeral_owner: int = 0
    version: int = 0
    mzxid: int = 0
    mtime: int = 0
    cversion: int = 0
    pzxid: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> ZnodeStat:
        return ZnodeStat(self.czxid, self.mzxid or self.czxid, self.ctime, self.mtime or self.ctime,
                         self.version, self.cversion, 0, self.ephemeral_owner, len(self.data),
                         len(self.children), self.pzxid or self.czxid)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _check_path(path: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise ValueError(f"invalid znode path {path!r}")


class FakeZooKeeper:
    """The shared namespace: every session (``client()``) sees the same znodes."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Znode] = {"/": _Znode(b"", 0, 0)}
        self._zxid = 0
        self._sessions = itertools.count(0x1000)
        self._data_watches: dict[str, dict[Callable, None]] = {}
        self._child_watches: dict[str, dict[Callable, None]] = {}
        # path -> how many more writes to it another writer gets in first (see interfere)
        self._interference: dict[str, int] = {}

    def client(self) -> FakeZkClient:
        """A new session on this namespace."""
        return FakeZkClient(self, next(self._sessions))

    # ---- test-side controls ------------------------------------------------

    def interfere(self, path: str, times: int) -> None:
        """Before each of the next ``times`` writes or checks of ``path``, another writer
        rewrites it (same data, new version), so each of them meets a version conflict."""
        self._interference[path] = times

    def expire(self, session_id: int) -> None:
        """End a session: its ephemeral znodes go, as when ZooKeeper expires it."""
        owned = sorted((p for p, n in self._nodes.items() if n.ephemeral_owner == session_id),
                       reverse=True)
        for path in owned:
            self._transaction([("delete", path, -1)], session_id)

    # ---- reads -------------------------------------------------------------

    def node(self, path: str) -> _Znode:
        _check_path(path)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    def exists(self, path: str, watch: Callable | None = None) -> ZnodeStat | None:
        _check_path(path)
        if watch is not None:  # set even when the node is missing: it fires on create
            self._data_watches.setdefault(path, {})[watch] = None
        node = self._nodes.get(path)
        return node.stat() if node else None

    def get(self, path: str, watch: Callable | None = None) -> tuple[bytes, ZnodeStat]:
        node = self.node(path)  # a missing node raises and leaves no watch, as in ZooKeeper
        if watch is not None:
            self._data_watches.setdefault(path, {})[watch] = None
        return node.data, node.stat()

    def get_children(self, path: str, watch: Callable | None = None) -> list[str]:
        node = self.node(path)
        if watch is not None:
            self._child_watches.setdefault(path, {})[watch] = None
        return sorted(node.children)

    # ---- writes ------------------------------------------------------------

    def multi(self, ops: list[tuple], session_id: int) -> list:
        """Apply ``ops`` all or none and return kazoo's results: per op its result, or, when
        one fails, that op's error, RolledBackError before it and RuntimeInconsistency after.

        Ops: ("create", path, data, ephemeral, sequential), ("set", path, data, version),
        ("delete", path, version), ("check", path, version).
        """
        for kind, path, *_ in ops:
            if kind in ("set", "check", "delete") and self._interference.get(path, 0) > 0:
                self._interference[path] -= 1
                if path in self._nodes:
                    self._transaction([("set", path, self._nodes[path].data, -1)], 0)
        return self._transaction(ops, session_id)

    def _transaction(self, ops: list[tuple], session_id: int) -> list:
        self._zxid += 1  # one transaction, one zxid, as ZooKeeper does
        saved: dict[str, _Znode | None] = {}
        events: list[tuple[str, str]] = []
        results = []
        for i, op in enumerate(ops):
            try:
                results.append(self._apply(op, session_id, saved, events))
            except (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError,
                    NoChildrenForEphemeralsError) as error:
                for path, before in saved.items():  # roll back
                    if before is None:
                        self._nodes.pop(path, None)
                    else:
                        self._nodes[path] = before
                return ([RolledBackError()] * i + [error]
                        + [RuntimeInconsistency()] * (len(ops) - i - 1))
        for kind, path in events:
            self._fire(kind, path)
        return results

    def _save(self, path: str, saved: dict[str, _Znode | None]) -> None:
        if path not in saved:
            node = self._nodes.get(path)
            saved[path] = replace(node, children=set(node.children)) if node else None

    def _apply(self, op: tuple, session_id: int, saved: dict, events: list) -> object:
        kind, path = op[0], op[1]
        _check_path(path)
        now = int(time.time() * 1000)
        if kind == "create":
            _, _, data, ephemeral, sequential = op
            parent = self.node(_parent(path))
            if parent.ephemeral_owner:
                raise NoChildrenForEphemeralsError(path)
            if sequential:
                path = f"{path}{parent.cversion:010d}"
            if path in self._nodes:
                raise NodeExistsError(path)
            self._save(path, saved)
            self._save(_parent(path), saved)
            parent = self._nodes[_parent(path)]
            self._nodes[path] = _Znode(bytes(data), self._zxid, now,
                                       session_id if ephemeral else 0)
            parent.children.add(path.rsplit("/", 1)[1])
            parent.cversion += 1
            parent.pzxid = self._zxid
            events += [(EventType.CREATED, path), (EventType.CHILD, _parent(path))]
            return path
        node = self.node(path)
        version = op[-1]
        if version != -1 and version != node.version:
            raise BadVersionError(path)
        if kind == "check":
            return True
        if kind == "set":
            self._save(path, saved)
            node = self._nodes[path]
            node.data, node.version = bytes(op[2]), node.version + 1
            node.mzxid, node.mtime = self._zxid, now
            events.append((EventType.CHANGED, path))
            return node.stat()
        if kind == "delete":
            if node.children:
                raise NotEmptyError(path)
            self._save(path, saved)
            self._save(_parent(path), saved)
            del self._nodes[path]
            parent = self._nodes[_parent(path)]
            parent.children.discard(path.rsplit("/", 1)[1])
            parent.cversion += 1
            parent.pzxid = self._zxid
            events += [(EventType.DELETED, path), (EventType.CHILD, _parent(path))]
            return True
        raise ValueError(f"unknown op {kind!r}")

    def _fire(self, kind: str, path: str) -> None:
        # One-shot: the watches are taken off before any of them runs, as kazoo does.
        watches = []
        if kind in (EventType.CREATED, EventType.CHANGED, EventType.DELETED):
            watches += self._data_watches.pop(path, {})
        if kind in (EventType.CHILD, EventType.DELETED):
            watches += self._child_watches.pop(path, {})
        event = WatchedEvent(kind, KazooState.CONNECTED, path)
        for watch in watches:
            watch(event)


class FakeZkClient:
    """One session on a ``FakeZooKeeper``, with the subset of ``KazooClient`` tests use."""

    def __init__(self, zk: FakeZooKeeper, session_id: int) -> None:
        self.ensemble = zk
        self.session_id = session_id

    def _one(self, op: tuple):
        result = self.ensemble.multi([op], self.session_id)[0]
        if isinstance(result, Exception):
            raise result
        return result

    def exists(self, path: str, watch: Callable | None = None) -> ZnodeStat | None:
        return self.ensemble.exists(path, watch)

    def get(self, path: str, watch: Callable | None = None) -> tuple[bytes, ZnodeStat]:
        return self.ensemble.get(path, watch)

    def get_children(self, path: str, watch: Callable | None = None) -> list[str]:
        return self.ensemble.get_children(path, watch)

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False) -> str:
        if makepath:
            self.ensure_path(_parent(path))
        return self._one(("create", path, value, ephemeral, sequence))

    def ensure_path(self, path: str) -> None:
        parts = path.strip("/").split("/") if path != "/" else []
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            if self.exists(prefix) is None:
                try:
                    self.create(prefix)
                except NodeExistsError:
                    pass

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return self._one(("set", path, value, version))

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        if recursive:  # kazoo's recursive delete: children first, no version, gone is fine
            try:
                for child in self.get_children(path):
                    self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
                self._one(("delete", path, -1))
            except NoNodeError:
                pass
            return True
        return self._one(("delete", path, version))

    def multi(self, ops: list[tuple]) -> list:
        return self.ensemble.multi(ops, self.session_id)

    def call(self, _what: str, send: Callable):
        """Run a request that the real store would repeat after a connection loss (never here)."""
        return send()

    def close(self) -> None:
        """End this session (its ephemeral znodes go)."""
        self.ensemble.expire(self.session_id)
