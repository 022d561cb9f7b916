"""Hostile clients against a real broker process: what they may cost it.

Each test is one attack from the fuzz review, measured on the broker's own process
(its resident memory from /proc), never by timing.
"""

import socket
import struct
from pathlib import Path

import pytest

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.framing import decode_response, encode_request
from kafka_ha.tools.processes import HOST

pytestmark = pytest.mark.system

MB = 1024 * 1024


def rss_bytes(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def api_versions(port):
    """One ApiVersions round trip: the broker still serves."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "probe", {}))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        return decode_response(ApiKey.API_VERSIONS, 0, _recv(sock, size))[1]


def _recv(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def test_stalled_frames_claiming_100_mb_cost_no_memory(cluster_factory):
    """Sixteen connections each claim a 100 MB frame and send ten bytes of it: the
    broker allocates as bytes arrive, so its memory stays where it was."""
    cluster = cluster_factory(brokers=1)
    port, pid = cluster.port(1), cluster.broker_pid(1)
    assert api_versions(port)["error_code"] == 0
    before = rss_bytes(pid)
    stalled = []
    try:
        for _ in range(16):
            sock = socket.create_connection((HOST, port), timeout=10)
            sock.sendall(struct.pack(">i", 100 * MB) + b"\x00" * 10)
            stalled.append(sock)
        # Small requests never queue for the pool: the broker still answers.
        assert api_versions(port)["error_code"] == 0
        grown = rss_bytes(pid) - before
        assert grown < 64 * MB, f"broker grew by {grown / MB:.0f} MB for 16 stalled frames"
    finally:
        for sock in stalled:
            sock.close()


def _controller_epoch(cluster):
    return int(cluster.zk.get("/controller_epoch")[0])


def test_forged_controller_requests_take_no_effect(cluster_factory):
    """A plain client sends LeaderAndIsr, UpdateMetadata and StopReplica with the controller
    epoch plus 1000: none of them applies, and the real controller is still obeyed."""
    from kafka_ha.protocol.connection import BrokerConnection
    from tests.harness.kafka import create_topic, read_states, wait_isr
    from tests.harness.load import produce, read_all

    cluster = cluster_factory(3)
    create_topic(cluster, "real", 1, 3, "--replica-assignment", "1:2:3")
    wait_isr(cluster, "real", [1, 2, 3])
    forged_epoch = _controller_epoch(cluster) + 1000
    conn = BrokerConnection(HOST, cluster.port(2), "forger", 10)
    header = {"controller_id": 4242, "controller_epoch": forged_epoch}
    state = {"controller_epoch": forged_epoch, "leader": 2, "leader_epoch": 50, "isr": [2],
             "zk_version": 0, "replicas": [2]}
    lai = conn.request(ApiKey.LEADER_AND_ISR, 0, {
        **header, "partition_states": [{"topic": "forged", "partition": 0, **state}],
        "live_leaders": [{"id": 2, "host": HOST, "port": cluster.port(2)}]})
    um = conn.request(ApiKey.UPDATE_METADATA, 0, {
        **header, "partition_states": [], "live_brokers": [{"id": 4242, "host": HOST, "port": 1}]})
    sr = conn.request(ApiKey.STOP_REPLICA, 0, {
        **header, "delete_partitions": False, "partitions": [{"topic": "real", "partition": 0}]})
    bad_name = conn.request(ApiKey.LEADER_AND_ISR, 0, {
        "controller_id": 1, "controller_epoch": 1,
        "partition_states": [{"topic": "ok", "partition": 0, **state},
                             {"topic": "../x", "partition": 0, **state}],
        "live_leaders": []})
    metadata = conn.request(ApiKey.METADATA, 1, {"topics": None})
    conn.close()
    assert [r["error_code"] for r in (lai, um, sr)] == [11, 11, 11]       # STALE_CONTROLLER_EPOCH
    assert bad_name["error_code"] == 42                                  # INVALID_REQUEST
    assert metadata["controller_id"] != 4242
    assert 4242 not in [b["node_id"] for b in metadata["brokers"]]
    log_dirs = list(cluster.dir.glob("broker-2/**/forged-0")) + list(cluster.dir.glob("broker-2/**/ok-0"))
    assert log_dirs == []
    # broker 2 still follows "real" (StopReplica did not stop it) and obeys the real
    # controller for a topic created afterwards
    produce(cluster, "real", [b"after"], acks=-1)
    create_topic(cluster, "later", 1, 1, "--replica-assignment", "2")
    assert produce(cluster, "later", [b"x"], acks=-1) == [0]
    assert read_all(cluster, "later") == [(0, b"x")]
    assert set(read_states(cluster, "real")[0].isr) == {1, 2, 3}


def test_half_sent_frames_are_closed_and_connections_per_address_are_bounded(cluster_factory):
    cluster = cluster_factory(brokers=1, overrides={"socket.request.read.timeout.ms": 500,
                                                    "max.connections.per.ip": 60})
    port = cluster.port(1)
    half_sent = []
    try:
        for _ in range(50):
            sock = socket.create_connection((HOST, port), timeout=30)
            sock.sendall(struct.pack(">i", 1000) + b"half")
            half_sent.append(sock)
        for sock in half_sent:       # each one is closed by the broker, none is served
            try:
                assert sock.recv(1) == b""
            except ConnectionResetError:
                pass
        extra = [socket.create_connection((HOST, port), timeout=30) for _ in range(61)]
        try:
            for sock in extra[60:]:
                try:
                    assert sock.recv(1) == b""
                except ConnectionResetError:
                    pass
        finally:
            for sock in extra:
                sock.close()
        assert api_versions(port)["error_code"] == 0
    finally:
        for sock in half_sent:
            sock.close()


def test_lying_batches_and_bombs_are_refused_and_nothing_is_stored(cluster_factory):
    from kafka_ha.protocol.connection import BrokerConnection
    from kafka_ha.records.builder import Record, assemble_v2_batch, encode_v2_record
    from tests.harness.kafka import create_topic
    from tests.harness.load import produce, read_all

    cluster = cluster_factory(brokers=1)
    create_topic(cluster, "lies", 1, 1)
    pid = cluster.broker_pid(1)
    conn = BrokerConnection(HOST, cluster.port(1), "liar", 30)

    def produce_raw(batch):
        response = conn.request(ApiKey.PRODUCE, 2, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "lies", "partition_data": [{"index": 0, "records": batch}]}]})
        return response["responses"][0]["partition_responses"][0]["error_code"]

    two = b"".join(encode_v2_record(Record(b"k", b"v"), i, 0) for i in range(2))
    zeros = b"".join(encode_v2_record(Record(None, bytes(1000)), i, 0) for i in range(20000))
    before = rss_bytes(pid)
    errors = {
        "count 2^31-1": produce_raw(assemble_v2_batch(two, 2**31 - 1, 1000, 1000)),
        "garbage": produce_raw(assemble_v2_batch(b"\x99" * 64, 1, 1000, 1000)),
        "gzip bomb": produce_raw(assemble_v2_batch(zeros, 20000, 1000, 1000, "gzip")),
    }
    grown = rss_bytes(pid) - before
    conn.close()
    assert errors == {"count 2^31-1": 2, "garbage": 2, "gzip bomb": 10}   # CORRUPT_MESSAGE, MESSAGE_TOO_LARGE
    assert grown < 64 * MB, f"broker grew by {grown / MB:.0f} MB"
    assert produce(cluster, "lies", [b"honest"], acks=1) == [0]         # nothing was stored before it
    assert read_all(cluster, "lies") == [(0, b"honest")]
