"""Checkpoint files: Kafka's text formats, atomic replacement, strict parsing."""
import os

import pytest

from kafka_ha.log.checkpoints import CorruptCheckpointError, LeaderEpochCheckpointFile, OffsetCheckpointFile
from kafka_ha.model import TopicPartition as TP


def test_offset_checkpoint_round_trip_and_format(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    f = OffsetCheckpointFile(str(path))
    assert f.read() == {}                                    # missing file: nothing checkpointed
    f.write({TP("foo", 0): 1234, TP("bar", 3): 99})
    assert path.read_text() == "0\n2\nbar 3 99\nfoo 0 1234\n"
    assert f.read() == {TP("foo", 0): 1234, TP("bar", 3): 99}
    f.write({})
    assert path.read_text() == "0\n0\n" and f.read() == {}


def test_leader_epoch_checkpoint_round_trip(tmp_path):
    f = LeaderEpochCheckpointFile(str(tmp_path / "leader-epoch-checkpoint"))
    assert f.read() is None
    f.write([(0, 0), (3, 1200)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 1200\n"
    assert f.read() == [(0, 0), (3, 1200)]


def test_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "cp"
    f = OffsetCheckpointFile(str(path))
    f.write({TP("a", 0): 1})
    real_replace = os.replace

    def crash(src, dst):
        raise OSError("power cut before rename")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        f.write({TP("a", 0): 2})
    assert f.read() == {TP("a", 0): 1}                       # the old file is intact
    assert (tmp_path / "cp.tmp").exists()
    monkeypatch.setattr(os, "replace", real_replace)
    f.write({TP("a", 0): 3})
    assert f.read() == {TP("a", 0): 3} and not (tmp_path / "cp.tmp").exists()


def test_write_fsyncs_file_and_directory(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                 real_fsync(fd)))
    OffsetCheckpointFile(str(tmp_path / "cp")).write({TP("a", 0): 1})
    assert synced == [str(tmp_path / "cp.tmp"), str(tmp_path)]


BAD_OFFSET_FILES = {
    "bad version": ("1\n1\nfoo 0 5\n", 1, "unrecognized version"),
    "empty": ("", 1, "empty"),
    "no count": ("0\n", 2, "missing the entry count"),
    "count not a number": ("0\nx\n", 2, "not an integer"),
    "count too high": ("0\n3\nfoo 0 5\nfoo 1 6\n", 2, "entry count 3 but 2"),
    "count too low": ("0\n1\nfoo 0 5\nfoo 1 6\n", 2, "entry count 1 but 2"),
    "non-numeric offset": ("0\n1\nfoo 0 abc\n", 3, "abc"),
    "non-numeric partition": ("0\n1\nfoo x 5\n", 3, "x"),
    "missing field": ("0\n1\nfoo 5\n", 3, "found 2 fields"),
    "negative offset": ("0\n1\nfoo 0 -5\n", 3, "negative offset"),
    "blank line": ("0\n2\nfoo 0 5\n\n", 4, "found 0 fields"),
}


@pytest.mark.parametrize("case", BAD_OFFSET_FILES)
def test_offset_checkpoint_rejects(tmp_path, case):
    text, line, reason = BAD_OFFSET_FILES[case]
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError) as err:
        OffsetCheckpointFile(str(path)).read()
    assert err.value.line == line and reason in str(err.value)
    assert str(path) in str(err.value)


def test_offset_checkpoint_rejects_duplicates_and_binary(tmp_path):
    path = tmp_path / "cp"
    path.write_text("0\n2\nfoo 0 5\nfoo 0 6\n")
    with pytest.raises(CorruptCheckpointError, match="listed twice"):
        OffsetCheckpointFile(str(path)).read()
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CorruptCheckpointError, match="UTF-8"):
        OffsetCheckpointFile(str(path)).read()


@pytest.mark.parametrize("text", ["1\n0\n", "0\n1\n", "0\n1\n3\n", "0\n1\n3 x\n", "0\n1\n-1 0\n"])
def test_epoch_checkpoint_rejects(tmp_path, text):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCheckpointFile(str(path)).read()


def test_topic_with_whitespace_cannot_be_written(tmp_path):
    with pytest.raises(ValueError):
        OffsetCheckpointFile(str(tmp_path / "cp")).write({TP("a b", 0): 1})


def test_directory_fsyncs_close_their_descriptors_at_once_under_gevent(tmp_path, monkeypatch):
    """gevent (25.8.1 and later) patches ``os.close`` to close anything but a regular file
    only on the event loop's next turn.  A broker closing 10,000 logs fsyncs two
    directories per log without a turn in between: the deferred closes piled up to the
    descriptor limit and the clean shutdown halted on EMFILE.  The directory's
    descriptor must be gone when ``fsync_dir`` returns."""
    import gevent
    import gevent.os

    from kafka_ha.log.checkpoints import fsync_dir

    gevent.get_hub()                                # as in a broker: the hub is running
    monkeypatch.setattr(os, "close", gevent.os.close)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        fsync_dir(str(tmp_path))
    assert len(os.listdir("/proc/self/fd")) - before < 5
    gevent.sleep(0)                                 # lets any deferred close run: none should be
