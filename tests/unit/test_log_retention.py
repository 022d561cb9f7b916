"""Retention and the log start offset: never past the high watermark, and followers follow.

A segment may go only when all of it is below the high watermark (the next
segment's base offset <= HW): uncommitted data must survive whatever the
retention settings say.  The leader's log start offset reaches its followers in
Fetch responses; a follower moves its own log start there (never beyond its own
HW), and retention then deletes its segments wholly below it.
"""
import os

import pytest

from kafka_ha.broker.partition import Partition
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log import Log, LogConfig, LogManager, OffsetOutOfRangeError
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.records import Record, build_v2_batch, decode_records
from tests.harness.leader_setup import NoIsrChanges

TP = TopicPartition("t", 0)
# Four 897-byte batches of 4 records fill a 4,000-byte segment: bases 0, 16, 32, ...
KEEP_NOTHING = LogConfig(segment_bytes=4000, retention_bytes=0, retention_ms=-1)


def batch(n=4):
    return build_v2_batch([Record(None, b"x" * 200, 1000)] * n)


def fill(log, batches=10, epoch=0):
    for _ in range(batches):
        log.append_as_leader(batch(), epoch)


def offsets(fetch, min_offset=0):
    return [r.offset for r in decode_records(fetch.to_bytes(), min_offset)]


@pytest.fixture
def manager(tmp_path):
    mgr = LogManager([str(tmp_path / "logs")], KEEP_NOTHING)
    yield mgr
    mgr.close()


def broker(manager, broker_id=1):
    config = BrokerConfig({"broker.id": broker_id, "zookeeper.connect": "127.0.0.1:1"})
    return ReplicaManager(config, manager, NoIsrChanges(), lambda topic: 1, lambda topic: KEEP_NOTHING,
                          lambda b: None)


def lead(rm, isr=(1, 2)):
    partition = rm._create_partition(TP)
    partition.make_leader(PartitionStateInfo(TP, 1, 1, 0, isr, 0, isr))
    return partition


# --- the broker's retention task -------------------------------------------------------------------


def test_the_retention_task_never_deletes_at_or_above_the_leaders_high_watermark(manager):
    rm = broker(manager)
    leader = lead(rm)
    for _ in range(10):
        leader.append_as_leader(batch(), acks=1)
    assert leader.log.segment_base_offsets() == [0, 16, 32] and leader.high_watermark == 0
    rm._run_retention()                                     # follower 2 has confirmed nothing
    assert leader.log.segment_base_offsets() == [0, 16, 32] and leader.log.log_start_offset == 0
    leader.on_follower_fetch(2, 20, now=0)                  # 0..19 committed
    assert leader.high_watermark == 20
    rm._run_retention()                                     # segment 16.. holds 20..31: it stays
    assert leader.log.segment_base_offsets() == [16, 32] and leader.log.log_start_offset == 16


def test_the_retention_task_leaves_logs_without_a_partition_alone(manager):
    fill(manager.get_or_create_log(TP))                     # loaded, no LeaderAndIsr yet: HW unknown
    broker(manager)._run_retention()
    assert manager.get_log(TP).segment_base_offsets() == [0, 16, 32]


def test_a_follower_deletes_only_below_its_own_high_watermark(manager):
    rm = broker(manager, broker_id=2)
    follower = rm._create_partition(TP)
    follower.make_follower(PartitionStateInfo(TP, 1, 1, 0, (1, 2), 0, (1, 2)))
    fill(follower.log)                                      # as if fetched: 0..39
    follower.set_follower_high_watermark(17)
    rm._run_retention()
    assert follower.log.segment_base_offsets() == [16, 32]


# --- the log start offset --------------------------------------------------------------------------


def test_the_log_start_offset_can_move_into_a_segment(tmp_path):
    lg = Log(str(tmp_path / "t-0"), TP, KEEP_NOTHING)
    fill(lg, epoch=3)
    lg.assign_epoch_start_offset(4)                         # a new leader at 40
    assert lg.maybe_increment_log_start_offset(22)
    assert (lg.log_start_offset, lg.segment_base_offsets()) == (22, [0, 16, 32])
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(21, 10**6)
    assert offsets(lg.read(22, 10**6), 22) == list(range(22, 40))
    assert lg.offset_for_time(-2) == (22, -1) and lg.offset_for_time(0)[0] == 22
    assert lg.epoch_cache.entries() == [(3, 22), (4, 40)]
    assert not lg.maybe_increment_log_start_offset(10)      # never backwards
    assert lg.log_start_offset == 22
    lg.close()


def test_the_log_start_offset_never_passes_the_log_end(tmp_path):
    lg = Log(str(tmp_path / "t-0"), TP, KEEP_NOTHING)
    fill(lg, 2)
    assert lg.maybe_increment_log_start_offset(100)
    assert (lg.log_start_offset, lg.log_end_offset) == (8, 8)
    lg.close()


def test_retention_deletes_segments_wholly_below_the_log_start(tmp_path):
    lg = Log(str(tmp_path / "t-0"), TP, LogConfig(segment_bytes=4000, retention_ms=-1))  # no retention
    fill(lg)
    lg.maybe_increment_log_start_offset(20)
    assert lg.delete_old_segments(now_ms=0, high_watermark=40) == 1
    assert (lg.log_start_offset, lg.segment_base_offsets()) == (20, [16, 32])
    lg.close()


def test_truncation_below_the_log_start_moves_it_down(tmp_path):
    lg = Log(str(tmp_path / "t-0"), TP, KEEP_NOTHING)
    fill(lg)
    lg.maybe_increment_log_start_offset(22)
    lg.truncate_to(18)
    assert (lg.log_start_offset, lg.log_end_offset) == (16, 16)
    lg.close()


def test_a_follower_partition_follows_the_leaders_log_start_up_to_its_own_high_watermark(manager):
    follower = Partition(TP, 2, manager.get_or_create_log(TP), lambda: 1, NoIsrChanges())
    follower.make_follower(PartitionStateInfo(TP, 1, 1, 0, (1, 2), 0, (1, 2)))
    fill(follower.log)
    follower.set_follower_high_watermark(12)
    follower.maybe_increment_log_start_offset(30)           # the leader's: we have not seen the HW there
    assert follower.log.log_start_offset == 12
    follower.set_follower_high_watermark(40)
    follower.maybe_increment_log_start_offset(30)
    assert follower.log.log_start_offset == 30


def test_the_log_start_offset_survives_a_restart(tmp_path):
    dirs = [str(tmp_path / "logs")]
    mgr = LogManager(dirs, KEEP_NOTHING)
    fill(mgr.get_or_create_log(TP))
    mgr.get_or_create_log(TopicPartition("u", 0))
    mgr.get_log(TP).maybe_increment_log_start_offset(22)
    mgr.close()
    assert open(os.path.join(dirs[0], "log-start-offset-checkpoint")).read() == "0\n1\nt 0 22\n"
    again = LogManager(dirs, KEEP_NOTHING)
    assert again.get_log(TP).log_start_offset == 22
    assert again.get_log(TopicPartition("u", 0)).log_start_offset == 0
    again.close()


def test_the_retention_task_tells_the_fetch_sessions_a_partition_rests_in(manager):
    # An idle follower's session reads no resting partition (fetch_sessions): the log start
    # that retention moved reaches it only because the partition says it changed.
    from kafka_ha.broker.fetch_sessions import CachedPartition, FetchSession
    rm = broker(manager)
    leader = lead(rm)
    for _ in range(10):
        leader.append_as_leader(batch(), acks=1)
    leader.on_follower_fetch(2, 40, now=0)
    session = FetchSession(1, 2, 1, 0, {TP: CachedPartition(40, 1 << 20, 40, 0)})
    session.settle(rm.hosted.get)
    assert session.wanted() == []                           # resting
    rm._run_retention()
    assert leader.log.log_start_offset == 32 and session.wanted() == [(TP, 40, 1 << 20)]


def test_the_retention_task_tells_the_fetchers_a_followed_log_start_moved(manager):
    # A fetcher computes a position again only where it may have moved (replica_fetcher):
    # retention is the one mover it does not see itself.
    class RecordingFetcher:
        told = set()

        def positions_changed(self, tps):
            self.told |= tps
    rm = broker(manager, broker_id=2)
    follower = rm._create_partition(TP)
    follower.make_follower(PartitionStateInfo(TP, 1, 1, 0, (1, 2), 0, (1, 2)))
    fill(follower.log)
    rm.fetchers[1] = fetcher = RecordingFetcher()
    rm._run_retention()                                     # HW 0: nothing goes
    assert fetcher.told == set()
    follower.set_follower_high_watermark(17)
    rm._run_retention()
    assert follower.log.log_start_offset == 16 and fetcher.told == {TP}
    rm.fetchers.clear()
