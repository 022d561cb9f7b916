"""The protocol server and the client connection, live over loopback."""
from __future__ import annotations

import logging
import struct

import gevent
import gevent.event
import pytest
from gevent import socket
from gevent.server import StreamServer

from kafka_ha.protocol.api import ApiKey, api_versions_entries
from kafka_ha.protocol.connection import (
    BrokerConnection, BrokerConnectionError, ConnectionClosed, ConnectionLost,
    CorrelationIdMismatch, RequestTimedOut)
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import (
    RequestHeader, decode_request, decode_request_body, decode_response,
    encode_request, encode_response)
from kafka_ha.protocol.primitives import ProtocolError, Reader
from kafka_ha.protocol.server import ProtocolServer
from tests.harness.raw_socket import assert_closed_by_peer, raw_connect, recv_frame, serving
from tests.harness.protocol_samples import (REQUESTS, api_versions_response, i16, i32,
                                            produce_response, s)


K = ApiKey


# -- live server and client --------------------------------------------------------

def echo_handler(header: RequestHeader, reader: Reader):
    """FindCoordinator 'sleep:<s>' sleeps then echoes; Metadata fails; acks=0 is silent."""
    body = decode_request_body(header, reader)
    if header.api_key == K.API_VERSIONS:
        return api_versions_response(header.api_version), header.api_version
    if header.api_key == K.FIND_COORDINATOR:
        gevent.sleep(float(body["key"].split(":")[1]))
        return {"error_code": 0, "node_id": header.correlation_id,
                "host": body["key"], "port": 9092}, 0
    if header.api_key == K.PRODUCE and body["acks"] == 0:
        return None
    if header.api_key == K.PRODUCE:
        return produce_response(header.api_version), header.api_version
    raise RuntimeError(f"test handler refuses {header.api_key!r}")


@pytest.fixture
def server():
    with serving(echo_handler) as srv:   # no live test may hang
        yield srv


def test_pipelined_requests_are_answered_in_order(server):
    sock = raw_connect(server)
    sleeps = [0.15, 0.1, 0.05, 0.0, 0.02]  # later requests finish sooner
    sock.sendall(b"".join(
        encode_request(K.FIND_COORDINATOR, 0, cid, "pipe", {"key": f"sleep:{delay}"})
        for cid, delay in enumerate(sleeps)))
    answers = [decode_response(K.FIND_COORDINATOR, 0, recv_frame(sock)) for _ in sleeps]
    assert [cid for cid, _ in answers] == list(range(len(sleeps)))
    assert [body["host"] for _, body in answers] == [f"sleep:{d}" for d in sleeps]
    sock.close()


def test_broker_connection_request_and_send_only(server):
    with BrokerConnection("127.0.0.1", server.server_port, "unit", timeout_s=2) as conn:
        assert conn.request(K.API_VERSIONS, 0, {}) == api_versions_response(0)
        body = dict(REQUESTS[(K.PRODUCE, 2)], acks=0)
        conn.send_only(K.PRODUCE, 2, body)  # no response must come back for this one
        response = conn.request(K.FIND_COORDINATOR, 0, {"key": "sleep:0"})
        assert response["node_id"] == 2  # correlation ids 0, 1 (acks=0), 2
        assert conn.request(K.PRODUCE, 2, REQUESTS[(K.PRODUCE, 2)]) == produce_response(2)
    with pytest.raises(ConnectionClosed):
        conn.request(K.API_VERSIONS, 0, {})


def test_garbage_frame_closes_only_that_connection(server, caplog):
    good = BrokerConnection("127.0.0.1", server.server_port, "good", timeout_s=2)
    assert good.request(K.FIND_COORDINATOR, 0, {"key": "sleep:0"})["error_code"] == 0
    bad = raw_connect(server)
    bad.sendall(b"\x7f\xff\xff\xff" + b"junk")
    assert_closed_by_peer(bad)
    assert any("invalid request size 2147483647" in r.getMessage() for r in caplog.records)
    assert good.request(K.FIND_COORDINATOR, 0, {"key": "sleep:0"})["node_id"] == 1
    with BrokerConnection("127.0.0.1", server.server_port, "new", timeout_s=2) as fresh:
        assert fresh.request(K.API_VERSIONS, 1, {})["error_code"] == 0
    good.close()
    bad.close()


def test_api_versions_above_ours_gets_error_35_v0_fallback(server):
    sock = raw_connect(server)
    # Header v2 (client_id + empty tagged fields) and a flexible body, as a
    # client newer than us sends them at v4: compact strings and tags.
    body = b"\x0blibrdkafka" + b"\x062.3.0" + b"\x00"
    payload = i16(18, 4) + i32(42) + s("rdkafka") + b"\x00" + body
    sock.sendall(i32(len(payload)) + payload)
    correlation_id, response = decode_response(K.API_VERSIONS, 0, recv_frame(sock))
    assert correlation_id == 42
    assert response["error_code"] == ErrorCode.UNSUPPORTED_VERSION == 35
    assert response["api_keys"] == api_versions_entries()
    # The connection stays usable, so the client can retry at v0.
    sock.sendall(encode_request(K.API_VERSIONS, 0, 43, "rdkafka", {}))
    assert decode_response(K.API_VERSIONS, 0, recv_frame(sock)) == (43, api_versions_response(0))
    sock.close()


def test_unsupported_api_and_handler_failure_close_the_connection(server, caplog):
    other = BrokerConnection("127.0.0.1", server.server_port, "other", timeout_s=2)
    sock = raw_connect(server)
    payload = i16(11, 0) + i32(1) + s("joiner") + b"rest-of-join-group"
    sock.sendall(i32(len(payload)) + payload)  # JoinGroup: unsupported
    assert_closed_by_peer(sock)
    sock.close()
    with pytest.raises(ConnectionLost):
        other.request(K.METADATA, 0, {"topics": []})  # the handler raises
    failures = [r for r in caplog.records if "handler failed" in r.getMessage()]
    assert failures and failures[0].exc_info is not None
    assert other.request(K.API_VERSIONS, 2, {})["error_code"] == 0  # reconnects
    other.close()


def test_timeout_then_reconnect(server):
    conn = BrokerConnection("127.0.0.1", server.server_port, "slow", timeout_s=0.1)
    with pytest.raises(RequestTimedOut):
        conn.request(K.FIND_COORDINATOR, 0, {"key": "sleep:0.5"})
    assert not conn.connected
    assert conn.request(K.FIND_COORDINATOR, 0, {"key": "sleep:0"}, timeout_s=2)["port"] == 9092
    conn.close()


def _server_reading_ahead(requests_before_answering: int, then_close: bool = False):
    """A raw server that answers nothing until it holds ``requests_before_answering``
    requests: a client that waits for each answer before sending the next hangs.
    Each answer's node_id is the request's correlation id, its host the request's
    key; ``then_close`` answers the first only and hangs up, else requests after
    those are answered at once with host "later"."""
    def answer(sock, frame, host=None):
        header, reader = decode_request(frame)
        body = decode_request_body(header, reader)
        sock.sendall(encode_response(header.correlation_id, K.FIND_COORDINATOR, 0, {
            "error_code": 0, "node_id": header.correlation_id, "host": host or body["key"],
            "port": 1}))

    def serve(sock, _address):
        frames = [recv_frame(sock) for _ in range(requests_before_answering)]
        for frame in frames[:1] if then_close else frames:
            answer(sock, frame)
        if then_close:
            sock.close()
            return
        while True:
            answer(sock, recv_frame(sock), host="later")

    fake = StreamServer(("127.0.0.1", 0), serve)
    fake.start()
    return fake


def test_concurrent_requests_on_one_connection_are_pipelined():
    fake = _server_reading_ahead(3)
    try:
        with gevent.Timeout(5):
            conn = BrokerConnection("127.0.0.1", fake.server_port, "pipe", timeout_s=3)
            callers = [gevent.spawn(conn.request, K.FIND_COORDINATOR, 0, {"key": f"k{i}"})
                       for i in range(3)]
            answers = [g.get() for g in callers]
            # Each caller got its own answer, though all three were in flight at once.
            assert [(a["node_id"], a["host"]) for a in answers] == [(0, "k0"), (1, "k1"), (2, "k2")]
            assert conn.request(K.FIND_COORDINATOR, 0, {"key": "x"})["host"] == "later"
            conn.close()
    finally:
        fake.stop(timeout=0.2)


def test_a_dropped_connection_fails_every_request_waiting_on_it():
    fake = _server_reading_ahead(3, then_close=True)
    try:
        with gevent.Timeout(5):
            conn = BrokerConnection("127.0.0.1", fake.server_port, "pipe", timeout_s=3)
            callers = [gevent.spawn(conn.request, K.FIND_COORDINATOR, 0, {"key": f"k{i}"})
                       for i in range(3)]
            gevent.joinall(callers)
            assert callers[0].value["host"] == "k0"
            for g in callers[1:]:
                assert isinstance(g.exception, ConnectionLost), g.exception
            assert not conn.connected
            conn.close()
    finally:
        fake.stop(timeout=0.2)


def test_a_timed_out_request_fails_the_ones_sent_after_it(server):
    conn = BrokerConnection("127.0.0.1", server.server_port, "slow", timeout_s=2)
    slow = gevent.spawn(conn.request, K.FIND_COORDINATOR, 0, {"key": "sleep:0.5"}, 0.1)
    gevent.sleep(0.01)
    behind = gevent.spawn(conn.request, K.FIND_COORDINATOR, 0, {"key": "sleep:0"})
    gevent.joinall([slow, behind])
    assert isinstance(slow.exception, RequestTimedOut)
    # Its answer would have come after the slow one's: it cannot be read any more.
    assert isinstance(behind.exception, ConnectionLost)
    assert conn.request(K.FIND_COORDINATOR, 0, {"key": "sleep:0"})["port"] == 9092
    conn.close()


def test_a_caller_killed_while_waiting_its_turn_does_not_leave_its_answer_to_the_next(server):
    conn = BrokerConnection("127.0.0.1", server.server_port, "kill", timeout_s=2)
    first = gevent.spawn(conn.request, K.FIND_COORDINATOR, 0, {"key": "sleep:0.2"})
    gevent.sleep(0.01)
    second = gevent.spawn(conn.request, K.FIND_COORDINATOR, 0, {"key": "sleep:0"})
    gevent.sleep(0.05)
    second.kill()
    gevent.joinall([first])
    # The connection was dropped (the stream is out of step), so the first
    # fails too rather than anyone reading an answer that is not theirs.
    assert isinstance(first.exception, ConnectionLost)
    answer = conn.request(K.FIND_COORDINATOR, 0, {"key": "sleep:0"})
    assert answer["host"] == "sleep:0"
    conn.close()


@pytest.mark.parametrize("reply, error", [
    (lambda cid: encode_response(cid + 1, K.API_VERSIONS, 0, api_versions_response(0)),
     CorrelationIdMismatch),
    (lambda cid: i32(0x7FFFFFFF), ProtocolError),
    (lambda cid: i32(-3), ProtocolError),
    (lambda cid: i32(100) + b"short", ConnectionLost),
])
def test_client_rejects_bad_responses(reply, error):
    def misbehave(sock, _address):
        frame = recv_frame(sock)
        sock.sendall(reply(decode_request(frame)[0].correlation_id))
        sock.close()

    fake = StreamServer(("127.0.0.1", 0), misbehave)
    fake.start()
    try:
        with gevent.Timeout(5):
            conn = BrokerConnection("127.0.0.1", fake.server_port, "c", timeout_s=2)
            with pytest.raises(error):
                conn.request(K.API_VERSIONS, 0, {})
            assert not conn.connected
    finally:
        fake.stop(timeout=0.2)


def test_connect_failure_is_a_connection_error():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens on this port now
    with pytest.raises(BrokerConnectionError) as err:
        BrokerConnection("127.0.0.1", port, "c", timeout_s=1).connect()
    assert isinstance(err.value, ConnectionError)


# -- the request memory pool ------------------------------------------------------------

def test_requests_past_the_memory_pool_wait_without_being_read():
    """queued.max.request.bytes: a large frame whose size does not fit waits until a
    request in flight has been answered; its connection reads nothing meanwhile.
    Small frames (within a connection's own receive buffer) never wait."""
    from kafka_ha.protocol.memory_pool import RequestMemoryPool

    served = []

    def handler(header, reader):
        body = decode_request_body(header, reader)
        served.append(body["key"][:1])
        return {"error_code": 0, "node_id": 1, "host": "h", "port": 1}, 0

    pool = RequestMemoryPool(30000)
    srv = ProtocolServer("127.0.0.1", 0, handler, memory_pool=pool)
    srv.start()
    try:
        with gevent.Timeout(5):
            first = encode_request(K.FIND_COORDINATOR, 0, 1, "c", {"key": "a" * 20000})
            second = encode_request(K.FIND_COORDINATOR, 0, 2, "c", {"key": "b" * 20000})
            small = encode_request(K.FIND_COORDINATOR, 0, 3, "c", {"key": "c"})
            a, b, c = raw_connect(srv), raw_connect(srv), raw_connect(srv)
            a.sendall(first[:100])            # claims ~20 KB, sends a hundred bytes
            gevent.sleep(0.05)
            b.sendall(second)                 # whole, but does not fit beside a's
            gevent.sleep(0.1)
            assert served == [] and pool.in_use == len(first) - 4 and pool.waits == 1
            c.sendall(small)
            assert recv_frame(c)[:4] == i32(3)
            a.sendall(first[100:])
            assert recv_frame(a)[:4] == i32(1)
            assert recv_frame(b)[:4] == i32(2)
            assert served == ["c", "a", "b"]
            c.close()
            a.close()
            b.close()
            gevent.sleep(0.05)
            assert pool.in_use == 0
    finally:
        srv.stop(timeout=0.2)


def test_a_connection_closed_mid_frame_gives_its_reservation_back():
    from kafka_ha.protocol.memory_pool import RequestMemoryPool

    pool = RequestMemoryPool(10**6)
    srv = ProtocolServer("127.0.0.1", 0, echo_handler, memory_pool=pool)
    srv.start()
    try:
        with gevent.Timeout(5):
            sock = raw_connect(srv)
            sock.sendall(struct.pack(">i", 50000) + b"x" * 10)
            gevent.sleep(0.05)
            assert pool.in_use == 50000
            sock.close()
            gevent.sleep(0.1)
            assert pool.in_use == 0
    finally:
        srv.stop(timeout=0.2)


# -- idle connections, unfinished requests, connections per address --------------------

def _limited_server(**limits):
    srv = ProtocolServer("127.0.0.1", 0, echo_handler,
                         logger=logging.getLogger("test.protocol.server"), **limits)
    srv.start()
    return srv


def test_an_idle_connection_is_closed_after_connections_max_idle():
    srv = _limited_server(idle_timeout_s=0.2)
    try:
        with gevent.Timeout(5):
            sock = raw_connect(srv)
            sock.settimeout(3)
            sock.sendall(encode_request(K.API_VERSIONS, 0, 1, "c", {}))
            recv_frame(sock)                       # served, then nothing more is sent
            assert_closed_by_peer(sock)
    finally:
        srv.stop(timeout=0.2)


def test_a_request_that_never_finishes_arriving_is_dropped_before_the_idle_limit():
    srv = _limited_server(idle_timeout_s=60, request_read_timeout_s=0.2)
    try:
        with gevent.Timeout(5):
            sock = raw_connect(srv)
            sock.settimeout(3)
            sock.sendall(struct.pack(">i", 100) + b"half")
            assert_closed_by_peer(sock)
    finally:
        srv.stop(timeout=0.2)


def test_a_slow_but_steady_request_is_not_an_idle_connection():
    srv = _limited_server(idle_timeout_s=0.3, request_read_timeout_s=5)
    try:
        with gevent.Timeout(5):
            sock = raw_connect(srv)
            sock.settimeout(3)
            frame_ = encode_request(K.API_VERSIONS, 0, 1, "c", {})
            for i in range(len(frame_)):            # byte by byte, each gap under the idle limit
                sock.sendall(frame_[i:i + 1])
                gevent.sleep(0.02)
            assert recv_frame(sock)[:4] == i32(1)
            sock.close()
    finally:
        srv.stop(timeout=0.2)


def test_connections_past_the_per_address_limit_are_closed_at_once(caplog):
    srv = _limited_server(max_connections_per_ip=2)
    try:
        with gevent.Timeout(5):
            a, b = raw_connect(srv), raw_connect(srv)
            for s in (a, b):
                s.sendall(encode_request(K.API_VERSIONS, 0, 1, "c", {}))
                assert recv_frame(s)[:4] == i32(1)
            c = raw_connect(srv)
            c.settimeout(3)
            assert_closed_by_peer(c)
            a.close()
            gevent.sleep(0.05)
            d = raw_connect(srv)                    # a's slot is free again
            d.sendall(encode_request(K.API_VERSIONS, 0, 2, "c", {}))
            assert recv_frame(d)[:4] == i32(2)
            for s in (b, c, d):
                s.close()
    finally:
        srv.stop(timeout=0.2)


def test_closing_the_connections_ends_every_client_connection_at_once():
    """Issue 23: a stopping broker held its clients' connections open, unanswered, while
    it flushed its logs (until it exited, 6 s later), so producers asking it for metadata
    learned the new leaders only then.  As Kafka's socket server stops before the rest of
    the broker, the stopping broker closes them: clients go to the other brokers at once.
    A request answered before that is still delivered."""
    def handler(header, reader):
        decode_request_body(header, reader)
        return {"error_code": 0, "node_id": header.correlation_id, "host": "h", "port": 1}, 0

    with serving(handler) as srv:
        answered, idle = raw_connect(srv), raw_connect(srv)
        answered.sendall(encode_request(ApiKey.FIND_COORDINATOR, 0, 7, "c", {"key": "k"}))
        answered.settimeout(2)
        assert decode_response(ApiKey.FIND_COORDINATOR, 0, recv_frame(answered))[0] == 7
        srv.stop(timeout=0)
        srv.close_connections()
        for sock in (answered, idle):
            sock.settimeout(2)
            assert_closed_by_peer(sock)
            sock.close()
