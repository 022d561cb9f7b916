"""What a broker's stack dump says of its ZooKeeper client (zk/client.describe_connection),
on a real ensemble: a request queued but not yet sent, then answered."""
from kazoo.client import KazooClient
from kazoo.handlers.gevent import SequentialGeventHandler

from kafka_ha.zk.client import describe_connection


def test_a_queued_request_shows_with_its_wake_up_byte_and_is_gone_once_answered(zk_ensemble):
    # A broker's client runs on kazoo's gevent handler, as this one (kafka_ha.zk.client).
    client = KazooClient(hosts=zk_ensemble.connect_string, timeout=10, handler=SequentialGeventHandler())
    client.start(timeout=30)
    try:
        result = client.get_async("/")
        # No switch to kazoo's connection greenlet yet: the request waits in the queue,
        # with the byte that will make the connection send it.
        queued = describe_connection(client)
        assert "queued, not sent (1): ['GetData /']" in queued
        assert "wake-up bytes 1" in queued and "state CONNECTED" in queued
        result.get(timeout=30)
        answered = describe_connection(client)
        assert "queued, not sent (0)" in answered and "sent, not answered (0)" in answered
        assert "wake-up bytes 0" in answered
    finally:
        client.stop()
        client.close()
