"""Connecting to ZooKeeper: kazoo on gevent, with the chroot created if missing.

Everything in a broker runs on gevent, so kazoo uses its sequential gevent
handler: watch callbacks run one at a time on one greenlet and must not block
(ours only put an event on a queue).
"""
from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.handlers.gevent import SequentialGeventHandler

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
    kwargs = {"handler": SequentialGeventHandler()} if use_gevent else {}
    # kazoo retries connection attempts forever by default; that is what a
    # broker wants (it must come back when the ensemble does).
    return KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000.0,
                       connection_retry={"max_tries": -1, "max_delay": 1.0}, **kwargs)
