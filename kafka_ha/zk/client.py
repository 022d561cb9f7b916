"""Connecting to ZooKeeper: kazoo on gevent, with the chroot created if missing.

Everything in a broker runs on gevent, so kazoo uses its sequential gevent
handler: watch callbacks run one at a time on one greenlet and must not block
(ours only put an event on a queue).
"""
from __future__ import annotations

import fcntl
import logging
import struct
import termios

import gevent
from gevent.event import Event
from gevent.socket import wait_write
from kazoo.client import KazooClient
from kazoo.handlers.gevent import SequentialGeventHandler
from kazoo.protocol.states import KeeperState

from kafka_ha.zk.errors import ZkTimeout, translated

log = logging.getLogger(__name__)


def split_chroot(connect: str) -> tuple[str, str]:
    """``"h1:1,h2:2/kafka"`` -> ``("h1:1,h2:2", "/kafka")``.

    >>> split_chroot("127.0.0.1:2181,127.0.0.1:2182/a/b")
    ('127.0.0.1:2181,127.0.0.1:2182', '/a/b')
    >>> split_chroot("127.0.0.1:2181")
    ('127.0.0.1:2181', '')
    """
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    return connect[:slash], connect[slash:].rstrip("/")


def connect(connect_string: str, session_timeout_ms: int,
            connection_timeout_ms: int | None = None, use_gevent: bool = True,
            create_chroot: bool = True) -> KazooClient:
    """A started client; the chroot in the connect string is created if missing
    (unless ``create_chroot`` is False: a reader has no business creating it).

    Kafka creates its chroot at start-up too, so ``zookeeper.connect`` with a
    fresh ``/chroot`` works without an extra admin step.

    Fails with the project's errors: ZkTimeout if no connection came within the
    connection timeout, ZkConnectionLost if it dropped while creating the chroot.
    """
    hosts, chroot = split_chroot(connect_string)
    timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000.0
    if chroot and create_chroot:
        bootstrap = _client(hosts, session_timeout_ms, use_gevent)
        _start(bootstrap, hosts, timeout_s)
        try:
            with translated():
                bootstrap.ensure_path(chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()
    client = _client(connect_string, session_timeout_ms, use_gevent)
    _start(client, connect_string, timeout_s)
    return client


def _start(client: KazooClient, hosts: str, timeout_s: float) -> None:
    try:
        client.start(timeout=timeout_s)
    except client.handler.timeout_exception as e:
        # gevent's handler raises a gevent.Timeout, a BaseException that no
        # ``except Exception`` (nor translated()) would catch.  kazoo has closed the client.
        raise ZkTimeout(f"no connection to ZooKeeper at {hosts} within {timeout_s:g} s") from e


def _client(hosts: str, session_timeout_ms: int, use_gevent: bool) -> KazooClient:
    # kazoo retries connection attempts forever by default; that is what a
    # broker wants (it must come back when the ensemble does).
    kwargs = {"hosts": hosts, "timeout": session_timeout_ms / 1000.0,
              "connection_retry": {"max_tries": -1, "max_delay": 1.0}}
    if use_gevent:
        return GeventKazooClient(handler=SequentialGeventHandler(), **kwargs)
    return KazooClient(**kwargs)


class GeventKazooClient(KazooClient):
    """kazoo's client, whose callers never block on its wake-up pipe.

    kazoo queues each request and writes a byte to a socketpair that wakes its
    connection greenlet, which sends one queued request per byte.  The pipe holds
    about 200 bytes; a burst of requests (a controller reading 1,000 new topics)
    fills it, and the caller then waits in that write.  gevent lets one greenlet
    wait on a socket at a time: a second caller (a LeaderAndIsr handler reading a
    topic config during the controller's burst) gets an error there, and so does a
    greenlet killed or timed out while it waits.  kazoo catches it, fails that
    request with "Connection has been closed" and leaves it queued without a byte,
    so every later request goes out one behind, and the last ones never: a
    controller waited for good on an answer ZooKeeper had never been asked for.
    Here the byte is written without waiting; when the pipe is full it is owed,
    and a greenlet of the client's own writes the owed bytes as the pipe drains.  Nothing that can be interrupted runs between
    queueing a request and accounting for its byte."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._owed_bytes = 0
        self._owed = Event()
        self._waker = None

    def _call(self, request, async_object):
        if self._state in (KeeperState.AUTH_FAILED, KeeperState.CLOSED, KeeperState.EXPIRED_SESSION):
            return super()._call(request, async_object)   # kazoo fails it at once, queues nothing
        pipe = self._connection._write_sock
        if pipe is None:
            return super()._call(request, async_object)   # closed meanwhile: kazoo's answer
        self._queue.append((request, async_object))
        if self._owed_bytes or not self._wake(pipe):
            self._owed_bytes += 1
            if self._waker is None or self._waker.dead:
                self._waker = gevent.spawn(self._pay_owed_bytes)
            self._owed.set()
        return None

    @staticmethod
    def _wake(pipe) -> bool:
        """One byte into the pipe if it has room now; False if it is full."""
        try:
            return pipe._sock.send(b"\0") == 1     # the raw socket: never waits
        except BlockingIOError:
            return False

    def _pay_owed_bytes(self) -> None:
        while True:
            self._owed.wait()
            pipe = self._connection._write_sock
            if pipe is None:            # closed: kazoo fails what is queued
                self._owed_bytes = 0
                self._owed.clear()
                continue
            while self._owed_bytes:
                if self._wake(pipe):
                    self._owed_bytes -= 1
                else:
                    wait_write(pipe.fileno())
            self._owed.clear()

    def close(self) -> None:
        if self._waker is not None:
            self._waker.kill(block=False)
        super().close()


def describe_connection(client: KazooClient) -> str:
    """kazoo's bookkeeping of one client, for a stack dump (broker/stack_dumps.py): its
    state and session, the requests queued but not sent, those sent and not answered
    (with their xids), and the wake-up bytes in the pipe that tells its connection
    greenlet to send.  A request that waits forever shows here as queued with no byte
    to send it, or as sent with no answer.  kazoo's private fields are read, never
    changed, and a kazoo that lacks one says so instead of failing the dump."""
    try:
        conn = client._connection
        queued = [_describe_request(r) for r, _ in list(client._queue)]
        pending = [f"xid {xid} {_describe_request(r)}" for r, _, xid in list(client._pending)]
        lines = [f"ZooKeeper client: state {client.state}, session "
                 f"{'none' if client._session_id is None else hex(client._session_id)}, "
                 f"last xid {getattr(conn, '_xid', '?')}, wake-up bytes {_pending_bytes(conn._read_sock)}",
                 f"  queued, not sent ({len(queued)}): {queued[:20]}",
                 f"  sent, not answered ({len(pending)}): {pending[:20]}"]
    except AttributeError as e:
        return f"ZooKeeper client: cannot describe this kazoo version ({e})\n"
    return "\n".join(lines) + "\n"


def _describe_request(request) -> str:
    path = getattr(request, "path", None)
    return type(request).__name__ + (f" {path}" if path else "")


def _pending_bytes(sock) -> str:
    if sock is None:
        return "no pipe"
    try:
        return str(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0])
    except OSError as e:
        return f"unknown ({e})"
