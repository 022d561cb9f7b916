"""kazoo wakes its connection greenlet with a byte per request through a socketpair, and a
burst of requests fills that pipe (about 200 bytes).  A second greenlet meeting the full
pipe, or a greenlet killed or timed out while it waited there, used to leave its request
queued with no byte: every later request was then sent one behind, and the last one never
(a controller hung for good on an answer ZooKeeper had never been asked for).  The
broker's client (kafka_ha.zk.client) never blocks a caller on that pipe."""
import gevent
import pytest
from kazoo.handlers.gevent import SequentialGeventHandler

from kafka_ha.zk.client import GeventKazooClient, describe_connection


@pytest.fixture
def client(zk_ensemble):
    client = GeventKazooClient(hosts=zk_ensemble.connect_string, timeout=10,
                               handler=SequentialGeventHandler())
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


def _burst(client, n):
    return [client.get_async("/") for _ in range(n)]


def test_a_burst_killed_midway_leaves_no_request_behind(client):
    burst = gevent.spawn(_burst, client, 2000)
    gevent.sleep(0.01)                    # the burst is under way, the pipe full
    burst.kill()
    client.get_async("/zookeeper").get(timeout=10)   # sent and answered, not left behind
    gevent.sleep(0.5)
    state = describe_connection(client)
    assert "queued, not sent (0)" in state and "sent, not answered (0)" in state, state


def test_a_burst_larger_than_the_pipe_is_answered_in_full(client):
    results = _burst(client, 3000)
    assert all(r.get(timeout=30)[1].version >= 0 for r in results)
    assert "wake-up bytes 0" in describe_connection(client)


def test_two_greenlets_bursting_at_once_get_every_answer(client):
    # With kazoo's own client the second greenlet to find the pipe full could not wait on
    # it too (gevent allows one waiter per socket): its request failed with "Connection has
    # been closed" and stayed queued without a byte, as in the controller's hang.
    bursts = [gevent.spawn(_burst, client, 1000) for _ in range(2)]
    gevent.joinall(bursts, raise_error=True)
    results = [r for b in bursts for r in b.value]
    assert all(r.get(timeout=30)[1].version >= 0 for r in results)
    state = describe_connection(client)
    assert "queued, not sent (0)" in state and "wake-up bytes 0" in state, state
