"""The protocol server's answers that finish later (an acks=all Produce waiting for its
replicas, protocol/deferred.py), its pauses between pipelined requests, and what it tells
handlers about the client.  Live over loopback."""
from __future__ import annotations


import gevent
import gevent.event
import pytest
from gevent import socket

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.framing import decode_request_body, decode_response, encode_request
from tests.harness.raw_socket import assert_closed_by_peer, raw_connect, recv_frame, serving

K = ApiKey


def test_a_deferred_answer_lets_the_next_requests_be_served_and_keeps_the_order():
    """librdkafka sends one partition per Produce request and pipelines them; when each
    acks=all request held the connection until its records were replicated, 1,000
    partitions took 1,000 replication rounds one after the other (the 34 s of issue 23)."""
    from kafka_ha.protocol.deferred import DeferredResponse

    replicated = gevent.event.Event()
    handled = []

    def handler(header, reader):
        body = decode_request_body(header, reader)
        handled.append(header.correlation_id)
        if body["key"] == "wait":
            def finish():
                replicated.wait()
                return {"error_code": 0, "node_id": header.correlation_id, "host": "waited", "port": 1}
            return DeferredResponse(finish), 0
        return {"error_code": 0, "node_id": header.correlation_id, "host": "now", "port": 1}, 0

    with serving(handler, 5) as srv:
        sock = raw_connect(srv)
        keys = ["wait", "now", "wait", "now"]
        sock.sendall(b"".join(encode_request(K.FIND_COORDINATOR, 0, cid, "pipe", {"key": k})
                              for cid, k in enumerate(keys)))
        while len(handled) < len(keys):
            gevent.sleep(0.01)
        # Every request was taken while the first one's answer still waited ...
        assert handled == [0, 1, 2, 3]
        sock.settimeout(0.2)
        with pytest.raises(socket.timeout):
            sock.recv(1)           # ... and nothing overtook it.
        replicated.set()
        sock.settimeout(2)
        answers = [decode_response(K.FIND_COORDINATOR, 0, recv_frame(sock)) for _ in keys]
        assert [(cid, body["host"]) for cid, body in answers] == [
            (0, "waited"), (1, "now"), (2, "waited"), (3, "now")]
        sock.close()


def test_a_connection_stops_reading_while_too_many_answers_wait(monkeypatch):
    """The queue of unsent answers is bounded: past it, the connection is not read
    (as Kafka mutes a channel), so a client cannot pile up unbounded responses."""
    from kafka_ha.protocol import server as server_module
    from kafka_ha.protocol.deferred import DeferredResponse

    monkeypatch.setattr(server_module, "MAX_PENDING_RESPONSES", 40)
    release = gevent.event.Event()
    handled = []

    def handler(header, reader):
        decode_request_body(header, reader)
        handled.append(header.correlation_id)
        return DeferredResponse(lambda: (release.wait(), {"error_code": 0, "node_id": 0,
                                                           "host": "h", "port": 1})[1]), 0

    limit = server_module.MAX_PENDING_RESPONSES
    with serving(handler, 10) as srv:
        sock = raw_connect(srv)
        n = limit + 5
        sock.sendall(b"".join(encode_request(K.FIND_COORDINATOR, 0, cid, "pipe", {"key": "k"})
                              for cid in range(n)))
        while len(handled) < limit:
            gevent.sleep(0.01)
        gevent.sleep(0.1)
        # the one in the writer's hands plus the queue's bound
        assert len(handled) <= limit + 1
        release.set()
        sock.settimeout(5)
        answers = [decode_response(K.FIND_COORDINATOR, 0, recv_frame(sock)) for _ in range(n)]
        assert [cid for cid, _ in answers] == list(range(n))
        sock.close()


def test_a_deferred_answer_that_fails_closes_the_connection(caplog):
    from kafka_ha.protocol.deferred import DeferredResponse

    def handler(header, reader):
        decode_request_body(header, reader)

        def finish():
            raise RuntimeError("boom")
        return DeferredResponse(finish), 0

    with serving(handler, 5) as srv:
        sock = raw_connect(srv)
        sock.sendall(encode_request(K.FIND_COORDINATOR, 0, 7, "pipe", {"key": "k"}))
        assert_closed_by_peer(sock)
        assert "handler failed on FIND_COORDINATOR v0 (correlation id 7)" in caplog.text


def test_a_client_pipelining_many_requests_does_not_hold_the_loop_from_the_others():
    """With the requests already in the socket buffer, recv never waits, so the reading
    greenlet went from one request to the next without the hub polling anything: 1,000
    pipelined Produce requests after a failover held a broker's loop for 12 s, its
    ZooKeeper session expired and it lost its leaderships (failover bench, 3,000
    partitions, confluent-kafka).  The connection must pause between slices."""
    import time as time_module
    order = []

    def handler(header, reader):
        decode_request_body(header, reader)
        order.append(header.client_id)
        if header.client_id == "pipeliner":
            busy_until = time_module.monotonic() + 0.02   # 20 ms of work per request
            while time_module.monotonic() < busy_until:
                pass
        return {"error_code": 0, "node_id": 0, "host": "h", "port": 1}, 0

    with serving(handler, 10) as srv:
        busy, other = raw_connect(srv), raw_connect(srv)
        n = 40
        busy.sendall(b"".join(encode_request(K.FIND_COORDINATOR, 0, cid, "pipeliner", {"key": "k"})
                              for cid in range(n)))
        while "pipeliner" not in order:
            gevent.sleep(0.001)
        other.sendall(encode_request(K.FIND_COORDINATOR, 0, 0, "other", {"key": "k"}))
        other.settimeout(5)
        recv_frame(other)
        busy.settimeout(5)
        for _ in range(n):
            recv_frame(busy)
        assert order.index("other") < len(order) - 1, "served only after all 40 (800 ms)"
        busy.close()
        other.close()


def test_a_handler_knows_the_address_of_the_client_it_serves():
    """JoinGroup records it: kafka-consumer-groups.sh --describe shows the member's HOST."""
    from kafka_ha.protocol.server import client_address
    seen = []

    def handler(header, reader):
        decode_request_body(header, reader)
        seen.append(client_address())
        return {"error_code": 0, "node_id": 0, "host": "h", "port": 1}, 0

    with serving(handler, 5) as srv:
        sock = raw_connect(srv)
        sock.sendall(encode_request(K.FIND_COORDINATOR, 0, 1, "c", {"key": "k"}))
        recv_frame(sock)
        sock.close()
    assert seen == ["127.0.0.1"] and client_address() == ""
