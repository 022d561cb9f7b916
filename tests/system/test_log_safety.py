"""KIP-101 scenarios, start-up recovery from damaged files, and hostile wire input."""

import errno
import socket
import struct
import time
from pathlib import Path

import pytest

from kafka_ha.client.consumer import Consumer
from kafka_ha.client.producer import Producer
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.framing import encode_request
from kafka_ha.records.builder import Record, build_v2_batch
from tests.harness.kafka import create_topic, log_text, read_states, run_tool

pytestmark = pytest.mark.system
SESSION_MS = 4000


def produce(cluster, topic, values, acks=-1, partition=0):
    p = Producer(cluster.bootstrap_servers, acks=acks, retries=20)
    futures = [p.send(topic, v, partition=partition) for v in values]
    p.flush()
    offsets = [f.get(timeout=30).offset for f in futures] if acks != 0 else []
    p.close()
    return offsets


def read_all(cluster, topic, partition=0):
    c = Consumer(cluster.bootstrap_servers)
    c.assign([(topic, partition)])
    c.seek_to_beginning((topic, partition))
    end = c.end_offsets([(topic, partition)])[(topic, partition)]
    out = []
    deadline = time.monotonic() + 30
    while c.position((topic, partition)) < end and time.monotonic() < deadline:
        out.extend(c.poll(500))
    c.close()
    return [(r.offset, r.value) for r in out]


def verify_replicas(cluster, topic):
    rc, out, err = run_tool("kafka-replica-verification.sh", "--broker-list", cluster.bootstrap_servers,
                            "--topic-white-list", topic, "--time", "-2", "--once", timeout_s=120)
    assert rc == 0, out + err


def wait_isr(cluster, topic, isr, partition=0):
    cluster.wait_until(lambda: set(read_states(cluster, topic)[partition].isr) == set(isr),
                       timeout=60, message=f"ISR of {topic} never became {sorted(isr)}")


def test_kip101_follower_restart_keeps_committed_data(cluster_factory):
    """Scenario 1: a follower restarting with a stale HW checkpoint must not drop committed data."""
    cluster = cluster_factory(3, {"replica.high.watermark.checkpoint.interval.ms": 600000},
                              session_timeout_ms=SESSION_MS)
    create_topic(cluster, "kip101a", 1, 2, "--replica-assignment", "1:2")
    offsets = produce(cluster, "kip101a", [b"m%d" % i for i in range(50)])
    assert offsets == list(range(50))
    # The follower's HW checkpoint (never written: the interval is 10 min) says 0.
    cluster.kill(2)
    cluster.start_broker(2)
    wait_isr(cluster, "kip101a", {1, 2})
    cluster.kill(1)
    cluster.wait_until(lambda: read_states(cluster, "kip101a")[0].leader == 2,
                       timeout=SESSION_MS / 1000 + 20, message="broker 2 did not take over")
    assert [v for _, v in read_all(cluster, "kip101a")] == [b"m%d" % i for i in range(50)]


def test_kip101_no_divergence_after_both_replicas_die(cluster_factory):
    """Scenario 2: the old leader's unreplicated tail is replaced, not kept beside a new one."""
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "kip101b", 1, 2, "--replica-assignment", "1:2")
    produce(cluster, "kip101b", [b"m1"])
    wait_isr(cluster, "kip101b", {1, 2})
    cluster.sigstop(2)  # the follower stops fetching: m2 reaches only the leader
    try:
        # Let its last long-poll fetch (max wait 500 ms) come back empty first, or the
        # leader would answer it with m2 into the stopped broker's socket buffer.
        time.sleep(1.0)
        produce(cluster, "kip101b", [b"m2"], acks=1)
        cluster.kill(1)  # the leader dies with m2 at offset 1, which nobody else has
    finally:
        cluster.sigcont(2)  # back before its session expires: it is the live ISR member
    cluster.wait_until(lambda: read_states(cluster, "kip101b")[0].leader == 2,
                       timeout=SESSION_MS / 1000 + 30, message="broker 2 did not take over")
    assert produce(cluster, "kip101b", [b"m3"]) == [1]
    cluster.start_broker(1)
    wait_isr(cluster, "kip101b", {1, 2})
    assert read_all(cluster, "kip101b") == [(0, b"m1"), (1, b"m3")]
    assert "truncating from offset 2 to 1" in log_text(cluster, 1, "server.log")
    verify_replicas(cluster, "kip101b")


def test_corrupt_segment_tail_and_garbage_checkpoints_at_startup(cluster_factory):
    cluster = cluster_factory(1, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "damaged", 1, 1)
    produce(cluster, "damaged", [b"v%d" % i for i in range(20)])
    cluster.kill(1)
    data = Path(cluster.config_path(1)).parent / "data"
    segment = next((data / "damaged-0").glob("*.log"))
    with open(segment, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x14\x00\x00\x01\x00garbage-tail")
    (data / "replication-offset-checkpoint").write_text("not a checkpoint\n")
    (data / "recovery-point-offset-checkpoint").write_text("0\n7\nbroken\n")
    (data / "damaged-0" / "leader-epoch-checkpoint").write_text("0\nnope\n")
    cluster.start_broker(1)
    cluster.wait_registered([1])
    cluster.wait_until(lambda: read_states(cluster, "damaged")[0].leader == 1, timeout=30,
                       message="broker 1 did not lead again")
    assert produce(cluster, "damaged", [b"after"]) == [20], "the garbage tail was truncated away"
    records = cluster.wait_until(lambda: (r := read_all(cluster, "damaged")) and len(r) == 21 and r,
                                 timeout=30, message="committed data not readable after recovery")
    values = [v for _, v in records]
    assert values == [b"v%d" % i for i in range(20)] + [b"after"]


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_bad_wire_input_leaves_the_broker_serving(cluster_factory):
    cluster = cluster_factory(1, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "hostile", 1, 1)
    port = cluster.port(1)
    attacks = {
        "absurd size": struct.pack(">i", 0x7FFFFFF0) + b"x" * 100,
        "negative size": struct.pack(">i", -5),
        "truncated header": _frame(b"\x00\x01"),
        "unknown api key": _frame(struct.pack(">hhi", 999, 0, 1) + b"\x00\x00"),
        "unknown version": _frame(struct.pack(">hhi", 0, 99, 1) + b"\x00\x00"),
        "truncated body": encode_request(ApiKey.METADATA, 1, 5, "x", {"topics": ["hostile"]})[:-3],
    }
    for name, payload in attacks.items():
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            try:
                s.sendall(payload)
                # The broker may already have closed (it stops reading at a bad size):
                # then this shutdown fails with ENOTCONN or the recv sees a reset.
                s.shutdown(socket.SHUT_WR)
                got = s.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                got = b""
            except OSError as exc:
                if exc.errno != errno.ENOTCONN:
                    raise
                got = b""
            assert got == b"", f"{name}: expected the connection to be closed, got {got[:40]!r}"
    conn = BrokerConnection("127.0.0.1", port, "t", 10)
    batch = bytearray(build_v2_batch([Record(None, b"payload")]))
    batch[-1] ^= 0xFF  # breaks the CRC
    def produce_raw(records, acks=1):
        return conn.request(ApiKey.PRODUCE, 2, {"acks": acks, "timeout_ms": 1000, "topic_data": [
            {"name": "hostile", "partition_data": [{"index": 0, "records": bytes(records)}]}]})
    assert produce_raw(batch)["responses"][0]["partition_responses"][0]["error_code"] == 2
    good = build_v2_batch([Record(None, b"ok")])
    assert produce_raw(good, acks=2)["responses"][0]["partition_responses"][0]["error_code"] == 21
    assert produce_raw(good)["responses"][0]["partition_responses"][0]["error_code"] == 0
    conn.close()
    server_log = log_text(cluster, 1, "server.log")
    for line in ("unsupported api_key", "closing connection"):
        assert line in server_log
    rss_kib = int([l for l in open(f"/proc/{cluster.broker_pid(1)}/status") if l.startswith("VmRSS")][0].split()[1])
    assert rss_kib < 512 * 1024, f"broker RSS {rss_kib} KiB after a 2 GiB size claim"
    assert read_all(cluster, "hostile") == [(0, b"ok")]
