"""The protocol server and the client connection, live over loopback."""
from __future__ import annotations

import contextlib
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
    srv = ProtocolServer("127.0.0.1", 0, echo_handler,
                         logger=logging.getLogger("test.protocol.server"))
    srv.start()
    with gevent.Timeout(5):  # no live test may hang
        yield srv
    srv.stop(timeout=0.2)


def raw_connect(srv: ProtocolServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", srv.server_port), timeout=2)
    return sock


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError(f"EOF after {len(data)} of {n} bytes")
        data += chunk
    return data


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, size)


def assert_closed_by_peer(sock: socket.socket) -> None:
    try:
        assert sock.recv(1) == b""
    except ConnectionResetError:
        pass


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


def test_api_versions_v3_gets_error_35_v0_fallback(server):
    sock = raw_connect(server)
    # Header v2 (client_id + empty tagged fields) and a flexible v3 body, as
    # librdkafka sends them: compact strings (varint length + 1) and tags.
    body = b"\x0blibrdkafka" + b"\x062.3.0" + b"\x00"
    payload = i16(18, 3) + i32(42) + s("rdkafka") + b"\x00" + body
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


# -- answers that finish later (an acks=all produce waiting for its replicas) ------------

@contextlib.contextmanager
def serving(handler, timeout_s=5):
    """A live server with ``handler``, stopped on the way out; the block may take ``timeout_s``."""
    srv = ProtocolServer("127.0.0.1", 0, handler, logger=logging.getLogger("test.protocol.server"))
    srv.start()
    try:
        with gevent.Timeout(timeout_s):
            yield srv
    finally:
        srv.stop(timeout=0.2)


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
