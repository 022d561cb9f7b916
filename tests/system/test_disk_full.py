"""Disk full on one broker, on a real small tmpfs (scenarios #12 and #13, docs/design.md §9).

One broker's ``log.dirs`` is a tmpfs of a few hundred KiB, filled by a filler
file until a write fails with ENOSPC.  A broker that cannot write its log or a
checkpoint halts (Kafka 0.8-0.10): a CRITICAL line (Kafka's FATAL) names what failed, the process
exits non-zero at once, its ZooKeeper session ends and the controller moves its
leaderships and ISR memberships to the others.  After the filler is deleted and
the broker restarted, it catches up and rejoins the ISR.
"""

import errno
import os
import signal
import subprocess

import pytest

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection, BrokerConnectionError
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.records.shallow import iter_entries
from tests.harness.kafka import create_topic, log_text, read_states
from tests.system.test_log_safety import produce, read_all, verify_replicas, wait_isr

pytestmark = pytest.mark.system
SESSION_MS = 4000
DISK_KIB = 512
OVERRIDES = {
    "min.insync.replicas": 2,
    # No periodic high-watermark checkpoint: in the append tests the log appends are the
    # only writes to the full disk, so the test knows which write failed.
    "replica.high.watermark.checkpoint.interval.ms": 600000,
}
HALT = "Halting due to unrecoverable I/O error while"
ENOSPC_TEXT = os.strerror(errno.ENOSPC)


@pytest.fixture
def small_disk():
    """``mount(cluster, broker)`` puts the broker's ``log.dirs`` on a fresh tmpfs of
    ``DISK_KIB``; at teardown that broker is killed (its open segments would keep the
    mount busy), then the tmpfs is unmounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = []

    def mount(cluster, broker):
        data = cluster.config_path(broker).parent / "data"   # LocalCluster's log.dirs
        data.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_KIB}k", "tmpfs", str(data)],
                              capture_output=True, text=True)
        assert done.returncode == 0, f"mount of a tmpfs on {data} failed: {done.stderr}"
        mounted.append((cluster, broker, data))
        return data

    yield mount
    for cluster, broker, data in reversed(mounted):
        try:
            cluster.kill(broker)
        finally:
            if subprocess.run(["umount", str(data)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(data)], check=True)


def fill(disk):
    """Write a filler file on ``disk`` until the file system is full.

    Whatever a segment's last page still holds stays writable (tmpfs allocates
    whole pages), so the next appends fail once that slack is used: some of them
    with a short write first, the partial write a broker must not serve.
    """
    path = disk / "filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with pytest.raises(OSError) as full:
            while True:
                os.write(fd, b"\0" * 65536)
    finally:
        os.close(fd)
    assert full.value.errno == errno.ENOSPC, full.value


def values(prefix, n, size=100):
    return [b"%s-%04d-" % (prefix.encode(), i) + b"x" * size for i in range(n)]


def assert_halted(cluster, broker, action):
    """Broker ``broker`` exited with a non-zero status after a FATAL line about ``action``."""
    cluster.wait_until(lambda: not cluster.broker_alive(broker), timeout=60,
                       message=f"broker {broker} kept running on a full disk")
    status = cluster.exit_status(broker)
    assert status not in (None, 0), f"broker {broker} exit status {status}"
    server_log = log_text(cluster, broker, "server.log")
    halts = [line for line in server_log.splitlines() if HALT in line]
    assert len(halts) == 1, halts
    assert f"{HALT} {action}" in halts[0] and ENOSPC_TEXT in halts[0], halts[0]
    assert halts[0].split("] ", 1)[1].startswith("CRITICAL "), halts[0]
    return halts[0]


def assert_whole_entries(segment_dir):
    """Every segment file under ``segment_dir`` ends at an entry boundary (no partial write)."""
    for segment in sorted(segment_dir.glob("*.log")):
        data = segment.read_bytes()
        end = max((e.end for e in iter_entries(data)), default=0)
        assert end == len(data), f"{segment}: {len(data) - end} bytes of a partial entry at {end}"


def start_with_a_small_disk(cluster_factory, small_disk, broker, topic):
    """Three brokers, ``broker``'s ``log.dirs`` on a small disk, and ``topic``: one partition
    led by broker 1 with ISR [1, 2, 3], holding 20 values acked by all.  Returns
    ``(cluster, disk, acked values)``."""
    cluster = cluster_factory(3, OVERRIDES, start=False, session_timeout_ms=SESSION_MS)
    disk = small_disk(cluster, broker)
    cluster.start()
    create_topic(cluster, topic, 1, 3, "--replica-assignment", "1:2:3")
    wait_isr(cluster, topic, {1, 2, 3})
    acked = values("before", 20)
    assert produce(cluster, topic, acked) == list(range(20))   # acks=all: every replica has them
    return cluster, disk, acked


def continue_and_rejoin(cluster, topic, broker, disk, acked):
    """With ``broker`` halted, acks=all writes succeed on the two others (min.insync.replicas
    2).  Then delete the filler and restart ``broker``: it rejoins the ISR, the replicas
    match up to the HW, and the topic holds exactly the acked values.  Returns them."""
    after = values("after", 50)
    assert len(produce(cluster, topic, after)) == len(after), "acks=all with two replicas in the ISR"
    acked = acked + after
    os.unlink(disk / "filler")
    cluster.start_broker(broker)
    wait_isr(cluster, topic, {1, 2, 3})
    verify_replicas(cluster, topic)
    consumed = [v for _, v in read_all(cluster, topic)]
    assert set(acked) <= set(consumed), "acked writes lost"
    assert set(consumed) <= set(acked), "values nobody acked appeared"
    return consumed


def test_follower_disk_full_halts_it_writes_continue_and_it_catches_up_after_restart(
        cluster_factory, small_disk):
    """#12: the follower's append fails, it halts and leaves the ISR; acks=all writes go on
    with ISR [1, 2]; with space again and restarted, it catches up and rejoins."""
    cluster, disk, acked = start_with_a_small_disk(cluster_factory, small_disk, 3, "fullf")

    fill(disk)
    during = values("during", 200)     # ~24 KiB: more than any slack left on broker 3's disk
    assert len(produce(cluster, "fullf", during)) == len(during)
    acked += during
    line = assert_halted(cluster, 3, "appending to [fullf,0]")
    assert str(disk / "fullf-0") in line
    assert_whole_entries(disk / "fullf-0")
    wait_isr(cluster, "fullf", {1, 2})
    assert read_states(cluster, "fullf")[0].leader == 1
    continue_and_rejoin(cluster, "fullf", 3, disk, acked)


def test_leader_disk_full_never_acks_the_failed_produce_and_leadership_moves(
        cluster_factory, small_disk):
    """#13: a produce the leader could not append is never acked; the leader halts, a
    follower leads, no acked write is lost, and the unappended one appears nowhere."""
    cluster, disk, acked = start_with_a_small_disk(cluster_factory, small_disk, 1, "fulll")
    before_state = read_states(cluster, "fulll")[0]

    fill(disk)
    # 32 KiB in one batch: more than the slack of the segment's last page, so it cannot
    # be appended whole (the write is short, then fails with ENOSPC).
    unacked = b"unacked-" + b"u" * 32768
    batch = build_v2_batch([Record(None, unacked)])
    conn = BrokerConnection("127.0.0.1", cluster.port(1), "disk-full-test", 30)
    try:
        response = conn.request(ApiKey.PRODUCE, 2, {"acks": -1, "timeout_ms": 30000, "topic_data": [
            {"name": "fulll", "partition_data": [{"index": 0, "records": batch}]}]})
    except BrokerConnectionError:
        response = None            # the connection closed: not acked
    finally:
        conn.close()
    if response is not None:
        error = response["responses"][0]["partition_responses"][0]["error_code"]
        assert error != 0, "a produce the leader could not append was acked"

    line = assert_halted(cluster, 1, "appending to [fulll,0]")
    assert str(disk / "fulll-0") in line
    assert_whole_entries(disk / "fulll-0")
    state = cluster.wait_until(
        lambda: (s := read_states(cluster, "fulll")[0]).leader in (2, 3) and s,
        timeout=SESSION_MS / 1000 + 30, message="leadership did not move off the halted broker")
    assert state.leader_epoch > before_state.leader_epoch and 1 not in state.isr
    consumed = continue_and_rejoin(cluster, "fulll", 1, disk, acked)
    assert unacked not in consumed, "the produce that was not appended became visible"


def test_clean_shutdown_on_a_full_disk_halts_instead_of_hanging(cluster_factory, small_disk):
    """SIGTERM with a full disk: the shutdown's high-watermark checkpoint fails, and the
    broker halts (deregistered, no clean-shutdown marker) instead of staying registered
    with its listener closed; restarted, it recovers its log and rejoins."""
    cluster, disk, acked = start_with_a_small_disk(cluster_factory, small_disk, 2, "fulls")

    fill(disk)
    os.kill(cluster.broker_pid(2), signal.SIGTERM)
    line = assert_halted(cluster, 2, "writing the high watermark checkpoint")
    assert str(disk) in line
    cluster.wait_deregistered(2)
    assert not (disk / ".kafka_cleanshutdown").exists()
    wait_isr(cluster, "fulls", {1, 3})
    continue_and_rejoin(cluster, "fulls", 2, disk, acked)
