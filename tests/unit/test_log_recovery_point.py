"""The recovery point: how much of a log a restart must re-check, with Kafka's default flush settings.

With no flush.messages / flush.ms (Kafka's defaults: rely on replication), a
log is still flushed up to a rolled segment's end, as Kafka does on every
roll: the broker's recovery-point task fsyncs rolled segments (in a native
thread) and then checkpoints, so a crash re-checks only the active segment.
A clean shutdown flushes everything: the next start re-checks nothing.
"""
import os
import threading

import pytest

from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log import LogConfig, LogManager
from kafka_ha.log.segment import LogSegment
from kafka_ha.model import TopicPartition as TP
from kafka_ha.records import Record, build_v2_batch

CONFIG = LogConfig(segment_bytes=4000, retention_ms=-1)      # no flush settings
A0 = TP("a", 0)


def batch(n=4):
    return build_v2_batch([Record(None, b"x" * 200, 1000)] * n)


@pytest.fixture
def dirs(tmp_path):
    return [str(tmp_path / "d1")]


@pytest.fixture
def recovered(monkeypatch):
    """Base offsets of the segments recovered (CRC-checked) from now on."""
    bases = []
    real = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, m: bases.append(self.base_offset) or real(self, m))
    return bases


def broker(mgr):
    return ReplicaManager(BrokerConfig({"broker.id": 1, "zookeeper.connect": "127.0.0.1:1"}), mgr, None,
                          lambda t: 1, lambda t: CONFIG, lambda b: None)


def written(dirs, batches=10):
    mgr = LogManager(dirs, CONFIG)
    lg = mgr.get_or_create_log(A0)
    for _ in range(batches):
        lg.append_as_leader(batch(), 0)
    assert lg.segment_base_offsets() == [0, 16, 32] and lg.recovery_point == 0
    return mgr, lg


def test_after_the_recovery_point_task_a_crash_re_checks_only_the_active_segment(dirs, recovered):
    mgr, lg = written(dirs)
    broker(mgr).checkpoint_recovery_points()                # the periodic task; then a crash
    assert lg.recovery_point == 32
    again = LogManager(dirs, CONFIG)
    assert recovered == [32] and again.get_log(A0).log_end_offset == 40
    again.close()


def test_the_rolled_segments_are_fsynced_in_a_native_thread(dirs, monkeypatch):
    mgr, lg = written(dirs)
    fsynced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsynced.append((os.readlink(f"/proc/self/fd/{fd}"),
                                                                 threading.get_ident())), real(fd)))
    broker(mgr).checkpoint_recovery_points()
    segment_files = {path for path, _ in fsynced if path.endswith((".log", ".index"))}
    assert segment_files == {os.path.join(lg.dir, f"{base:020d}{suffix}")
                             for base in (0, 16) for suffix in (".log", ".index")}
    assert all(thread != threading.get_ident() for path, thread in fsynced if path in segment_files)
    mgr.close()


def test_a_clean_shutdown_re_checks_nothing(dirs, recovered):
    mgr, lg = written(dirs)
    broker(mgr).shutdown()
    again = LogManager(dirs, CONFIG)
    assert recovered == [] and again.get_log(A0).recovery_point == 40
    again.get_log(A0).append_as_leader(batch(), 0)          # then a crash: only what came since
    again.flush_all()
    LogManager(dirs, CONFIG)
    assert recovered == [32]


def test_a_truncation_during_a_threaded_flush_keeps_the_recovery_point_honest(dirs):
    mgr, lg = written(dirs)

    def fsync_while_truncating(fd):
        if lg.log_end_offset == 40:
            lg.truncate_to(20)                              # another greenlet, while the thread syncs
            lg.append_as_leader(batch(), 1)                 # 16..19 is gone: 16..23 are new, unflushed
        os.fsync(fd)
    lg.flush(up_to=32, fsync=fsync_while_truncating)
    assert lg.recovery_point <= 16
    mgr.close()


def test_a_clean_shutdown_flushes_the_logs_in_native_threads(dirs, monkeypatch):
    """Issue 23: the shutdown flush of 10,000 logs (an fsync of each segment, index and epoch
    checkpoint, and of each log's directory) held a broker's event loop for 47 s, its
    ZooKeeper session expired meanwhile.  Each log's flush runs in a native thread now."""
    mgr = LogManager(dirs, CONFIG)
    logs = [mgr.get_or_create_log(TP("a", p)) for p in range(4)]
    for lg in logs:
        lg.append_as_leader(batch(), 0)
    fsynced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsynced.append((os.readlink(f"/proc/self/fd/{fd}"),
                                                                 threading.get_ident())), real(fd)))
    broker(mgr).shutdown()
    in_logs = [(path, thread) for path, thread in fsynced
               if any(path == lg.dir or path.startswith(lg.dir + os.sep) for lg in logs)]
    assert {path for path, _ in in_logs} >= {os.path.join(lg.dir, f"{0:020d}.log") for lg in logs}
    assert all(thread != threading.get_ident() for _, thread in in_logs)
    assert all(lg.recovery_point == lg.log_end_offset == 4 for lg in logs)
