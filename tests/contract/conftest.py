"""The two ZooKeepers every store test of this tier runs against.

``new_session()`` opens a session with kazoo's client API on a fresh, empty namespace of
the test: a ``FakeZooKeeper`` in memory, or a new chroot of the session's real ensemble.
Every session of a test talks to the same server, because a server answers reads from
its own copy, and a session on another server could read a write before it got there.
(tests/contract/test_controller_store.py builds its own pair, with the fake controller
store beside the real one.)
"""

import uuid

import pytest
from kazoo.client import KazooClient

from tests.harness.fake_kazoo import FakeKazooClient
from tests.harness.fake_zookeeper import FakeZooKeeper


@pytest.fixture(params=["fake", "zookeeper"])
def new_session(request):
    if request.param == "fake":
        fake = FakeZooKeeper()
        yield lambda: FakeKazooClient.on(fake)
        return
    ensemble = request.getfixturevalue("zk_ensemble")
    server = ensemble.connect_string.split(",")[0]
    chroot = f"/{request.module.__name__.rsplit('.', 1)[-1]}-{uuid.uuid4().hex[:10]}"
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

    yield new_session
    for client in clients:
        client.stop()
        client.close()
