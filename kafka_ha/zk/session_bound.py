"""The controller's ZooKeeper requests: sent again after a connection loss, never across sessions.

Kafka's ZooKeeperClient (2.x) makes a request wait until the client is
connected and re-sends it after a connection loss; only the end of the
session ends it.  Without that, a request that meets a dying ZooKeeper server
fails its whole controller event: a broker change is lost, and with it the
watch its read would have set, so a dead broker's partitions stay leaderless.
Retrying whole events instead is unsafe: handlers update the controller's
context as they go, so a second run of a broker change sees no difference.

kazoo fails the requests in flight when the connection drops (ConnectionLoss)
and queues those made while it reconnects, so sending a failed request again
makes it wait for the next connection.  What it must not do is cross into
another session: after an expiry kazoo opens a new session on its own and
would run the request there, where this broker no longer owns
``/controller``.  So each request belongs to a session, the controller's
term if one is bound (``bind``) or else the session current when it was
made, and fails with ZkSessionExpired once that session has ended; the
controller then resigns.

Like the other stores' client (:mod:`kafka_ha.zk.mapped_client`), it raises
the project's errors (:mod:`kafka_ha.zk.errors`), never kazoo's: a refused
op of a multi is one too, and a session listener gets a :class:`SessionState`.

Every wait for an answer is bounded (:meth:`SessionBoundClient.await_answer`):
it re-checks the session every few seconds, so a request whose answer kazoo
lost when the session changed ends in ZkSessionExpired instead of holding the
controller's event loop for ever, and one unanswered for a minute in a live
session is sent again.

Sending a request again is safe for everything the controller store sends: a
read; a write of the same data; or a conditional write (version or create)
whose first attempt, if it landed, now fails with BadVersion or NodeExists,
which the store re-reads and compares (KAFKA-1382).
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterable, TypeVar

import gevent
from kazoo.client import KazooClient

from kafka_ha.zk import multi_read
from kafka_ha.zk.errors import ZkConnectionLost, ZkSessionExpired, translated, translated_error
from kafka_ha.zk.mapped_client import SessionState

log = logging.getLogger("kafka_ha.controller")
T = TypeVar("T")

WARN_INTERVAL_S = 5.0  # one warning per burst: a pipelined batch retries many requests at once
ANSWER_WAIT_SLICE_S = 5.0   # how often a wait for an answer re-checks its session
LOST_ANSWER_S = 60.0        # unanswered this long in a live session: taken for lost, sent again


def after_failure(error: BaseException, session: int | None,
                  current: int | None) -> BaseException | None:
    """None if a request of ``session`` that failed with ``error`` may be sent again now;
    otherwise the exception to raise.

    >>> after_failure(ZkConnectionLost(), 7, 7) is None    # same session: send it again
    True
    >>> type(after_failure(ZkConnectionLost(), 7, None)).__name__   # kazoo dropped the session
    'ZkSessionExpired'
    >>> type(after_failure(ZkConnectionLost(), 7, 8)).__name__      # a new one replaced it
    'ZkSessionExpired'
    >>> type(after_failure(ZkSessionExpired(), 7, 7)).__name__
    'ZkSessionExpired'
    >>> type(after_failure(ZkConnectionLost(), None, 7)).__name__   # made without a session
    'ZkConnectionLost'
    """
    if not isinstance(error, ZkConnectionLost) or session is None:
        return error
    if current != session:
        return ZkSessionExpired(f"ZooKeeper session 0x{session:x} ended during the request")
    return None


def retry_delay(attempt: int) -> float:
    """Seconds to wait before attempt ``attempt + 1``: the next connection is what a retry
    waits for, so this only keeps a server that drops every attempt from being hammered.

    >>> [retry_delay(n) for n in (1, 2, 3, 6, 20)]
    [0.05, 0.1, 0.2, 1.0, 1.0]
    """
    return min(0.05 * 2 ** (attempt - 1), 1.0)


class SessionBoundClient:
    """The subset of kazoo's client that the controller store uses, with requests retried.

    ``client`` is the raw kazoo client, for best-effort requests that must not wait.
    """

    def __init__(self, client: KazooClient) -> None:
        self.client = client
        self.handler = client.handler
        self.retries = 0
        self._term: int | None = None
        self._warned_at = float("-inf")

    @property
    def session_id(self) -> int | None:
        # kazoo's client_id is None while reconnecting; the session id it will
        # resume is kept until the session expires.
        return self.client._session_id

    def bind(self) -> None:
        """Tie every request from now on to the current session (the controller's term)."""
        self._term = self.session_id

    def unbind(self) -> None:
        self._term = None

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Call ``listener`` with each change of the session's state, on kazoo's callback
        greenlet: it must not block."""
        self.client.add_listener(lambda state: listener(SessionState(state)))

    def request_session(self) -> int | None:
        """The session a request made now belongs to; raises if the bound one has ended."""
        current = self.session_id
        if self._term is None:
            return current
        if current != self._term:
            raise ZkSessionExpired(f"the controller's ZooKeeper session 0x{self._term:x} has ended")
        return self._term

    def before_retry(self, what: str, error: BaseException, session: int | None,
                     attempt: int) -> None:
        """Raise unless the failed request may be sent again; then wait a little."""
        problem = after_failure(error, session, self.session_id)
        if problem is error:
            raise error
        if problem is not None:
            raise problem from error
        self.retries += 1
        now = time.monotonic()
        if now - self._warned_at >= WARN_INTERVAL_S:
            self._warned_at = now
            log.warning("ZooKeeper connection lost during %s; sending it again once reconnected "
                        "in session 0x%x", what, session)
        self.handler.sleep_func(retry_delay(attempt))

    def await_answer(self, what: str, result, session: int | None):
        """``result.get()``, bounded: ZkSessionExpired once ``session`` has ended, and
        ZkConnectionLost (so that the caller sends the request again) when no answer has
        come for LOST_ANSWER_S in a session that lives on."""
        waited = 0.0
        while True:
            try:
                return result.get(timeout=ANSWER_WAIT_SLICE_S)
            except (self.handler.timeout_exception, gevent.Timeout):
                waited += ANSWER_WAIT_SLICE_S
            if session is not None and self.session_id != session:
                raise ZkSessionExpired(f"ZooKeeper session 0x{session:x} ended while {what} "
                                       f"waited for its answer")
            if waited >= LOST_ANSWER_S:
                log.error("No answer to %s for %.0f s; sending it again", what, waited)
                raise ZkConnectionLost(f"no answer to {what} for {waited:.0f} s")

    def call(self, what: str, send: Callable[[], T]) -> T:
        """Run ``send`` (one or more requests that are safe to repeat) until it gets an answer."""
        return self.call_waiting(what, lambda _wait: send())

    def call_waiting(self, what: str, send: Callable[[Callable], T]) -> T:
        """As :meth:`call` for a ``send(wait)`` that awaits each of its kazoo answers with
        ``wait(result)``, bounded (:meth:`await_answer`)."""
        session = self.request_session()
        attempt = 0
        while True:
            try:
                with translated():
                    return send(lambda result: self.await_answer(what, result, session))
            except ZkConnectionLost as e:
                attempt += 1
                self.before_retry(what, e, session, attempt)

    # ---- kazoo's operations, retried ---------------------------------------

    def exists(self, path: str, watch: Callable | None = None):
        return self.call_waiting(f"exists {path}", lambda wait: wait(self.client.exists_async(path, watch=watch)))

    def get(self, path: str, watch: Callable | None = None):
        return self.call_waiting(f"get {path}", lambda wait: wait(self.client.get_async(path, watch=watch)))

    def get_children(self, path: str, watch: Callable | None = None):
        return self.call_waiting(f"get_children {path}",
                         lambda wait: wait(self.client.get_children_async(path, watch=watch)))

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False):
        return self.call_waiting(f"create {path}",
                         lambda wait: wait(self.client.create_async(path, value, ephemeral=ephemeral)))

    def delete(self, path: str, version: int = -1, recursive: bool = False):
        if recursive:   # kazoo's recursive delete is a sequence of its own synchronous calls
            return self.call_waiting(f"delete {path}",
                             lambda _wait: self.client.delete(path, version=version, recursive=True))
        return self.call_waiting(f"delete {path}",
                         lambda wait: wait(self.client.delete_async(path, version=version)))

    def get_async(self, path: str, watch: Callable | None = None) -> Pending:
        return Pending(self, f"get {path}", lambda: self.client.get_async(path, watch=watch))

    def get_many(self, paths: Iterable[str]) -> dict:
        paths = list(paths)
        return self.call_waiting(f"a read of {len(paths)} znodes",
                         lambda wait: multi_read.get_many(self.client, paths, wait))

    def get_children_many(self, paths: Iterable[str]) -> dict:
        paths = list(paths)
        return self.call_waiting(f"a read of the children of {len(paths)} znodes",
                         lambda wait: multi_read.get_children_many(self.client, paths, wait))

    def transaction(self) -> Transaction:
        return Transaction(self)


class Pending:
    """An asynchronous request, sent at once and sent again after a connection loss when
    its answer is awaited (so a batch stays pipelined on the first attempt)."""

    def __init__(self, owner: SessionBoundClient, what: str, send: Callable) -> None:
        self._owner = owner
        self._what = what
        self._send = send
        self._session = owner.request_session()
        with translated():
            self._result = send()

    def get(self):
        attempt = 0
        while True:
            try:
                with translated():
                    return self._owner.await_answer(self._what, self._result, self._session)
            except ZkConnectionLost as e:
                attempt += 1
                self._owner.before_retry(self._what, e, self._session, attempt)
                with translated():
                    self._result = self._send()


class PendingMulti(Pending):
    """A multi's results: one per op, a refused op's as the project's error (ZkBadVersion,
    ZkNoNode...) and the other ops of a refused multi as ZkRolledBack."""

    def get(self) -> list:
        return [translated_error(r) if isinstance(r, Exception) else r for r in super().get()]


class Transaction:
    """kazoo's multi builder; a commit is sent again, as a whole, after a connection loss."""

    def __init__(self, owner: SessionBoundClient) -> None:
        self._owner = owner
        self._ops = owner.client.transaction()  # validates and chroots each op as it is added

    def check(self, path: str, version: int) -> None:
        self._ops.check(path, version)

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False) -> None:
        self._ops.create(path, value, ephemeral=ephemeral)

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self._ops.set_data(path, value, version=version)

    def delete(self, path: str, version: int = -1) -> None:
        self._ops.delete(path, version=version)

    def commit_async(self) -> Pending:
        ops = list(self._ops.operations)
        return PendingMulti(self._owner, f"a multi of {len(ops)} operations", lambda: self._send(ops))

    def commit(self) -> list:
        return self.commit_async().get()

    def _send(self, ops: list):
        # A kazoo transaction commits once; each attempt is a fresh one with the same ops.
        txn = self._owner.client.transaction()
        txn.operations = list(ops)
        return txn.commit_async()
