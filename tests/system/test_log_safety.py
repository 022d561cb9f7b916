"""KIP-101 scenarios, start-up recovery from damaged files, and hostile wire input."""

import errno
import socket
import struct

import pytest

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.framing import encode_request
from kafka_ha.records.builder import Record, build_v2_batch
from tests.harness.cluster import SESSION_MS
from tests.harness.kafka import create_topic, log_size, log_text, read_states, verify_replicas, wait_isr
from tests.harness.load import produce, read_all
from tests.harness.partition_faults import resume, stop_fetching
from tests.harness.replica_files import partition_dir, segment_bytes

pytestmark = pytest.mark.system


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
    stopped = []
    try:
        stop_fetching(cluster, 2, stopped)  # m2 reaches only the leader
        produce(cluster, "kip101b", [b"m2"], acks=1, via=[1])
        cluster.kill(1)  # the leader dies with m2 at offset 1, which nobody else has
    finally:
        for broker in stopped:
            cluster.sigcont(broker)  # back before its session expires: it is the live ISR member
    cluster.wait_until(lambda: read_states(cluster, "kip101b")[0].leader == 2,
                       timeout=SESSION_MS / 1000 + 30, message="broker 2 did not take over")
    assert produce(cluster, "kip101b", [b"m3"]) == [1]
    cluster.start_broker(1)
    wait_isr(cluster, "kip101b", {1, 2})
    assert read_all(cluster, "kip101b") == [(0, b"m1"), (1, b"m3")]
    assert "truncating from offset 2 to 1" in log_text(cluster, 1, "server.log")
    verify_replicas(cluster, "kip101b")


def test_kip279_fast_double_failover_converges_on_the_last_leader(cluster_factory):
    """Failure scenario 17: leaders change twice in quick succession and the second new
    leader does not know the epoch of the first one's tail.

    B leads epoch e2 with a record at offset 1 that nobody else has; C, which never saw
    e2, then leads with the old leader A's record at offset 1 (epoch e1) and appends in
    e3.  Asked about e2, C can only say where the largest epoch it knows below e2 ends:
    e1, at offset 2.  A pre-KIP-279 answer ("e3 starts at 2") would let B keep its
    offset 1 beside C's different one; with KIP-279 B truncates to where its own e1
    ends (1) and refetches.
    """
    # B is stopped for a few seconds and must stay registered: sessions of 8 s.
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": 60000}, session_timeout_ms=8000)
    # C is stopped through two elections, so it must not be the controller that would
    # hold them, and must stay registered and in the ISR meanwhile: a long session of
    # its own, while A's and B's shorter ones let each kill -9 be noticed.
    controller = cluster.wait_until(cluster.controller, message="no controller")
    a, b, c = sorted(cluster.broker_ids, key=lambda i: i != controller)
    cluster.set_broker_config(c, {"zookeeper.session.timeout.ms": 30000})
    cluster.restart(c)
    cluster.wait_registered([c])
    create_topic(cluster, "kip279", 1, 3, "--replica-assignment", f"{a}:{b}:{c}")
    produce(cluster, "kip279", [b"m0"])
    wait_isr(cluster, "kip279", {a, b, c})
    assert cluster.controller() == controller
    e1 = read_states(cluster, "kip279")[0].leader_epoch

    stopped = []
    try:
        stop_fetching(cluster, b, stopped)
        produce(cluster, "kip279", [b"m1"], acks=1, via=[a])   # offset 1 in e1: on A and C
        cluster.wait_until(lambda: log_bytes(cluster, c, "kip279") == log_bytes(cluster, a, "kip279"),
                           timeout=30, message="C did not fetch m1")
        stop_fetching(cluster, c, stopped)               # it must not follow B and truncate
        cluster.kill(a)
        resume(cluster, b, stopped)
        e2 = wait_leader(cluster, "kip279", b).leader_epoch
        produce(cluster, "kip279", [b"m2"], acks=1, via=[b])   # offset 1 in e2: on B alone
        cluster.kill(b)
        resume(cluster, c, stopped)
        state = wait_leader(cluster, "kip279", c)
    finally:
        for broker in stopped:
            cluster.sigcont(broker)
    assert e1 < e2 < state.leader_epoch and state.isr == (c,)
    assert produce(cluster, "kip279", [b"m3"], acks=1) == [2]

    offset = log_size(cluster, b, "server.log")
    cluster.start_broker(b)
    cluster.start_broker(a)
    wait_isr(cluster, "kip279", {a, b, c})
    assert [v for _, v in read_all(cluster, "kip279")] == [b"m0", b"m1", b"m3"]
    truncation = log_text(cluster, b, "server.log", offset)
    assert f"truncating from offset 2 to 1 (leader {c} answered epoch {e1} ends at 2)" in truncation
    verify_replicas(cluster, "kip279")


def test_kip279_truncation_asks_again_until_the_epochs_agree(cluster_factory):
    """Issue 18 defect 1: after two unclean leader changes the follower holds neither the
    epoch the leader answers with nor where the logs part, and must ask epoch by epoch.

    C leads e0 and writes c4, c5 that B never gets; B leads e1 with b4..b7 at the same
    offsets; C, elected uncleanly, writes c6 in e2; B, elected uncleanly, leads e3.  C
    follows and asks about e2: B answers "e1 ends at 8", and C's end of the largest epoch
    it holds below e1 (e0) is 6.  One round cut C to 6 and kept c4, c5 beside B's b4, b5;
    asking again about e0 ("ends at 4") cuts to 4, where the logs agree.
    """
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": 60000}, session_timeout_ms=6000)
    # The controller holds no replica, so that no kill below moves it.
    controller = cluster.wait_until(cluster.controller, message="no controller")
    c, b = [i for i in cluster.broker_ids if i != controller]
    create_topic(cluster, "rounds", 1, 2, "--replica-assignment", f"{c}:{b}",
                 "--config", "unclean.leader.election.enable=true")
    assert produce(cluster, "rounds", [b"m0", b"m1", b"m2", b"m3"]) == [0, 1, 2, 3]
    wait_isr(cluster, "rounds", {b, c})
    e0 = read_states(cluster, "rounds")[0].leader_epoch

    stopped = []
    try:
        stop_fetching(cluster, b, stopped)
        assert produce(cluster, "rounds", [b"c4", b"c5"], acks=1, via=[c]) == [4, 5]   # e0, on C alone
        cluster.kill(c)
        resume(cluster, b, stopped)                      # still registered and in the ISR
    finally:
        for broker in stopped:
            cluster.sigcont(broker)
    e1 = wait_leader(cluster, "rounds", b).leader_epoch
    for offset, value in enumerate([b"b4", b"b5", b"b6", b"b7"], 4):
        # One batch each: the follower may then fetch from 6 without a batch mismatch.
        assert produce(cluster, "rounds", [value], acks=1, via=[b]) == [offset]
    cluster.kill(b)
    wait_offline(cluster, "rounds")
    cluster.start_broker(c)
    e2 = wait_leader(cluster, "rounds", c).leader_epoch     # unclean: C was out of the ISR
    assert produce(cluster, "rounds", [b"c6"], acks=1, via=[c]) == [6]
    cluster.kill(c)
    wait_offline(cluster, "rounds")
    cluster.start_broker(b)
    e3 = wait_leader(cluster, "rounds", b).leader_epoch
    assert e0 < e1 < e2 < e3

    offset = log_size(cluster, c, "server.log")
    cluster.start_broker(c)
    wait_isr(cluster, "rounds", {b, c})
    assert [v for _, v in read_all(cluster, "rounds")] == [b"m0", b"m1", b"m2", b"m3",
                                                           b"b4", b"b5", b"b6", b"b7"]
    assert segment_bytes(cluster, c, "rounds") == segment_bytes(cluster, b, "rounds"), \
        "the follower's log differs from the leader's"
    verify_replicas(cluster, "rounds")
    truncation = log_text(cluster, c, "server.log", offset)
    assert (f"truncating from offset 7 to 6 (leader {b} answered epoch {e1} ends at 8; our epoch {e0} "
            f"ends at 6, asking again)") in truncation
    assert f"truncating from offset 6 to 4 (leader {b} answered epoch {e0} ends at 4)" in truncation


def wait_offline(cluster, topic, partition=0):
    cluster.wait_until(lambda: read_states(cluster, topic)[partition].leader == -1,
                       timeout=cluster.session_timeout_ms / 1000 + 30, message=f"{topic} did not go offline")


def wait_leader(cluster, topic, broker, partition=0):
    return cluster.wait_until(lambda: (s := read_states(cluster, topic)[partition]).leader == broker and s,
                              timeout=cluster.session_timeout_ms / 1000 + 30,
                              message=f"broker {broker} did not take over")


def log_bytes(cluster, broker, topic, partition=0):
    return sum(f.stat().st_size for f in partition_dir(cluster, broker, topic, partition).glob("*.log"))


def test_corrupt_segment_tail_and_garbage_checkpoints_at_startup(cluster_factory):
    cluster = cluster_factory(1, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "damaged", 1, 1)
    produce(cluster, "damaged", [b"v%d" % i for i in range(20)])
    cluster.kill(1)
    data = cluster.data_dir(1)
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
