"""Connecting to ZooKeeper: kazoo on gevent, with the chroot created if missing.

Everything in a broker runs on gevent, so kazoo uses its sequential gevent
handler: watch callbacks run one at a time on one greenlet and must not block
(ours only put an event on a queue).
"""
from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.handlers.gevent import SequentialGeventHandler

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
    """
    hosts, chroot = split_chroot(connect_string)
    timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000.0
    if chroot and create_chroot:
        bootstrap = _client(hosts, session_timeout_ms, use_gevent)
        bootstrap.start(timeout=timeout_s)
        try:
            bootstrap.ensure_path(chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()
    client = _client(connect_string, session_timeout_ms, use_gevent)
    client.start(timeout=timeout_s)
    return client


def _client(hosts: str, session_timeout_ms: int, use_gevent: bool) -> KazooClient:
    kwargs = {"handler": SequentialGeventHandler()} if use_gevent else {}
    # kazoo retries connection attempts forever by default; that is what a
    # broker wants (it must come back when the ensemble does).
    return KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000.0,
                       connection_retry={"max_tries": -1, "max_delay": 1.0}, **kwargs)
