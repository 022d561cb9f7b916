"""The requests of the broker's and the admin tools' stores: kazoo's, with the project's errors.

The controller's store sends its requests through a ``SessionBoundClient``,
which re-sends them after a connection loss within the controller's session.
The broker's and the admin tools' stores send theirs through this client
instead: each request is sent once, because every caller already has its
own answer to a failure (a client gets an error code and retries, a watch
loop reads again, the controller re-runs the broker registration, a tool
reports "ZooKeeper is unavailable").  What it adds to kazoo is the error
mapping, in one place: a failed request raises one of the project's
:class:`~kafka_ha.zk.errors.ZkError` types, never kazoo's, and a watch
callback is handed a :class:`WatchEvent` rather than kazoo's event.
"""
from __future__ import annotations

import enum
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat

from kafka_ha import metrics
from kafka_ha.zk import multi_read
from kafka_ha.zk.errors import translated, translated_error


class WatchEvent(enum.Enum):
    """What a one-shot watch fired for."""

    CREATED = EventType.CREATED
    DELETED = EventType.DELETED
    CHANGED = EventType.CHANGED
    CHILD = EventType.CHILD
    # The connection dropped and the client forgot the watch: if the session
    # survives, whoever set it must set it again.
    DISCONNECTED = EventType.NONE


Watch = Callable[[WatchEvent], None]


class SessionState(enum.Enum):
    """The state of the client's ZooKeeper session, as a session listener is told it."""

    CONNECTED = KazooState.CONNECTED
    # Disconnected: the session may still live, if the client reconnects in time.
    SUSPENDED = KazooState.SUSPENDED
    # The session has expired: its ephemeral znodes and watches are gone.
    LOST = KazooState.LOST


class _TranslatedWatch:
    """A watch as kazoo calls it: equal to another for the same ``watch``, because kazoo
    keeps a path's watchers in a set, so that setting one watch twice (as a broker
    re-watching its registration after a reconnection does) calls it once."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch

    def __call__(self, event: WatchedEvent) -> None:
        self.watch(WatchEvent(event.type))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _TranslatedWatch) and other.watch == self.watch

    def __hash__(self) -> int:
        return hash(self.watch)


def _kazoo_watch(watch: Watch | None) -> _TranslatedWatch | None:
    return None if watch is None else _TranslatedWatch(watch)


@contextmanager
def _request() -> Iterator[None]:
    """One request (or batch) to ZooKeeper: errors translated, time counted
    (ZooKeeperRequestLatencyMs)."""
    started = time.monotonic()
    try:
        with translated():
            yield
    finally:
        metrics.zk_request_done((time.monotonic() - started) * 1000)


class MappedClient:
    """The subset of kazoo's client that the broker's and the admin tools' stores use."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client

    # ---- the session ---------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        """The current session's id; None while disconnected."""
        client_id = self.client.client_id
        return None if client_id is None else client_id[0]

    @property
    def connected(self) -> bool:
        return self.client.connected

    def on_connected(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever the client (re)connects, on kazoo's callback thread
        or greenlet: it must not block."""
        def listener(state: str) -> None:
            if state == KazooState.CONNECTED:
                callback()
        self.client.add_listener(listener)

    def close(self) -> None:
        with translated():
            self.client.stop()
            self.client.close()

    # ---- requests, each sent once ------------------------------------------

    def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        with _request():
            return self.client.exists(path, watch=_kazoo_watch(watch))

    def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat]:
        with _request():
            return self.client.get(path, watch=_kazoo_watch(watch))

    def get_children(self, path: str, watch: Watch | None = None) -> list[str]:
        with _request():
            return self.client.get_children(path, watch=_kazoo_watch(watch))

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False) -> str:
        """Create ``path``; returns the path created (with its sequence number, if any)."""
        with _request():
            return self.client.create(path, data, ephemeral=ephemeral, sequence=sequence,
                                      makepath=makepath)

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        with _request():
            return self.client.set(path, data, version=version)

    def delete(self, path: str, version: int = -1) -> None:
        with _request():
            self.client.delete(path, version=version)

    def ensure_path(self, path: str) -> None:
        with _request():
            self.client.ensure_path(path)

    def get_many(self, paths: Iterable[str]) -> dict[str, tuple[bytes, ZnodeStat] | None]:
        """Data and stat of many znodes in batched reads; a missing node maps to None."""
        with _request():
            return multi_read.get_many(self.client, paths)

    def multi(self, ops: Iterable[tuple[Any, ...]]) -> list:
        """Commit ``ops`` atomically: ("create", path, data), ("set", path, data, version),
        ("check", path, version) or ("delete", path, version).

        Returns one result per op; a refused op's result is the project's error
        (ZkNodeExists, ZkBadVersion...), and the others of a refused multi are
        ZkRolledBack.
        """
        with _request():
            txn = self.client.transaction()
            for kind, path, *rest in ops:
                if kind == "create":
                    txn.create(path, rest[0])
                elif kind == "set":
                    txn.set_data(path, rest[0], version=rest[1])
                elif kind == "check":
                    txn.check(path, rest[0])
                elif kind == "delete":
                    txn.delete(path, version=rest[0])
                else:
                    raise ValueError(f"unknown multi operation {kind!r}")
            results = txn.commit()
        return [translated_error(r) if isinstance(r, Exception) else r for r in results]
