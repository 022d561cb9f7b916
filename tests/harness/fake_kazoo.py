"""``FakeKazooClient``: a session on a ``FakeZooKeeper`` with the rest of kazoo's client API
that the broker's and the admin tools' stores use (through
:class:`kafka_ha.zk.mapped_client.MappedClient`), so that the real ``BrokerStore``,
``AdminStore`` and ``BenchStore`` run in memory.

What it adds to ``FakeZkClient``: the session's id and state (``client_id``,
``connected``, ``stop``), transactions, the async calls the bench store pipelines, and
ZooKeeper's multiRead request as :mod:`kafka_ha.zk.multi_read` sends it.  After
``stop()`` the session's ephemeral znodes are gone and every request fails with
kazoo's ConnectionClosedError, as on a stopped ``KazooClient``.  The connection never
drops, so connection listeners are kept but never called.
"""
from __future__ import annotations

from typing import Callable

from kazoo.exceptions import ConnectionClosedError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from kafka_ha.zk.multi_read import GET_CHILDREN, GET_DATA, MultiRead
from tests.harness.fake_zookeeper import FakeZkClient, FakeZooKeeper


class _Result:
    """A finished request, as kazoo's async result: ``get()`` returns or raises."""

    def __init__(self) -> None:
        self._value: object = None
        self._error: BaseException | None = None

    def set(self, value: object = None) -> None:
        self._value = value

    def set_exception(self, error: BaseException) -> None:
        self._error = error

    def get(self, block: bool = True, timeout: float | None = None) -> object:
        if self._error is not None:
            raise self._error
        return self._value


def _run(request: Callable[[], object]) -> _Result:
    result = _Result()
    try:
        result.set(request())
    except Exception as error:  # noqa: BLE001 - handed to the caller, as kazoo does
        result.set_exception(error)
    return result


class _Handler:
    """The part of kazoo's handler that multi_read uses."""

    @staticmethod
    def async_result() -> _Result:
        return _Result()


class _Transaction:
    """kazoo's TransactionRequest: operations collected, then committed all or none."""

    def __init__(self, client: FakeKazooClient) -> None:
        self._client = client
        self._ops: list[tuple] = []

    def create(self, path: str, value: bytes = b"", acl: object = None, ephemeral: bool = False,
               sequence: bool = False) -> None:
        self._ops.append(("create", path, value, ephemeral, sequence))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self._ops.append(("set", path, value, version))

    def check(self, path: str, version: int) -> None:
        self._ops.append(("check", path, version))

    def delete(self, path: str, version: int = -1) -> None:
        self._ops.append(("delete", path, version))

    def commit(self) -> list:
        return self._client.multi(self._ops)

    def commit_async(self) -> _Result:
        return _run(self.commit)


class FakeKazooClient(FakeZkClient):
    chroot = ""  # multi_read puts it before each path

    def __init__(self, zk: FakeZooKeeper, session_id: int) -> None:
        super().__init__(zk, session_id)
        self.connected = True
        self.handler = _Handler()
        self.listeners: list[Callable] = []

    @classmethod
    def on(cls, zk: FakeZooKeeper) -> FakeKazooClient:
        """A new session on ``zk``."""
        return cls(zk, zk.client().session_id)

    # ---- the session -------------------------------------------------------

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return (self.session_id, b"") if self.connected else None

    def add_listener(self, listener: Callable) -> None:
        self.listeners.append(listener)

    def stop(self) -> None:
        """End the session: its ephemeral znodes go, and requests fail from now on."""
        if self.connected:
            self.connected = False
            self.ensemble.expire(self.session_id)

    def close(self) -> None:
        self.stop()

    def _open(self) -> None:
        if not self.connected:
            raise ConnectionClosedError("Connection has been closed")

    # ---- requests ----------------------------------------------------------

    def exists(self, path: str, watch: Callable | None = None) -> ZnodeStat | None:
        self._open()
        return super().exists(path, watch)

    def get(self, path: str, watch: Callable | None = None) -> tuple[bytes, ZnodeStat]:
        self._open()
        return super().get(path, watch)

    def get_children(self, path: str, watch: Callable | None = None) -> list[str]:
        self._open()
        return super().get_children(path, watch)

    def _one(self, op: tuple):  # create, set and delete
        self._open()
        return super()._one(op)

    def multi(self, ops: list[tuple]) -> list:
        self._open()
        return super().multi(ops)

    def transaction(self) -> _Transaction:
        return _Transaction(self)

    def create_async(self, path: str, value: bytes = b"", acl: object = None,
                     ephemeral: bool = False, sequence: bool = False,
                     makepath: bool = False) -> _Result:
        return _run(lambda: self.create(path, value, ephemeral, sequence, makepath))

    def _call(self, request: object, result: _Result) -> None:
        """Send ``request`` as kazoo's connection would; only multiRead is known here."""
        if not isinstance(request, MultiRead):
            raise NotImplementedError(f"{type(request).__name__} is not faked")
        try:
            self._open()
        except ConnectionClosedError as error:
            result.set_exception(error)
            return
        answers = []
        for op_type, path in request.ops:
            assert op_type in (GET_DATA, GET_CHILDREN), op_type
            read = self.ensemble.get if op_type == GET_DATA else self.ensemble.get_children
            try:
                answers.append(read(path))
            except NoNodeError as error:  # each op of a multiRead fails on its own
                answers.append(error)
        result.set(answers)
