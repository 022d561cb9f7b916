"""Log: leader/follower appends, reads, rolls, truncation, recovery, retention, full disks."""
import errno
import os

import pytest

from kafka_ha.log import Log, LogConfig, OffsetOutOfRangeError, RecordSetTooLargeError
from kafka_ha.model import TopicPartition
from kafka_ha.records import (CorruptRecordError, OffsetMismatchError, Record, RecordTooLargeError,
                              build_legacy_message_set, build_v2_batch, decode_records)
from tests.harness.full_disk import FullDisk

TP = TopicPartition("t", 0)
CONFIG = LogConfig(segment_bytes=8000, index_interval_bytes=1000, retention_ms=-1)


def produce(n=4, size=300, ts=1000):
    return build_v2_batch([Record(None, b"v" * size, ts + i) for i in range(n)])


def offsets(fetch, min_offset=0):
    return [r.offset for r in decode_records(fetch.to_bytes(), min_offset)]


def open_log(tmp_path, config=CONFIG, **kwargs):
    return Log(str(tmp_path / "t-0"), TP, config, **kwargs)


@pytest.fixture
def lg(tmp_path):
    log = open_log(tmp_path)
    yield log
    log.close()


def fill(log, batches=20, epoch=0):
    for _ in range(batches):
        log.append_as_leader(produce(), epoch)


BATCH = len(produce())          # 1,297 bytes: six batches per 8,000-byte segment


def test_leader_appends_assign_offsets_and_roll_segments(lg):
    info = lg.append_as_leader(produce(), 3)
    assert info == (0, 3, 4, 1003, 1, -1)   # -1: CreateTime, no log append time
    fill(lg, 19, epoch=3)
    assert lg.log_end_offset == 80
    assert lg.segment_base_offsets() == [0, 24, 48, 72]
    assert lg.epoch_cache.entries() == [(3, 0)]
    assert sorted(os.listdir(lg.dir))[:2] == ["00000000000000000000.index", "00000000000000000000.log"]


def test_read_across_segments_and_mid_segment(lg):
    fill(lg)
    assert offsets(lg.read(0, 10**6)) == list(range(80))                  # spans all four segments
    fetch = lg.read(30, 3 * BATCH)
    assert fetch.first_offset == 30 and len(fetch.slices) == 1
    assert offsets(fetch, 30) == list(range(30, 40))                      # batch 28..31 starts mid-way
    assert fetch.slices[0].first_entry_offset == 28
    spanning = lg.read(44, 3 * BATCH)                                     # 44..47, then the next segment
    assert len(spanning.slices) == 2 and offsets(spanning) == list(range(44, 56))


def test_read_limits(lg):
    fill(lg)
    assert lg.read(80, 1000).slices == []                                 # at the LEO: empty
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(81, 1000)
    assert offsets(lg.read(0, 1)) == [0, 1, 2, 3]                         # min one message
    assert lg.read(0, 1, min_one_message=False).size == 1
    # not cut (Fetch v3+, partitions after the first): nothing, not the next segment's entries
    assert lg.read(0, 1, min_one_message=False, cut_oversized=False).slices == []
    assert lg.read(44, 1, min_one_message=False, cut_oversized=False).slices == []
    assert offsets(lg.read(44, 2 * BATCH, min_one_message=False, cut_oversized=False)) == \
        list(range(44, 52))
    assert offsets(lg.read(0, 10**6, max_offset=10)) == list(range(8))    # batch 8..11 straddles the HW
    assert offsets(lg.read(20, 10**6, max_offset=50)) == list(range(20, 48))
    assert lg.read(50, 10**6, max_offset=50).slices == []


def test_mixed_formats_round_trip(lg):
    lg.append_as_leader(build_legacy_message_set([Record(b"a", b"0")] * 2, magic=0), 1)
    lg.append_as_leader(build_legacy_message_set([Record(b"b", b"1")] * 3, magic=1, compression="gzip"), 1)
    lg.append_as_leader(build_legacy_message_set([Record(b"c", b"2")] * 2, magic=0, compression="gzip"), 1)
    lg.append_as_leader(produce(2), 1)
    assert lg.log_end_offset == 9
    assert offsets(lg.read(0, 10**6)) == list(range(9))
    assert offsets(lg.read(3, 10**6), 3) == list(range(3, 9))


def test_append_errors(lg):
    with pytest.raises(CorruptRecordError):
        lg.append_as_leader(produce()[:-1], 0)
    big = LogConfig(segment_bytes=5000, max_message_bytes=1_000_000)
    lg.config = LogConfig(max_message_bytes=1000)
    with pytest.raises(RecordTooLargeError):
        lg.append_as_leader(produce(), 0)
    lg.config = big
    with pytest.raises(RecordSetTooLargeError):
        lg.append_as_leader(produce() * 4, 0)
    assert lg.log_end_offset == 0


def test_follower_append_checks_contiguity_and_learns_epochs(lg):
    fetched = (build_v2_batch([Record(None, b"x")] * 3, base_offset=0, partition_leader_epoch=2)
               + build_v2_batch([Record(None, b"y")] * 2, base_offset=3, partition_leader_epoch=5))
    info = lg.append_as_follower(fetched + fetched[:20])                  # partial tail dropped
    assert (info.first_offset, info.last_offset, info.count) == (0, 4, 5)
    assert lg.log_end_offset == 5 and lg.epoch_cache.entries() == [(2, 0), (5, 3)]
    with pytest.raises(OffsetMismatchError):
        lg.append_as_follower(fetched)                                    # offsets 0.. again
    assert lg.append_as_follower(b"").count == 0
    assert lg.end_offset_for_epoch(2) == (2, 3) and lg.end_offset_for_epoch(5) == (5, 5)


def test_truncate_to_within_and_across_segments(lg):
    fill(lg, 10, epoch=1)
    lg.assign_epoch_start_offset(2)                                       # becomes leader at 40
    fill(lg, 10, epoch=2)
    assert lg.epoch_cache.entries() == [(1, 0), (2, 40)]
    assert lg.truncate_to(62)                                             # inside segment 48.., mid-batch
    assert lg.log_end_offset == 60 and lg.segment_base_offsets() == [0, 24, 48]
    assert offsets(lg.read(0, 10**6)) == list(range(60))
    assert lg.truncate_to(30)                                             # across a segment boundary
    assert lg.log_end_offset == 28 and lg.segment_base_offsets() == [0, 24]
    assert lg.epoch_cache.entries() == [(1, 0)]
    assert not lg.truncate_to(100)
    fill(lg, 1, epoch=3)
    assert offsets(lg.read(0, 10**6)) == list(range(32))


def test_truncate_at_the_log_end_drops_an_epoch_without_records(lg):
    """A broker that led epoch 2 without appending, then follows a leader whose epoch-1
    records it never saw: its epoch 2 must go even though no record is cut, or the
    leader's epoch-1 records appended next would be filed under epoch 2."""
    fill(lg, 2, epoch=0)
    lg.assign_epoch_start_offset(2)                                       # led epoch 2 at offset 8
    assert not lg.truncate_to(8)
    assert lg.log_end_offset == 8 and lg.epoch_cache.entries() == [(0, 0)]
    leader = build_v2_batch([Record(None, b"x", 1000)], base_offset=8, partition_leader_epoch=1)
    lg.append_as_follower(leader)
    assert lg.epoch_cache.entries() == [(0, 0), (1, 8)]
    assert not lg.truncate_to(50)                                         # nothing to cut, nothing to drop
    assert lg.epoch_cache.entries() == [(0, 0), (1, 8)]


def test_truncate_fully_and_start_at(lg):
    fill(lg)
    lg.truncate_fully_and_start_at(500)
    assert (lg.log_start_offset, lg.log_end_offset, lg.epoch_cache.entries()) == (500, 500, [])
    assert lg.append_as_leader(produce(), 7).first_offset == 500
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    assert sorted(f for f in os.listdir(lg.dir) if f.endswith(".log")) == ["00000000000000000500.log"]


def test_reopen_after_clean_close(tmp_path):
    lg = open_log(tmp_path)
    fill(lg, epoch=4)
    lg.flush()
    lg.close()
    again = open_log(tmp_path, recovery_point=80)
    assert (again.log_end_offset, again.segment_base_offsets()) == (80, [0, 24, 48, 72])
    assert again.epoch_cache.entries() == [(4, 0)]
    assert offsets(again.read(50, 10**6), 50) == list(range(50, 80))
    again.close()


def _active_log_file(log):
    return os.path.join(log.dir, f"{log.segment_base_offsets()[-1]:020d}.log")


def test_recovery_of_a_partial_tail(tmp_path):
    lg = open_log(tmp_path)
    fill(lg)
    lg.close()
    path = _active_log_file(lg)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 100)                           # crash mid-write
    again = open_log(tmp_path, recovery_point=80)                         # even a "flushed" log
    assert again.log_end_offset == 76 and again.recovery_point == 76
    assert offsets(again.read(0, 10**6)) == list(range(76))
    assert again.append_as_leader(produce(), 0).first_offset == 76
    again.close()


def test_recovery_of_a_corrupt_tail_in_an_older_segment(tmp_path):
    lg = open_log(tmp_path)
    fill(lg, epoch=1)
    lg.close()
    second = os.path.join(lg.dir, f"{24:020d}.log")
    with open(second, "r+b") as f:                                        # corrupt batch 36..39
        f.seek(3 * BATCH + 200)
        f.write(b"\xff\xfe")
    again = open_log(tmp_path, recovery_point=0)
    assert again.log_end_offset == 36 and again.segment_base_offsets() == [0, 24]
    assert offsets(again.read(0, 10**6)) == list(range(36))
    assert not os.path.exists(os.path.join(lg.dir, f"{48:020d}.log"))
    again.close()


def test_segments_below_the_recovery_point_are_not_rescanned(tmp_path, monkeypatch):
    lg = open_log(tmp_path)
    fill(lg)
    lg.close()
    from kafka_ha.log.segment import LogSegment
    recovered = []
    real = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, m: recovered.append(self.base_offset) or real(self, m))
    open_log(tmp_path, recovery_point=50).close()
    assert recovered == [48, 72]
    recovered.clear()
    open_log(tmp_path, recovery_point=80, clean_shutdown=True).close()
    assert recovered == []


@pytest.mark.parametrize("content", [b"garbage\n", b"0\n5\n1 0\n", b"", None])
def test_damaged_epoch_checkpoint_is_rebuilt_from_the_log(tmp_path, content):
    lg = open_log(tmp_path)
    fill(lg, 5, epoch=1)
    fill(lg, 5, epoch=3)
    lg.close()
    path = os.path.join(lg.dir, "leader-epoch-checkpoint")
    if content is None:
        os.unlink(path)
    else:
        with open(path, "wb") as f:
            f.write(content)
    again = open_log(tmp_path, recovery_point=40)
    assert again.epoch_cache.entries() == [(1, 0), (3, 20)]
    assert again.log_end_offset == 40                                     # no data was dropped
    with open(path) as f:
        assert f.read() == "0\n2\n1 0\n3 20\n"
    again.close()


def test_retention_by_bytes_and_time(tmp_path):
    lg = open_log(tmp_path, LogConfig(segment_bytes=8000, retention_bytes=3 * 6 * BATCH, retention_ms=-1))
    fill(lg, 24, epoch=1)                                                 # segments 0, 24, 48, 72 (full)
    assert lg.segment_base_offsets() == [0, 24, 48, 72]
    assert lg.delete_old_segments(now_ms=0, high_watermark=23) == 0      # offset 23 is not committed
    assert lg.delete_old_segments(now_ms=0, high_watermark=96) == 1
    assert lg.log_start_offset == 24 and lg.epoch_cache.entries() == [(1, 24)]
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    lg.config = LogConfig(segment_bytes=8000, retention_ms=1000)
    assert lg.delete_old_segments(now_ms=2003, high_watermark=96) == 0   # newest timestamp 1003: 1000 ms old
    # Never the active segment while part of it is uncommitted (a quiet, committed one
    # rolls and goes: tests/unit/test_log_rolling.py).
    assert lg.delete_old_segments(now_ms=5000, high_watermark=95) == 2
    assert lg.segment_base_offsets() == [72]
    assert offsets(lg.read(72, 10**6)) == list(range(72, 96))
    lg.close()


def test_flush_advances_the_recovery_point(lg, monkeypatch):
    fill(lg)
    assert lg.recovery_point == 0
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    lg.flush(up_to=30)
    # two segments (log, index, time index), the log's directory, the epoch checkpoint (file + directory)
    assert lg.recovery_point == 30 and len(synced) == 2 * 3 + 1 + 2
    lg.flush()
    assert lg.recovery_point == 80


def test_flush_messages(tmp_path):
    lg = open_log(tmp_path, LogConfig(flush_messages=8))
    lg.append_as_leader(produce(), 0)
    assert lg.recovery_point == 0
    lg.append_as_leader(produce(), 0)
    assert lg.recovery_point == 8
    lg.close()


def test_flush_messages_zero_flushes_every_append(tmp_path):
    lg = open_log(tmp_path, LogConfig(flush_messages=0))
    lg.append_as_leader(produce(), 0)
    assert lg.recovery_point == 4
    lg.close()


def test_flush_ms_is_due_after_the_last_flush(tmp_path):
    lg = open_log(tmp_path, LogConfig(flush_ms=1000))
    created = lg.last_flush_ms
    assert not lg.flush_due(created + 999) and lg.flush_due(created + 1000)
    lg.append_as_leader(produce(), 0)
    lg.flush()
    assert lg.recovery_point == 4 and not lg.flush_due(lg.last_flush_ms + 999)
    untimed = open_log(tmp_path / "other")
    assert not untimed.flush_due(created + 10**12), "no flush.ms: never due"
    untimed.close()
    lg.close()


def test_offset_for_time(lg):
    for i in range(5):
        lg.append_as_leader(produce(ts=1000 * i), 0)
    assert lg.offset_for_time(-1) == (20, -1) and lg.offset_for_time(-2) == (0, -1)
    # Record-level, as Kafka answers: the batch at 8..11 holds 2000..2003, so 2001 is offset 9.
    assert lg.offset_for_time(2001) == (9, 2001) and lg.offset_for_time(10**9) is None


def test_deleted_segments_stay_readable_until_the_delay(tmp_path):
    lg = open_log(tmp_path, LogConfig(segment_bytes=8000, retention_bytes=0, retention_ms=-1))
    fill(lg)
    pending = lg.read(0, 100)
    assert lg.delete_old_segments(now_ms=0, high_watermark=80) == 3
    assert decode_records(pending.to_bytes()).__next__().offset == 0     # fd still open
    lg.close()


def _append_in_epoch_1(log, role):
    if role == "leader":
        return log.append_as_leader(produce(), 1)
    return log.append_as_follower(build_v2_batch([Record(None, b"f" * 300)] * 4, base_offset=log.log_end_offset,
                                                 partition_leader_epoch=1))


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_an_append_the_disk_cannot_hold_changes_nothing(tmp_path, monkeypatch, role):
    lg = open_log(tmp_path)
    fill(lg, 6)                                   # a full segment: the next append rolls
    before = (lg.log_end_offset, lg.epoch_cache.entries(), lg.read(0, 10**6).to_bytes())
    with monkeypatch.context() as m:
        m.setattr(os, "write", FullDisk(lg.dir, room=100, suffix=".log"))
        with pytest.raises(OSError) as failed:
            _append_in_epoch_1(lg, role)
    assert failed.value.errno == errno.ENOSPC
    # Rolled to an empty segment, but no offset, epoch or byte of the failed append is known.
    assert lg.segment_base_offsets() == [0, 24]
    assert (lg.log_end_offset, lg.epoch_cache.entries(), lg.read(0, 10**6).to_bytes()) == before
    assert _append_in_epoch_1(lg, role).first_offset == 24
    assert lg.epoch_cache.entries() == [(0, 0), (1, 24)]
    lg.close()
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 28 and offsets(reopened.read(0, 10**6)) == list(range(28))
    reopened.close()


def test_a_failed_flush_comes_after_the_append_and_its_epoch(tmp_path, monkeypatch):
    lg = open_log(tmp_path, LogConfig(flush_messages=1))

    def failing_fsync(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        lg.append_as_leader(produce(), 2)
    # Durability is in doubt, but the log knows what it holds, with its epoch.
    assert lg.log_end_offset == 4 and lg.epoch_cache.entries() == [(2, 0)]
    assert offsets(lg.read(0, 10**6)) == [0, 1, 2, 3]
    lg.close()
