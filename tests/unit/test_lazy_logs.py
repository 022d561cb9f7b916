"""A new log touches the disk only at its first write, and then behaves as if it always had.

LeaderAndIsr creates logs lazily (``Log(lazy=True)``): no directory, segment or
index file until the log is appended to, truncated fully, flushed or deleted.
Each scenario here runs on a lazily created log and on one created the old
way, and the two must agree on everything a reader, the replication and a
restart can see.
"""
import os

import pytest

import kafka_ha.log.flushing as flushing_module
from kafka_ha.log import Log, LogConfig, LogManager
from kafka_ha.log.loader import EPOCH_CHECKPOINT
from kafka_ha.model import TopicPartition
from kafka_ha.records import Record, build_v2_batch, decode_records

TP = TopicPartition("t", 0)
# Four ~900-byte batches fill a 4,000-byte segment: retention has segments to delete.
CONFIG = LogConfig(segment_bytes=4000, retention_bytes=0, retention_ms=-1, index_interval_bytes=1000)


def batch(n=4):
    return build_v2_batch([Record(None, b"x" * 200, 1000)] * n)


def new_log(tmp_path, lazy):
    return Log(str(tmp_path / ("lazy" if lazy else "eager") / "t-0"), TP, CONFIG, lazy=lazy)


def state(lg):
    """Everything the scenarios compare."""
    data = lg.read(lg.log_start_offset, 10**7).to_bytes() if lg.log_end_offset > lg.log_start_offset else b""
    return (lg.log_start_offset, lg.log_end_offset, lg.segment_base_offsets(), lg.epoch_cache.entries(),
            [r.offset for r in decode_records(data)], lg.end_offset_for_epoch(1))


def appended_in_two_epochs(lg):
    lg.assign_epoch_start_offset(1, defer_write=True)        # as make_leader does
    for _ in range(6):
        lg.append_as_leader(batch(), 1)
    lg.assign_epoch_start_offset(2, defer_write=True)
    for _ in range(6):
        lg.append_as_leader(batch(), 2)


def appended_then_truncated(lg):
    appended_in_two_epochs(lg)
    lg.truncate_to(30)


def appended_then_retention(lg):
    appended_in_two_epochs(lg)
    assert lg.delete_old_segments(now_ms=10**13, high_watermark=lg.log_end_offset) > 0


def truncated_fully(lg):
    lg.truncate_fully_and_start_at(500)
    lg.append_as_follower(build_v2_batch([Record(None, b"f")], base_offset=500, partition_leader_epoch=3))


def followed(lg):
    lg.append_as_follower(build_v2_batch([Record(None, b"a")] * 3, base_offset=0, partition_leader_epoch=4))
    lg.truncate_to(10)                                       # beyond the log end: nothing to cut


def untouched(lg):
    lg.assign_epoch_start_offset(1, defer_write=True)
    lg.truncate_to(0)


SCENARIOS = [appended_in_two_epochs, appended_then_truncated, appended_then_retention, truncated_fully,
             followed, untouched]


def test_a_new_log_touches_nothing_until_written(tmp_path):
    lg = new_log(tmp_path, lazy=True)
    lg.assign_epoch_start_offset(1, defer_write=True)
    assert lg.read(0, 1000).slices == [] and lg.offset_for_time(0) is None
    assert lg.delete_old_segments(now_ms=10**13, high_watermark=0) == 0
    assert not os.path.exists(os.path.dirname(lg.dir))
    lg.append_as_leader(batch(), 1)
    assert os.path.isdir(lg.dir) and lg.epoch_cache.entries() == [(1, 0)]
    # The first append does not wait for the checkpoint (its batch carries the epoch);
    # the broker's pass, or the flush before the records become durable, writes it.
    assert not os.path.exists(os.path.join(lg.dir, EPOCH_CHECKPOINT)) and lg.disk_work_pending
    assert lg.write_pending_checkpoint()
    with open(os.path.join(lg.dir, EPOCH_CHECKPOINT)) as f:
        assert f.read() == "0\n1\n1 0\n"
    lg.close()


def test_a_crash_after_the_first_append_rebuilds_the_missing_checkpoint(tmp_path):
    lg = new_log(tmp_path, lazy=True)
    lg.assign_epoch_start_offset(1, defer_write=True)
    lg.append_as_leader(batch(), 1)
    lg.assign_epoch_start_offset(4, defer_write=True)
    lg.append_as_leader(batch(), 4)
    # a crash: no flush, no close
    again = Log(lg.dir, TP, CONFIG)
    assert again.epoch_cache.entries() == [(1, 0), (4, 4)]
    again.close()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_a_lazily_created_log_behaves_like_one_created_on_disk(tmp_path, scenario):
    lazy, eager = new_log(tmp_path, lazy=True), new_log(tmp_path, lazy=False)
    scenario(lazy)
    scenario(eager)
    assert state(lazy) == state(eager)
    for lg in (lazy, eager):
        lg.flush()
        lg.close()
    reopened = [Log(lg.dir, TP, CONFIG, recovery_point=lg.recovery_point, clean_shutdown=True,
                    log_start_offset=lg.log_start_offset) for lg in (lazy, eager)]
    assert state(reopened[0]) == state(reopened[1])
    for lg in reopened:
        lg.close()


def test_a_lazy_log_is_deleted_like_any_other(tmp_path):
    mgr = LogManager([str(tmp_path / "logs")], CONFIG)
    lg = mgr.get_or_create_log(TP)
    assert not lg.on_disk
    assert mgr.delete_log(TP)
    assert mgr.delete_doomed_logs(now=10**9) == 1
    assert os.listdir(tmp_path / "logs") == []
    again = mgr.get_or_create_log(TP)
    assert (again.log_start_offset, again.log_end_offset) == (0, 0)
    mgr.close()


def test_a_crash_before_the_first_write_leaves_no_log(tmp_path):
    mgr = LogManager([str(tmp_path / "logs")], CONFIG)
    mgr.get_or_create_log(TP).assign_epoch_start_offset(3, defer_write=True)
    # a crash: nothing flushed or closed
    assert LogManager([str(tmp_path / "logs")], CONFIG).get_log(TP) is None


def test_a_clean_shutdown_writes_every_new_log(tmp_path):
    mgr = LogManager([str(tmp_path / "logs")], CONFIG)
    mgr.get_or_create_log(TP)
    mgr.close()
    again = LogManager([str(tmp_path / "logs")], CONFIG)
    assert again.get_log(TP) is not None and again.get_log(TP).on_disk
    again.close()


def test_the_first_flush_makes_the_new_directory_durable(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(flushing_module, "fsync_dir", synced.append)   # where Log.flush finds it
    lg = new_log(tmp_path, lazy=True)
    lg.append_as_leader(batch(), 1)
    lg.flush()
    lg.append_as_leader(batch(), 1)
    lg.flush()
    assert synced == [lg.dir, os.path.dirname(lg.dir)]    # once each: the files' names, then the log's
    lg.close()
