"""Producer-state snapshots (``<offset>.snapshot`` beside a partition's log): their
format, and a state that outlives what the log still holds."""
import os
import struct

import pytest

from kafka_ha.broker import producer_snapshots as snapshots
from kafka_ha.broker.producer_state import BatchMetadata, ProducerBatch, ProducerStates
from kafka_ha.broker.producer_state_log import LogProducers
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log import Log
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode as E
from kafka_ha.records import Record, build_v2_batch

TP = TopicPartition("t", 0)
PID = 7


def idempotent(pid, epoch, seq, n=2, timestamp=1000):
    return build_v2_batch([Record(None, b"v%d" % i, timestamp) for i in range(n)],
                          producer=(pid, epoch, seq))


def open_log(tmp_path, segment_bytes=1 << 30):
    return Log(str(tmp_path / "t-0"), TP, LogConfig(segment_bytes=segment_bytes))


def append(log_, producers, records):
    decision, batches = producers.check(records)
    assert decision.error == E.NONE and decision.duplicate is None
    producers.appended(batches, log_.append_as_leader(records, 1).first_offset)


def snapshot_files(log_):
    return sorted(f for f in os.listdir(log_.dir) if f.endswith(".snapshot"))


def test_a_snapshot_round_trips_each_producers_last_batch():
    states = ProducerStates()
    states.record(ProducerBatch(PID, 2, 0, 10, 500), 100)
    states.record(ProducerBatch(PID, 2, 10, 5, 600), 110)
    states.record(ProducerBatch(9, 0, 2147483646, 3, 700), 200)     # wraps past 2**31 - 1
    data = snapshots.encode(states)
    version, = struct.unpack_from(">h", data)
    assert version == 1
    loaded = snapshots.decode(data)
    # Kafka's snapshots keep the last batch of each producer
    assert loaded.batches(PID) == (BatchMetadata(2, 10, 14, 110, 114, 600),)
    assert loaded.batches(9) == (BatchMetadata(0, 2147483646, 0, 200, 202, 700),)


@pytest.mark.parametrize("damage", [
    lambda d: d[:-1],                                   # cut short
    lambda d: d[:10] + bytes([d[10] ^ 1]) + d[11:],     # a flipped bit: CRC
    lambda d: struct.pack(">h", 9) + d[2:],             # unknown version
    lambda d: b"",
])
def test_a_damaged_snapshot_is_refused(damage):
    states = ProducerStates()
    states.record(ProducerBatch(PID, 0, 0, 2, 5), 0)
    with pytest.raises(snapshots.CorruptSnapshot):
        snapshots.decode(damage(snapshots.encode(states)))


def test_producers_outlive_the_segments_retention_deletes(tmp_path):
    """The producer's batches are all in segments that retention deletes: after a
    restart its next batch must still be taken (not UNKNOWN_PRODUCER_ID)."""
    log_ = open_log(tmp_path, segment_bytes=200)
    try:
        producers = LogProducers(log_, TP)
        for seq in range(0, 8, 2):                      # each batch rolls a new segment
            append(log_, producers, idempotent(PID, 0, seq))
        for _ in range(3):                              # others write: more rolls
            append(log_, producers, build_v2_batch([Record(None, b"plain" * 20)]))
        producers.settle()
        assert snapshot_files(log_)                     # written as segments rolled
        log_.maybe_increment_log_start_offset(log_.log_end_offset - 1)
        assert log_.delete_old_segments(now_ms=10**13, high_watermark=log_.log_end_offset) > 0
        assert all(e.producer_id < 0 for e in log_.headers())   # no batch of PID is left
    finally:
        log_.close()
    restarted = open_log(tmp_path, segment_bytes=200)
    try:
        decision, _ = LogProducers(restarted, TP).check(idempotent(PID, 0, 8))
        assert decision.error == E.NONE and decision.duplicate is None
    finally:
        restarted.close()


def test_a_clean_close_writes_a_snapshot_that_the_next_rebuild_starts_from(tmp_path, monkeypatch):
    log_ = open_log(tmp_path)
    producers = LogProducers(log_, TP)
    for seq in range(0, 20, 2):
        append(log_, producers, idempotent(PID, 0, seq))
    producers.close()
    assert snapshot_files(log_) == [f"{log_.log_end_offset:020d}.snapshot"]
    log_.close()
    restarted = open_log(tmp_path)
    try:
        scanned_from = []
        headers = restarted.headers
        monkeypatch.setattr(restarted, "headers",
                            lambda from_offset=0: scanned_from.append(from_offset) or headers(from_offset))
        producers = LogProducers(restarted, TP)
        assert producers.check(idempotent(PID, 0, 18))[0].duplicate.first_offset == 18
        assert producers.check(idempotent(PID, 0, 20))[0].error == E.NONE
        assert scanned_from and min(scanned_from) == 20          # nothing below the snapshot
    finally:
        restarted.close()


def test_truncation_removes_the_snapshots_beyond_the_new_end(tmp_path):
    log_ = open_log(tmp_path, segment_bytes=200)
    try:
        producers = LogProducers(log_, TP)
        for seq in range(0, 8, 2):
            append(log_, producers, idempotent(PID, 0, seq))
        producers.settle()
        offsets = [int(f.split(".")[0]) for f in snapshot_files(log_)]
        assert offsets and max(offsets) > 3
        log_.truncate_to(3)
        producers.truncated(log_.log_end_offset)
        producers.settle()
        assert all(int(f.split(".")[0]) <= 3 for f in snapshot_files(log_))
        log_.truncate_fully_and_start_at(100)
        producers.truncated(log_.log_end_offset, fully=True)
        producers.settle()
        assert snapshot_files(log_) == []
        # a new history from 100: the old producer is unknown here
        assert producers.check(idempotent(PID, 0, 8))[0].error == E.UNKNOWN_PRODUCER_ID
    finally:
        log_.close()


def test_a_corrupt_snapshot_is_deleted_and_the_log_scanned_instead(tmp_path):
    log_ = open_log(tmp_path)
    producers = LogProducers(log_, TP)
    for seq in range(0, 6, 2):
        append(log_, producers, idempotent(PID, 0, seq))
    producers.close()
    (name,) = snapshot_files(log_)
    with open(os.path.join(log_.dir, name), "r+b") as f:
        f.seek(12)
        f.write(b"\xff\xff")
    log_.close()
    restarted = open_log(tmp_path)
    try:
        producers = LogProducers(restarted, TP)
        assert producers.check(idempotent(PID, 0, 4))[0].duplicate.first_offset == 4
        producers.settle()
        assert snapshot_files(restarted) == []
    finally:
        restarted.close()


def test_a_snapshot_beyond_the_log_end_is_ignored(tmp_path):
    """An unclean stop can lose log data below a snapshot already on disk."""
    log_ = open_log(tmp_path)
    producers = LogProducers(log_, TP)
    for seq in range(0, 6, 2):
        append(log_, producers, idempotent(PID, 0, seq))
    producers.close()
    log_.truncate_to(2)                  # as recovery would cut a torn tail
    log_.close()
    restarted = open_log(tmp_path)
    try:
        producers = LogProducers(restarted, TP)
        assert producers.check(idempotent(PID, 0, 2))[0].error == E.NONE
        assert producers.check(idempotent(PID, 0, 0))[0].duplicate.first_offset == 0
    finally:
        restarted.close()


def test_the_broker_forgets_producers_idle_for_the_expiration_time(tmp_path):
    from kafka_ha.broker.replica_manager import ReplicaManager
    from kafka_ha.clock import now_ms
    from kafka_ha.config import BrokerConfig
    from kafka_ha.log import LogManager
    from kafka_ha.model import PartitionStateInfo
    from tests.harness.leader_setup import NoIsrChanges

    manager = LogManager([str(tmp_path / "logs")], LogConfig())
    config = BrokerConfig({"broker.id": 1, "zookeeper.connect": "127.0.0.1:1",
                           "transactional.id.expiration.ms": 3_600_000})
    rm = ReplicaManager(config, manager, NoIsrChanges(), lambda topic: 1, lambda topic: LogConfig(),
                        lambda b: None)
    try:
        partition = rm._create_partition(TP)
        partition.make_leader(PartitionStateInfo(TP, 1, 1, 0, (1,), 0, (1,)))
        recent = now_ms()
        partition.append_as_leader(idempotent(PID, 0, 0, timestamp=recent - 7_200_000), acks=1)
        partition.append_as_leader(idempotent(9, 0, 0, timestamp=recent), acks=1)
        assert rm.expire_idle_producers() == 1
        # the idle producer is unknown now; the recent one goes on
        assert partition.producers.check(idempotent(PID, 0, 2))[0].error == E.UNKNOWN_PRODUCER_ID
        assert partition.producers.check(idempotent(9, 0, 2))[0].error == E.NONE
    finally:
        manager.close()


def test_a_truncation_that_cuts_nothing_leaves_the_snapshots_alone(tmp_path, monkeypatch):
    """After a failover every follower truncates each partition to the leader's epoch end,
    which is mostly its own log end: at 10k partitions, queueing a snapshot-directory scan
    for each took a second of the loop.  No snapshot can lie beyond a log end that did not move."""
    from kafka_ha.broker.partition import Partition
    removed = []
    monkeypatch.setattr(snapshots.SnapshotFiles, "remove_above", lambda self, end: removed.append(end))
    log_ = open_log(tmp_path)
    try:
        p = Partition(TP, 1, log_, lambda: 1, None)
        for offset in range(4):
            p.append_as_follower(build_v2_batch([Record(None, b"v")], base_offset=offset))
        p.truncate_to(4)
        p.truncate_to(9)
        assert removed == []
        p.truncate_to(2)
        assert removed == [2] and log_.log_end_offset == 2
    finally:
        log_.close()
