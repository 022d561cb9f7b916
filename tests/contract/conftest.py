"""The two ZooKeepers every store test of this tier runs against.

- ``new_session()`` opens a session with kazoo's client API on a fresh, empty namespace
  of the test: a ``FakeZooKeeper`` in memory, or a new chroot of the session's real
  ensemble (the broker, admin and bench stores run on either).
- ``backend`` is the controller store's pair: ``FakeControllerStore`` on the fake beside
  ``ControllerStore`` on the real ensemble, on a namespace with the persistent paths and
  topic ``t`` (partition 0 on brokers 1, 2, 3).

Every session of a test talks to the same server, because a server answers reads from
its own copy, and a session on another server could read a write before it got there.
"""

import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import pytest
from kazoo.client import KazooClient

from kafka_ha.zk.controller_store import ControllerStore
from tests.harness.fake_controller_store import (FakeControllerStore, prepare_namespace,
                                                 write_topic)
from tests.harness.fake_kazoo import FakeKazooClient
from tests.harness.fake_zookeeper import FakeZooKeeper


@contextmanager
def real_namespace(ensemble, name: str):
    """``new_session()`` on a fresh chroot of ``ensemble``; every session is closed after."""
    server = ensemble.connect_string.split(",")[0]
    chroot = f"/{name}-{uuid.uuid4().hex[:10]}"
    root = KazooClient(hosts=server, timeout=10)
    root.start(timeout=30)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    clients = []

    def new_session():
        client = KazooClient(hosts=server + chroot, timeout=10)
        client.start(timeout=30)
        clients.append(client)
        return client

    try:
        yield new_session
    finally:
        for client in clients:
            client.stop()
            client.close()


@pytest.fixture(params=["fake", "zookeeper"])
def new_session(request):
    if request.param == "fake":
        fake = FakeZooKeeper()
        yield lambda: FakeKazooClient.on(fake)
        return
    with real_namespace(request.getfixturevalue("zk_ensemble"),
                        request.module.__name__.rsplit(".", 1)[-1]) as new_session:
        yield new_session


@dataclass
class Backend:
    """``client()`` opens a session on the test's namespace; ``store(broker_id)`` returns a
    store of that broker on a session of its own, with that session's raw client."""

    name: str
    client: Callable[[], object]
    make_store: Callable[[object, int], object]

    def store(self, broker_id: int = 1):
        zk = self.client()
        return self.make_store(zk, broker_id), zk

    def elected(self, broker_id: int = 1):
        """A store of ``broker_id`` that has won the election, and its raw client."""
        store, zk = self.store(broker_id)
        assert store.try_elect().won
        return store, zk


@pytest.fixture(params=["fake", "zookeeper"])
def backend(request):
    if request.param == "fake":
        yield _prepared(Backend("fake", FakeZooKeeper().client, FakeControllerStore))
        return
    with real_namespace(request.getfixturevalue("zk_ensemble"), "store") as client:
        yield _prepared(Backend("zookeeper", client, ControllerStore))


def _prepared(backend: Backend) -> Backend:
    prepare_namespace(backend.client())
    write_topic(backend.client(), "t", {0: (1, 2, 3)})
    return backend
