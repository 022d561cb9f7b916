"""The leader-epoch-checkpoint across crashes: durable with the data, checked against the log on load.

Each epoch change rewrites the file atomically (rename) without waiting for
the disk; it is fsynced when the log's data is (a flush, a clean shutdown).
So after a crash the file may be older (or, for a truncated log, newer) than
the batches that survived: the loader compares it with the partition leader
epochs the v2 batches carry and rebuilds it from them when they disagree.
"""
import os

import pytest

from kafka_ha.log import Log, LogConfig
from kafka_ha.log.loader import EPOCH_CHECKPOINT
from kafka_ha.model import TopicPartition
from kafka_ha.records import Record, build_v2_batch

TP = TopicPartition("t", 0)
CONFIG = LogConfig(segment_bytes=8000, index_interval_bytes=1000, retention_ms=-1)


def produce(n=4):
    return build_v2_batch([Record(None, b"v" * 300, 1000 + i) for i in range(n)])


def fill(log, batches, epoch):
    for _ in range(batches):
        log.append_as_leader(produce(), epoch)


def open_log(tmp_path, **kwargs):
    return Log(str(tmp_path / "t-0"), TP, CONFIG, **kwargs)


def write_checkpoint(log_dir, entries):
    with open(os.path.join(log_dir, EPOCH_CHECKPOINT), "w") as f:
        f.write(f"0\n{len(entries)}\n" + "".join(f"{e} {s}\n" for e, s in entries))


def read_checkpoint(log_dir):
    with open(os.path.join(log_dir, EPOCH_CHECKPOINT)) as f:
        return f.read()


@pytest.fixture
def crashed(tmp_path):
    """A log with epochs 1 (0..19) and 3 (20..39), closed without a flush (a crash)."""
    lg = open_log(tmp_path)
    fill(lg, 5, epoch=1)
    fill(lg, 5, epoch=3)
    lg.close()
    return lg.dir


def test_entries_beyond_the_recovered_log_end_are_dropped(crashed, tmp_path):
    write_checkpoint(crashed, [(1, 0), (3, 20), (4, 40), (6, 55)])     # written before the data was
    again = open_log(tmp_path)
    assert again.epoch_cache.entries() == [(1, 0), (3, 20)]
    assert read_checkpoint(crashed) == "0\n2\n1 0\n3 20\n"
    again.close()


def test_a_checkpoint_older_than_the_log_is_rebuilt_from_the_batches(crashed, tmp_path):
    write_checkpoint(crashed, [(1, 0)])                                 # the write of (3, 20) was lost
    again = open_log(tmp_path)
    assert again.epoch_cache.entries() == [(1, 0), (3, 20)]
    assert again.end_offset_for_epoch(1) == (1, 20)                     # not (1, 40)
    again.close()


def test_a_checkpoint_claiming_an_epoch_the_batches_do_not_have_is_rebuilt(crashed, tmp_path):
    # From before a truncation: epoch 5 once started at 20 here, but the batches
    # now at 20.. are epoch 3's.  Trusting it would answer "epoch 3 ends at 20".
    write_checkpoint(crashed, [(1, 0), (5, 20)])
    again = open_log(tmp_path)
    assert again.epoch_cache.entries() == [(1, 0), (3, 20)]
    again.close()


def test_a_mismatch_inside_a_recovered_segment_is_found(crashed, tmp_path):
    write_checkpoint(crashed, [(1, 0), (2, 8), (3, 20)])                # epoch 2 never wrote here
    again = open_log(tmp_path, recovery_point=0)
    assert again.epoch_cache.entries() == [(1, 0), (3, 20)]
    again.close()


def test_a_checkpoint_that_is_not_monotonic_is_rebuilt(crashed, tmp_path):
    write_checkpoint(crashed, [(3, 20), (1, 0)])
    again = open_log(tmp_path)
    assert again.epoch_cache.entries() == [(1, 0), (3, 20)]
    again.close()


def test_a_checkpoint_matching_the_log_is_kept_as_is(crashed, tmp_path):
    # Epoch 2 became leader at 20 and wrote nothing before epoch 3: no batch shows
    # it, and a rebuild would lose it.  The batches agree with the file, so it stays.
    write_checkpoint(crashed, [(1, 0), (2, 20), (3, 20)])
    again = open_log(tmp_path, recovery_point=0)
    assert again.epoch_cache.entries() == [(1, 0), (2, 20), (3, 20)]
    again.close()


def _fsynced_paths(monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    return synced


def test_epoch_changes_are_fsynced_with_the_log_data(tmp_path, monkeypatch):
    lg = open_log(tmp_path)
    synced = _fsynced_paths(monkeypatch)
    fill(lg, 2, epoch=1)
    lg.assign_epoch_start_offset(2)
    assert not any(EPOCH_CHECKPOINT in p for p in synced), "not on the append path"
    assert read_checkpoint(lg.dir) == "0\n2\n1 0\n2 8\n"                 # but already renamed into place
    lg.flush()
    checkpoint = os.path.join(lg.dir, EPOCH_CHECKPOINT)
    assert synced.index(checkpoint + ".tmp") < synced.index(lg.dir, synced.index(checkpoint + ".tmp"))
    synced.clear()
    lg.flush()
    assert synced == [], "nothing changed: nothing to fsync"
    lg.close()


def follower_batch(base, epoch, n=4):
    return build_v2_batch([Record(None, b"v" * 300, 1000 + i) for i in range(n)],
                          base_offset=base, partition_leader_epoch=epoch)


@pytest.fixture
def led_without_records(tmp_path):
    """A log with epochs 1 (0..19) and 3 (20..39), cleanly closed, whose broker then led in
    epochs 4 and 5 without appending (both start at the log end, 40)."""
    lg = open_log(tmp_path)
    fill(lg, 5, epoch=1)
    fill(lg, 5, epoch=3)
    lg.assign_epoch_start_offset(4)
    lg.assign_epoch_start_offset(5)
    lg.flush()
    lg.close()
    assert read_checkpoint(lg.dir) == "0\n4\n1 0\n3 20\n4 40\n5 40\n"
    return lg.dir


def test_epochs_without_records_are_dropped_at_load_without_rewriting_the_file(led_without_records,
                                                                                tmp_path):
    """Creating and renaming a file costs about 0.7 ms here: one per log made a restart of
    a broker that had taken over 10,000 partitions load its logs 2.5-5x slower."""
    again = open_log(tmp_path)
    assert again.epoch_cache.entries() == [(1, 0), (3, 20)]
    assert read_checkpoint(led_without_records) == "0\n4\n1 0\n3 20\n4 40\n5 40\n"
    assert again.disk_work_pending                    # the broker's deferred pass writes it
    assert again.write_pending_checkpoint()
    assert read_checkpoint(led_without_records) == "0\n2\n1 0\n3 20\n"
    again.close()


def test_records_of_the_old_epoch_after_such_a_load_then_a_crash_rebuild_the_epochs(
        led_without_records, tmp_path):
    """The window the deferral opens: the file still names epochs 4 and 5 at 40 when a
    follower appends more of epoch 3 there.  The next load sees the last batch disagree."""
    again = open_log(tmp_path)
    again.append_as_follower(follower_batch(40, 3))
    again.append_as_follower(follower_batch(44, 3))
    again.close()                                     # no flush: a crash
    third = open_log(tmp_path)
    assert third.epoch_cache.entries() == [(1, 0), (3, 20)]
    assert third.end_offset_for_epoch(3) == (3, 48)
    third.close()


def test_an_epoch_past_the_log_end_is_still_dropped_from_the_file_at_once(crashed, tmp_path):
    write_checkpoint(crashed, [(1, 0), (3, 20), (4, 40), (6, 55)])   # 55: beyond the end, 40
    again = open_log(tmp_path)
    assert read_checkpoint(crashed) == "0\n2\n1 0\n3 20\n"
    assert not again.disk_work_pending
    again.close()
