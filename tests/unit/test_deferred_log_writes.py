"""LeaderAndIsr changes memory only; its disk work follows in one pass per batch.

The request creates logs lazily and records each new leader's epoch with the
checkpoint write deferred; ``ReplicaManager.finish_deferred_writes`` (a
periodic task of the broker) then creates the directories and writes each
checkpoint once.  A crash before that pass must not make truncation answer
wrong epochs: the loader rebuilds a stale checkpoint from the batches.
"""
import os

import pytest

from kafka_ha.broker.deferred_log_writes import DeferredLogWrites
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log import Log, LogConfig, LogManager
from kafka_ha.log.checkpoints import LeaderEpochCheckpointFile
from kafka_ha.log.epoch_cache import LeaderEpochCache
from kafka_ha.log.loader import EPOCH_CHECKPOINT
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol.partition_states import to_wire
from kafka_ha.records import Record, build_v2_batch

ME = 1
CONFIG = LogConfig(retention_ms=-1)


def batch(n=4):
    return build_v2_batch([Record(None, b"x" * 100, 1000)] * n)


def leader_and_isr(partitions, leader_epoch=1, leader_of=lambda p: (ME, 2, 3)[p % 3], controller_epoch=1):
    states = [to_wire(PartitionStateInfo(TopicPartition("t", p), controller_epoch, leader_of(p), leader_epoch,
                                         (1, 2, 3), 0, (1, 2, 3))) for p in partitions]
    return {"controller_id": 2, "controller_epoch": controller_epoch, "partition_states": states,
            "live_leaders": []}


def broker(log_dir):
    config = BrokerConfig({"broker.id": ME, "zookeeper.connect": "127.0.0.1:1"})
    return ReplicaManager(config, LogManager([log_dir], CONFIG), None, lambda t: 1, lambda t: CONFIG,
                          lambda b: None)


def checkpoint(log_dir, tp):
    path = os.path.join(log_dir, f"{tp.topic}-{tp.partition}", EPOCH_CHECKPOINT)
    return LeaderEpochCheckpointFile(path).read()


def new_leader_of_six(log_dir):
    """A broker that followed t-0..5 at leader epoch 1 and appended five records to each
    (their checkpoints written); the caller makes it their leader at epoch 2."""
    rm = broker(log_dir)
    rm.leader_and_isr(leader_and_isr(range(6), leader_of=lambda p: 2), 1)
    for p in range(6):
        rm.partitions[TopicPartition("t", p)].append_as_follower(
            build_v2_batch([Record(None, b"r")] * 5, partition_leader_epoch=1))
    rm.finish_deferred_writes()
    return rm


@pytest.fixture
def writes(monkeypatch):
    """Every leader-epoch-checkpoint write, by path."""
    seen = []
    real = LeaderEpochCheckpointFile.write

    def write(self, entries, durable=True):
        seen.append(self.path)
        return real(self, entries, durable)
    monkeypatch.setattr(LeaderEpochCheckpointFile, "write", write)
    return seen


# --- the cache ---------------------------------------------------------------------------------------

def test_a_deferred_assignment_is_written_once_by_the_batch(tmp_path, writes):
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(str(tmp_path / EPOCH_CHECKPOINT)))
    assert cache.assign_deferred(3, 100) and cache.pending
    assert writes == [] and cache.entries() == [(3, 100)]
    assert cache.write_pending() and not cache.write_pending()
    assert len(writes) == 1 and LeaderEpochCheckpointFile(str(tmp_path / EPOCH_CHECKPOINT)).read() == [(3, 100)]


def test_sync_writes_a_deferred_assignment_before_the_records_become_durable(tmp_path):
    lg = Log(str(tmp_path / "t-0"), TopicPartition("t", 0), CONFIG)
    lg.assign_epoch_start_offset(2, defer_write=True)
    lg.append_as_leader(batch(), 2)                  # epoch 2 is known: no write of its own
    assert LeaderEpochCheckpointFile(os.path.join(lg.dir, EPOCH_CHECKPOINT)).read() == []
    lg.flush()
    assert LeaderEpochCheckpointFile(os.path.join(lg.dir, EPOCH_CHECKPOINT)).read() == [(2, 0)]
    assert not lg.disk_work_pending
    lg.close()


def test_a_held_cache_writes_nothing_until_released(tmp_path, writes):
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(str(tmp_path / EPOCH_CHECKPOINT)))
    cache.hold()
    cache.assign(1, 0)
    cache.truncate_from_end(0)
    cache.assign(2, 0)
    cache.sync()
    assert not cache.write_pending()
    assert writes == [] and cache.pending
    cache.release()
    assert writes == [] and cache.pending                   # still left to the pass or a sync
    cache.sync()
    assert len(writes) == 1 and LeaderEpochCheckpointFile(str(tmp_path / EPOCH_CHECKPOINT)).read() == [(2, 0)]


# --- the broker ----------------------------------------------------------------------------------------

def test_leader_and_isr_writes_nothing_and_the_pass_only_makes_the_directories(tmp_path, writes):
    log_dir = str(tmp_path / "logs")
    rm = broker(log_dir)
    response = rm.leader_and_isr(leader_and_isr(range(30)), 1)
    assert all(e["error_code"] == 0 for e in response["partition_errors"])
    assert writes == [] and os.listdir(log_dir) == []
    led = sorted(rm.led_partitions())
    assert len(led) == 10

    rm.finish_deferred_writes()
    assert sorted(os.listdir(log_dir)) == sorted(f"t-{p}" for p in range(30))
    # The new logs are empty: their checkpoints wait for their flush (a restart would
    # drop an entry at the log end anyway, and rebuilds a missing file from the batches).
    assert writes == [] and len(rm.deferred_writes) == 0
    rm.log_manager.flush_all()
    assert sorted(writes) == sorted(os.path.join(log_dir, f"{tp.topic}-{tp.partition}", EPOCH_CHECKPOINT)
                                    for tp in led)                       # once per new leader
    assert all(checkpoint(log_dir, tp) == [(1, 0)] for tp in led)


def test_a_failover_defers_the_new_leaders_checkpoints_of_existing_logs(tmp_path, writes):
    log_dir = str(tmp_path / "logs")
    rm = broker(log_dir)
    rm.leader_and_isr(leader_and_isr(range(6), leader_of=lambda p: 2), 1)     # followers of broker 2
    for p in range(6):
        rm.partitions[TopicPartition("t", p)].append_as_follower(
            build_v2_batch([Record(None, b"r")] * 5, partition_leader_epoch=1))
    before = len(writes)
    rm.leader_and_isr(leader_and_isr(range(6), leader_epoch=2, leader_of=lambda p: ME), 2)
    assert len(writes) == before
    assert rm.partitions[TopicPartition("t", 0)].log.end_offset_for_epoch(1) == (1, 5)   # in memory at once
    rm.finish_deferred_writes()
    assert len(writes) == before + 6
    assert all(checkpoint(log_dir, TopicPartition("t", p)) == [(1, 0), (2, 5)] for p in range(6))


def follow_and_append(rm, epochs, partitions=range(6)):
    """Broker 2 leads; this broker appends a batch of 5 records per leader epoch in ``epochs``."""
    for epoch in epochs:
        rm.leader_and_isr(leader_and_isr(partitions, leader_epoch=epoch, leader_of=lambda p: 2), epoch)
        for p in partitions:
            partition = rm.partitions[TopicPartition("t", p)]
            partition.append_as_follower(build_v2_batch(
                [Record(None, b"r")] * 5, base_offset=partition.log.log_end_offset,
                partition_leader_epoch=epoch))


def test_a_follower_defers_the_checkpoint_of_a_new_epoch_it_appends(tmp_path, writes):
    """A failover profile at 10k partitions: each follower wrote one checkpoint file per
    partition on the loop when the first batch of the new leader's epoch arrived.  It is
    left to the pass now, as the new leaders' own are."""
    log_dir = str(tmp_path / "logs")
    rm = broker(log_dir)
    follow_and_append(rm, [1])
    rm.finish_deferred_writes()
    rm.log_manager.flush_all()
    before = len(writes)
    follow_and_append(rm, [2])
    assert len(writes) == before and len(rm.deferred_writes) == 6
    assert rm.partitions[TopicPartition("t", 0)].log.end_offset_for_epoch(1) == (1, 5)   # in memory at once
    rm.finish_deferred_writes()
    assert len(writes) == before + 6 and len(rm.deferred_writes) == 0
    assert all(checkpoint(log_dir, TopicPartition("t", p)) == [(1, 0), (2, 5)] for p in range(6))


def test_a_crash_before_the_pass_recovers_a_followers_epochs(tmp_path):
    log_dir = str(tmp_path / "logs")
    rm = broker(log_dir)
    tp = TopicPartition("t", 0)
    follow_and_append(rm, [1], [0])
    rm.partitions[tp].log.flush()
    follow_and_append(rm, [4], [0])
    assert checkpoint(log_dir, tp) == [(1, 0)]                                # the crash window
    restarted = LogManager([log_dir], CONFIG).get_log(tp)
    assert restarted.epoch_cache.entries() == [(1, 0), (4, 5)]
    assert restarted.end_offset_for_epoch(3) == (1, 5)


def test_a_crash_before_the_pass_recovers_the_right_epochs(tmp_path):
    """The new leader appends in its deferred epoch, then the process dies before the
    pass: the checkpoint on disk is stale, and the restart rebuilds it from the batches."""
    log_dir = str(tmp_path / "logs")
    rm = broker(log_dir)
    tp = TopicPartition("t", 0)
    rm.leader_and_isr(leader_and_isr([0], leader_of=lambda p: ME), 1)
    rm.partitions[tp].append_as_leader(batch(), acks=1)                       # epoch 1: 0..3
    rm.partitions[tp].log.flush()
    rm.leader_and_isr(leader_and_isr([0], leader_epoch=5, leader_of=lambda p: ME), 2)
    rm.partitions[tp].append_as_leader(batch(), acks=1)                       # epoch 5: 4..7
    assert checkpoint(log_dir, tp) == [(1, 0)]                                # the crash window
    # the crash: no pass, no flush, no close
    restarted = LogManager([log_dir], CONFIG).get_log(tp)
    assert restarted.epoch_cache.entries() == [(1, 0), (5, 4)]
    assert restarted.end_offset_for_epoch(1) == (1, 4)        # a follower of epoch 1 cuts at 4, not 8
    assert restarted.end_offset_for_epoch(3) == (1, 4)


def test_a_crash_before_the_pass_without_appends_in_the_new_epoch(tmp_path):
    log_dir = str(tmp_path / "logs")
    rm = broker(log_dir)
    tp = TopicPartition("t", 0)
    rm.leader_and_isr(leader_and_isr([0], leader_of=lambda p: ME), 1)
    rm.partitions[tp].append_as_leader(batch(), acks=1)
    rm.partitions[tp].log.flush()
    rm.leader_and_isr(leader_and_isr([0], leader_epoch=5, leader_of=lambda p: ME), 2)
    restarted = LogManager([log_dir], CONFIG).get_log(tp)
    # Epoch 5 held no records: a written entry (5, 4) would have been dropped at the log end too.
    assert restarted.epoch_cache.entries() == [(1, 0)]
    assert restarted.end_offset_for_epoch(1) == (1, 4)


def test_a_log_deleted_while_its_directory_is_made_does_not_come_back(tmp_path):
    log_dir = str(tmp_path / "logs")
    mgr = LogManager([log_dir], CONFIG)
    tp = TopicPartition("t", 0)
    deferred = DeferredLogWrites(halt=pytest.fail, current_log=mgr.get_log,
                                 run_in_thread=lambda fn, args: (mgr.delete_log(tp), fn(*args)))
    deferred.add(mgr.get_or_create_log(tp))
    deferred.finish()
    assert mgr.get_log(tp) is None
    assert [name for name in os.listdir(log_dir) if not name.endswith("-delete")] == []
    mgr.close()


def test_the_pass_waits_while_a_leader_and_isr_is_applied(tmp_path, writes, monkeypatch):
    """Issue 23 (restart at 10k partitions): the periodic pass ran beside a big LeaderAndIsr,
    which yields to the loop between slices, and took half the loop from it (10k
    partitions applied in 3.4 s instead of 0.5 s).  While a LeaderAndIsr holds the state
    lock, the pass does not start, and one that is running stops between chunks; what it
    left is written by the next pass."""
    import kafka_ha.broker.deferred_log_writes as dlw
    monkeypatch.setattr(dlw, "CHUNK", 2)
    log_dir = str(tmp_path / "logs")
    rm = new_leader_of_six(log_dir)
    before = len(writes)
    rm.leader_and_isr(leader_and_isr(range(6), leader_epoch=2, leader_of=lambda p: ME), 2)

    with rm.state_changes.lock:                  # a LeaderAndIsr is being applied
        rm.finish_deferred_writes()
    assert len(writes) == before and len(rm.deferred_writes) == 6

    real_chunk = rm.deferred_writes._finish_chunk

    def chunk_then_a_leader_and_isr(chunk, pause):
        done = real_chunk(chunk, pause)
        rm.state_changes.lock.acquire()            # one arrives after the first chunk
        return done
    monkeypatch.setattr(rm.deferred_writes, "_finish_chunk", chunk_then_a_leader_and_isr)
    rm.finish_deferred_writes()
    assert len(writes) == before + 2 and len(rm.deferred_writes) == 4
    rm.state_changes.lock.release()
    monkeypatch.setattr(rm.deferred_writes, "_finish_chunk", real_chunk)
    rm.finish_deferred_writes()
    assert len(writes) == before + 6 and len(rm.deferred_writes) == 0
    assert all(checkpoint(log_dir, TopicPartition("t", p)) == [(1, 0), (2, 5)] for p in range(6))


def test_the_periodic_pass_waits_for_state_changes_to_be_quiet(tmp_path, writes):
    # In a failover the pass took 2 s of a survivor's loop while partitions waited to be
    # writable again: it now runs once LeaderAndIsr has been quiet for a while.
    from kafka_ha.broker import state_changes
    log_dir = str(tmp_path / "logs")
    rm = broker(log_dir)
    rm.leader_and_isr(leader_and_isr(range(6)), 1)
    changed = rm.state_changes.changed_ms
    rm.finish_deferred_writes_when_quiet(changed + state_changes.DEFERRED_WRITES_QUIET_MS - 1)
    assert len(rm.deferred_writes) == 6 and os.listdir(log_dir) == []
    rm.finish_deferred_writes_when_quiet(changed + state_changes.DEFERRED_WRITES_QUIET_MS)
    assert len(rm.deferred_writes) == 0 and len(os.listdir(log_dir)) == 6


def test_the_periodic_pass_runs_at_the_latest_after_its_longest_wait(tmp_path, writes):
    from kafka_ha.broker import state_changes
    log_dir = str(tmp_path / "logs")
    rm = broker(log_dir)
    rm.leader_and_isr(leader_and_isr(range(6)), 1)
    # State changes keep coming, but the last pass is long ago.
    rm.state_changes.changed_ms = rm.state_changes.pass_ms + state_changes.DEFERRED_WRITES_MAX_WAIT_MS
    rm.finish_deferred_writes_when_quiet(rm.state_changes.pass_ms + state_changes.DEFERRED_WRITES_MAX_WAIT_MS)
    assert len(rm.deferred_writes) == 0


def test_the_pass_rests_between_slices_and_leaves_most_of_the_loop_to_the_broker(tmp_path):
    """Issue 23 (controlled shutdown at 10k partitions): the first pass after a topic of
    10,000 partitions was created ran for 12-14 s beside the producers' first writes, taking
    as much of the loop as everything else together, and a controlled shutdown arriving
    meanwhile wrote its states in 2.9-4.6 s instead of 1.8 s.  The pass is background work:
    after each short slice it rests (a timer, not just a turn), so it takes a fraction of
    the loop however long it lasts."""
    log_dir = str(tmp_path / "logs")
    mgr = LogManager([log_dir], CONFIG)
    rests = []
    deferred = DeferredLogWrites(halt=pytest.fail, current_log=mgr.get_log,
                                 slice_ms=0, rest=lambda: rests.append(len(rests)))
    for p in range(8):
        deferred.add(mgr.get_or_create_log(TopicPartition("t", p)))
    assert deferred.finish() == 8
    assert len(rests) >= 7, "the pass rested between its slices"
    assert all(mgr.get_log(TopicPartition("t", p)).on_disk for p in range(8))
    mgr.close()


def test_a_running_pass_gives_way_to_a_leader_and_isr_that_came_and_went(tmp_path, writes):
    """Issue 23 (kill -9 at 10k partitions): the pass that followed a topic's creation was
    still running when a broker died, and it went on beside the failover (15% of a
    survivor's loop while its partitions waited to be writable again), because it only
    looked for a LeaderAndIsr being applied at that moment, and only between chunks of 500
    logs.  Any state change since the pass began now stops it at its next slice; what it
    left waits for the next quiet period."""
    log_dir = str(tmp_path / "logs")
    rm = new_leader_of_six(log_dir)
    before = len(writes)
    rm.leader_and_isr(leader_and_isr(range(6), leader_epoch=2, leader_of=lambda p: ME), 2)
    rests = []

    def rest_and_a_failover_meanwhile():
        rests.append(1)
        if len(rests) == 2:   # after the first log, one is applied completely while the pass rests
            rm.leader_and_isr(leader_and_isr([0], leader_epoch=3, leader_of=lambda p: 2), 3)
    rm.deferred_writes._slice_ms, rm.deferred_writes._rest = 0, rest_and_a_failover_meanwhile
    rm.finish_deferred_writes()
    written_by_the_pass = len(writes) - before
    assert 1 <= written_by_the_pass <= 2, "the pass stopped at its first slice after the change"
    assert len(rm.deferred_writes) == 6 - written_by_the_pass
    rm.state_changes.changed_ms -= 10**6                 # quiet again: the next pass writes the rest
    rm.deferred_writes._rest = lambda: None
    rm.finish_deferred_writes_when_quiet()
    assert len(rm.deferred_writes) == 0
    assert all(checkpoint(log_dir, TopicPartition("t", p))[:2] == [(1, 0), (2, 5)] for p in range(6))


def test_a_broker_leaving_the_cluster_stops_the_pass_before_any_leader_and_isr(tmp_path, writes):
    """The first sign of a failover on a broker is the controller's UpdateMetadata of the new
    live set, sent before its state writes (3-4 s at 10k partitions).  A pass that was running
    (the one after a topic's creation, in the bench) went on through those writes, on every
    broker, the controller's own included: it now stops there already."""
    from kafka_ha.broker.kafka_apis import KafkaApis
    from kafka_ha.broker.metadata_cache import MetadataCache
    from kafka_ha.protocol.api import ApiKey
    from kafka_ha.protocol.framing import RequestHeader
    log_dir = str(tmp_path / "logs")
    rm = broker(log_dir)
    apis = KafkaApis(rm, MetadataCache(ME))

    def update_metadata(live, correlation_id):
        body = {"controller_id": 2, "controller_epoch": 1, "partition_states": [],
                "live_brokers": [{"id": b, "host": "127.0.0.1", "port": 9090 + b, "rack": None}
                                 for b in live]}
        apis.apis[ApiKey.UPDATE_METADATA](body, RequestHeader(ApiKey.UPDATE_METADATA, 0,
                                                              correlation_id, "c"))
    update_metadata((1, 2, 3), 1)
    rm.leader_and_isr(leader_and_isr(range(6), leader_of=lambda p: 2), 1)
    for p in range(6):
        rm.partitions[TopicPartition("t", p)].append_as_follower(
            build_v2_batch([Record(None, b"r")] * 5, partition_leader_epoch=1))
    rests = []

    def rest_and_news_meanwhile():
        rests.append(1)
        if len(rests) == 2:
            update_metadata((1, 2, 3), 2)      # same live set: no sign of a failover
        if len(rests) == 3:
            update_metadata((1, 2), 3)         # broker 3 is gone
    rm.deferred_writes._slice_ms, rm.deferred_writes._rest = 0, rest_and_news_meanwhile
    rm.finish_deferred_writes()
    assert len(writes) == 2, "the pass went on past the same live set and stopped at the change"
    assert len(rm.deferred_writes) == 4


def test_the_pass_says_it_stopped_only_when_it_did(tmp_path):
    """Logs queued while a pass runs (a follower's appends) wait for the next one; that is not
    a stop, and the broker's log line said it was."""
    log_dir = str(tmp_path / "logs")
    mgr = LogManager([log_dir], CONFIG)
    deferred = DeferredLogWrites(halt=pytest.fail, current_log=mgr.get_log, slice_ms=0,
                                 rest=lambda: deferred.add(mgr.get_or_create_log(TopicPartition("new", 0))))
    for p in range(3):
        deferred.add(mgr.get_or_create_log(TopicPartition("t", p)))
    assert deferred.finish() == 3 and not deferred.stopped and len(deferred) == 1
    for p in range(3, 6):
        deferred.add(mgr.get_or_create_log(TopicPartition("t", p)))
    deferred.finish(pause=lambda: True)
    assert deferred.stopped
    mgr.close()
