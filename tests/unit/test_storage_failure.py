"""A failed write to a log directory halts the broker before anything is served or acked.

The halt is injected (a fake that raises instead of ending the process), so the
tests see what happens up to the moment the real one would call ``os._exit``.
"""
import errno
import os

import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.partition import Partition
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log import Log, LogConfig
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.records import Record, build_v2_batch
from tests.harness.full_disk import FullDisk

TP = TopicPartition("t", 0)
ENOSPC = os.strerror(errno.ENOSPC)


class Halted(Exception):
    pass


def fake_halt(message):
    raise Halted(message)


def state(leader, epoch=1):
    """Replicas 1 and 2, the ISR only the leader: acks=-1 needs no follower."""
    return PartitionStateInfo(TP, 1, leader, epoch, (leader,), 0, (1, 2))


@pytest.fixture
def log_(tmp_path):
    lg = Log(str(tmp_path / "t-0"), TP, LogConfig())
    yield lg
    lg.close()


def partition(log_, leader):
    p = Partition(TP, 1, log_, lambda: 1, isr_writer=None, halt=fake_halt)
    (p.make_leader if leader == 1 else p.make_follower)(state(leader))
    return p


def produce_request(acks):
    return {"acks": acks, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": build_v2_batch([Record(None, b"v" * 500)])}]}]}


@pytest.mark.parametrize("acks", [1, -1])
def test_a_produce_the_leader_cannot_append_halts_before_any_answer(log_, monkeypatch, acks):
    p = partition(log_, leader=1)
    plane = DataApis(HostedPartitions({TP: p}, lambda t: True), lambda t: 1000012)
    assert plane.produce(produce_request(acks), 2)["responses"][0]["partition_responses"][0]["error_code"] == 0
    woken = p.changed_event(up_to_leo=True)
    monkeypatch.setattr(os, "write", FullDisk(log_.dir, room=100))
    with pytest.raises(Halted) as halted:
        plane.produce(produce_request(acks), 2)
    assert str(halted.value) == (f"Halting due to unrecoverable I/O error while appending to [t,0] in "
                                 f"{log_.dir}: [Errno {errno.ENOSPC}] {ENOSPC}")
    assert log_.log_end_offset == 1 and p.high_watermark == 1
    assert not woken.is_set(), "no follower fetch was woken to read the failed append"


def test_a_follower_append_the_disk_cannot_hold_halts(log_, monkeypatch):
    p = partition(log_, leader=2)
    monkeypatch.setattr(os, "write", FullDisk(log_.dir))
    with pytest.raises(Halted, match=r"while appending to \[t,0\] in .*No space left on device"):
        p.append_as_follower(build_v2_batch([Record(None, b"x")], base_offset=0, partition_leader_epoch=1))
    assert log_.log_end_offset == 0


def test_a_truncation_that_fails_halts(log_, monkeypatch):
    p = partition(log_, leader=2)
    p.append_as_follower(build_v2_batch([Record(None, b"x")] * 4, base_offset=0, partition_leader_epoch=1))
    p.append_as_follower(build_v2_batch([Record(None, b"y")] * 4, base_offset=4, partition_leader_epoch=1))

    def failing_ftruncate(fd, length):
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    monkeypatch.setattr(os, "ftruncate", failing_ftruncate)
    with pytest.raises(Halted, match=r"while truncating \[t,0\] in .*Input/output error"):
        p.truncate_to(4)


def test_a_leader_epoch_that_cannot_be_checkpointed_halts_the_new_leader(log_, monkeypatch):
    def failing_replace(src, dst):
        raise OSError(errno.ENOSPC, ENOSPC)
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(Halted, match=r"while becoming leader of \[t,0\] in .*No space left on device"):
        partition(log_, leader=1)


class FullLogDirs:
    """A LogManager whose files cannot be written: ``failing`` names the operations that fail."""

    log_dirs = ["/data/a", "/data/b"]

    def __init__(self, *failing):
        self.failing = failing

    def _maybe_fail(self, operation):
        if operation in self.failing:
            raise OSError(errno.ENOSPC, ENOSPC)

    def high_watermarks(self):
        return {}

    def checkpoint_high_watermarks(self, hws):
        self._maybe_fail("high watermarks")

    def checkpoint_recovery_points(self):
        self._maybe_fail("recovery points")

    def close(self, run_each=None):
        self.checkpoint_recovery_points()     # as LogManager.close does, after flushing
        self._maybe_fail("close")


def replica_manager(log_manager):
    return ReplicaManager(BrokerConfig({"broker.id": 1, "zookeeper.connect": "127.0.0.1:2181"}), log_manager,
                          None, lambda t: 1, lambda t: LogConfig(), lambda b: None, halt=fake_halt)


def test_a_high_watermark_checkpoint_that_cannot_be_written_halts():
    with pytest.raises(Halted) as halted:
        replica_manager(FullLogDirs("high watermarks")).checkpoint_high_watermarks()
    assert str(halted.value) == ("Halting due to unrecoverable I/O error while writing the high watermark "
                                 f"checkpoint in /data/a, /data/b: [Errno {errno.ENOSPC}] {ENOSPC}")


@pytest.mark.parametrize("failing, action", [("high watermarks", "writing the high watermark checkpoint"),
                                             ("recovery points", "closing the logs"),
                                             ("close", "closing the logs")])
def test_a_shutdown_that_cannot_write_the_logs_halts_instead_of_finishing(failing, action):
    with pytest.raises(Halted, match=f"while {action} in /data/a, /data/b"):
        replica_manager(FullLogDirs(failing)).shutdown()
