"""LogManager: loading log directories, placement, checkpoints, shutdown marker."""
import logging
import os

import pytest

from kafka_ha.log import CorruptCheckpointError, LogConfig, LogManager
from kafka_ha.log.log_manager import CLEAN_SHUTDOWN_MARKER
from kafka_ha.log.segment import LogSegment
from kafka_ha.model import TopicPartition as TP
from kafka_ha.records import Record, build_v2_batch

CONFIG = LogConfig(segment_bytes=4000, retention_ms=-1)


def batch(n=4):
    return build_v2_batch([Record(None, b"x" * 200, 1000)] * n)


@pytest.fixture
def dirs(tmp_path):
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


def test_new_logs_go_to_the_least_loaded_dir(dirs):
    mgr = LogManager(dirs, CONFIG)
    placed = {tp: os.path.dirname(mgr.get_or_create_log(tp).dir)
              for tp in (TP("a", 0), TP("a", 1), TP("b", 0), TP("my-topic", 12))}
    assert sorted(placed.values()).count(dirs[0]) == 2 and sorted(placed.values()).count(dirs[1]) == 2
    assert mgr.get_or_create_log(TP("a", 0)) is mgr.get_log(TP("a", 0))
    new_log = mgr.get_log(TP("my-topic", 12))
    assert new_log.dir == os.path.join(placed[TP("my-topic", 12)], "my-topic-12")
    assert not os.path.exists(new_log.dir)           # created lazily, by the first write
    new_log.append_as_leader(batch(), 0)
    assert os.path.isdir(new_log.dir)
    mgr.delete_log(TP("a", 1))                     # its directory (the second) now holds the fewest
    assert os.path.dirname(mgr.get_or_create_log(TP("c", 0)).dir) == placed[TP("a", 1)] == dirs[1]
    mgr.close()
    again = LogManager(dirs, CONFIG)                # counted again when loaded
    assert os.path.dirname(again.get_or_create_log(TP("d", 0)).dir) == dirs[0]
    assert os.path.dirname(again.get_or_create_log(TP("d", 1)).dir) == dirs[1]
    again.close()


def test_restart_loads_every_partition_and_skips_strangers(dirs, caplog):
    mgr = LogManager(dirs, CONFIG)
    for tp in (TP("a", 0), TP("b-c", 1)):
        mgr.get_or_create_log(tp).append_as_leader(batch(), 0)
    mgr.close()
    os.makedirs(os.path.join(dirs[0], "lost+found"))
    with caplog.at_level(logging.WARNING):
        again = LogManager(dirs, CONFIG)
    assert sorted(again.all_logs()) == [TP("a", 0), TP("b-c", 1)]
    assert again.get_log(TP("b-c", 1)).log_end_offset == 4
    assert "lost+found" in caplog.text
    again.close()


def test_clean_shutdown_skips_recovery_and_crash_does_not(dirs, monkeypatch):
    mgr = LogManager(dirs, CONFIG)
    mgr.get_or_create_log(TP("a", 0)).append_as_leader(batch(), 0)
    mgr.close()
    assert all(os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_MARKER)) for d in dirs)
    recovered = []
    real = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, m: recovered.append(self.dir) or real(self, m))
    again = LogManager(dirs, CONFIG)
    assert recovered == [] and not any(os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_MARKER)) for d in dirs)
    again.get_log(TP("a", 0)).append_as_leader(batch(), 0)               # then a crash: no close()
    again.flush_all()
    LogManager(dirs, CONFIG)
    assert len(recovered) == 1                                           # the active segment only


def test_corrupt_recovery_point_checkpoint_recovers_everything(dirs, caplog, monkeypatch):
    mgr = LogManager(dirs, CONFIG)
    lg = mgr.get_or_create_log(TP("a", 0))
    for _ in range(10):
        lg.append_as_leader(batch(), 0)
    mgr.close()
    log_dir = os.path.dirname(lg.dir)
    with open(os.path.join(log_dir, "recovery-point-offset-checkpoint"), "w") as f:
        f.write("0\n7\ngarbage\n")
    recovered = []
    real = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, m: recovered.append(self.base_offset) or real(self, m))
    with caplog.at_level(logging.WARNING):
        again = LogManager(dirs, CONFIG)
    assert "recovering every log" in caplog.text and "line 2" in caplog.text
    assert recovered == again.get_log(TP("a", 0)).segment_base_offsets() and len(recovered) > 1
    assert again.get_log(TP("a", 0)).log_end_offset == 40
    again.close()


def test_high_watermark_checkpoints(dirs):
    mgr = LogManager(dirs, CONFIG)
    for tp in (TP("a", 0), TP("a", 1), TP("b", 0)):
        mgr.get_or_create_log(tp)
    assert mgr.high_watermarks() == {}
    hws = {TP("a", 0): 5, TP("a", 1): 7, TP("b", 0): 0, TP("gone", 0): 3}
    mgr.checkpoint_high_watermarks(hws)
    assert mgr.high_watermarks() == {TP("a", 0): 5, TP("a", 1): 7, TP("b", 0): 0}
    per_dir = [open(os.path.join(d, "replication-offset-checkpoint")).read() for d in dirs]
    assert sorted(int(text.split("\n")[1]) for text in per_dir) == [1, 2]
    with open(os.path.join(dirs[1], "replication-offset-checkpoint"), "w") as f:
        f.write("0\n1\na 1 notanumber\n")
    with pytest.raises(CorruptCheckpointError) as err:
        mgr.high_watermarks()
    assert "replication-offset-checkpoint, line 3" in str(err.value)
    mgr.close()


def test_recovery_points_checkpointed_after_flush(dirs):
    mgr = LogManager(dirs, CONFIG)
    lg = mgr.get_or_create_log(TP("a", 0))
    lg.append_as_leader(batch(), 0)
    mgr.flush_all()
    text = open(os.path.join(os.path.dirname(lg.dir), "recovery-point-offset-checkpoint")).read()
    assert text == "0\n1\na 0 4\n"
    mgr.close()


def test_flush_dirty_logs_flushes_only_logs_past_their_flush_ms(dirs):
    mgr = LogManager(dirs, CONFIG)
    timed = mgr.get_or_create_log(TP("timed", 0), LogConfig(flush_ms=500))
    untimed = mgr.get_or_create_log(TP("untimed", 0))
    for lg in (timed, untimed):
        lg.append_as_leader(batch(), 0)
    assert mgr.flush_dirty_logs(timed.last_flush_ms + 499) == 0 and timed.recovery_point == 0
    assert mgr.flush_dirty_logs(timed.last_flush_ms + 500) == 1
    assert (timed.recovery_point, untimed.recovery_point) == (4, 0)
    mgr.close()


def test_delete_log_and_retention(dirs):
    mgr = LogManager(dirs, LogConfig(segment_bytes=4000, retention_bytes=0, retention_ms=-1))
    lg = mgr.get_or_create_log(TP("a", 0))
    for _ in range(10):
        lg.append_as_leader(batch(), 0)
    assert mgr.run_retention(now_ms=0, high_watermarks={TP("a", 0): 0}) == 0
    assert lg.segment_base_offsets() == [0, 16, 32]                     # four 897-byte batches each
    assert mgr.run_retention(now_ms=0, high_watermarks={TP("a", 0): 40}) == 2   # all but the active one
    assert lg.segment_base_offsets() == [32] and lg.log_start_offset == 32
    assert mgr.delete_log(TP("a", 0)) and not os.path.exists(os.path.join(os.path.dirname(lg.dir), "a-0"))
    assert mgr.get_log(TP("a", 0)) is None and not mgr.delete_log(TP("a", 0))
    mgr.close()


def test_same_partition_in_two_dirs_is_refused(dirs):
    for d in dirs:
        os.makedirs(os.path.join(d, "a-0"))
    with pytest.raises(RuntimeError, match="both"):
        LogManager(dirs, CONFIG)
