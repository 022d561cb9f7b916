"""The .timeindex of a segment: Kafka's file format, rebuilds from bad files, the largest
timestamp per segment after a restart, and lookups by timestamp."""
from __future__ import annotations

import os
import struct

import pytest

from kafka_ha.log.segment import LogSegment
from kafka_ha.log.time_index import TIME_INDEX_ENTRY, TimeIndex
from kafka_ha.records.builder import Record, build_v2_batch

TS = [5000, 9000, 7000, 12000, 11000, 20000]   # batch max timestamps: not monotonic


def batch(base, ts, n=4, size=600):
    # record i of the batch has ts - (n - 1) + i: the batch's max is ts
    return build_v2_batch([Record(None, b"x" * size, ts - (n - 1) + i) for i in range(n)],
                          base_offset=base, partition_leader_epoch=0)


def fill(segment, stamps=TS, n=4):
    for b, ts in enumerate(stamps):
        base = segment.base_offset + b * n
        segment.append(base, base + n - 1, batch(base, ts, n), max_timestamp=ts)


@pytest.fixture
def segment(tmp_path):
    seg = LogSegment(str(tmp_path), 100, index_interval_bytes=1000)
    yield seg
    seg.close()


def entries_on_disk(path):
    data = open(path, "rb").read()
    assert len(data) % 12 == 0
    return list(TIME_INDEX_ENTRY.iter_unpack(data))


def test_file_format_is_kafkas_and_entries_only_grow(segment, tmp_path):
    fill(segment)
    segment.flush()
    path = tmp_path / "00000000000000000100.timeindex"
    assert TIME_INDEX_ENTRY.size == 12 and TIME_INDEX_ENTRY.format == ">qi"
    on_disk = entries_on_disk(path)
    # Entries every index.interval.bytes (batches are ~2.5 KB: after each one) while the
    # max grew: 9000 at the second batch (relative offsets 4..7, the batch's last 7),
    # 12000 at the fourth, 20000 at the last.  The first batch is before any interval.
    assert on_disk == [(9000, 7), (12000, 15), (20000, 23)]
    assert segment.largest_timestamp == 20000


def test_lookup_finds_the_first_record_at_or_after_a_timestamp(segment):
    fill(segment)
    # 4998: batch 0 holds 4997..5000 at offsets 100..103
    assert segment.offset_for_time(4998, 0) == (101, 4998)
    assert segment.offset_for_time(6999, 0) == (104, 8997)      # batch 1 (8997..9000) is the first >= 6999
    assert segment.offset_for_time(11999, 0) == (114, 11999)  # batch 3: 11997..12000 at 112..115
    assert segment.offset_for_time(20000, 0) == (123, 20000)
    assert segment.offset_for_time(20001, 0) is None
    assert segment.offset_for_time(0, 110) == (110, 6999)       # never below the log start


@pytest.mark.parametrize("damage", [
    lambda p: p.unlink(),                                          # missing
    lambda p: p.write_bytes(p.read_bytes()[:-5]),                  # partial entry
    lambda p: p.write_bytes(struct.pack(">qi", 30000, 2) + struct.pack(">qi", 10, 3)),   # shrinks
    lambda p: p.write_bytes(struct.pack(">qi", 30000, 9999)),     # beyond the segment
    lambda p: p.write_bytes(b"\xff" * 24),                         # garbage: negative offsets
])
def test_a_missing_or_corrupt_time_index_is_rebuilt_on_load(tmp_path, damage):
    seg = LogSegment(str(tmp_path), 100, index_interval_bytes=1000)
    fill(seg)
    seg.close()
    path = tmp_path / "00000000000000000100.timeindex"
    damage(path)
    again = LogSegment(str(tmp_path), 100, index_interval_bytes=1000)
    try:
        assert again.largest_timestamp == 20000
        assert entries_on_disk(path) == [(9000, 7), (12000, 15), (20000, 23)]
        assert again.offset_for_time(11999, 0) == (114, 11999)
    finally:
        again.close()


def test_largest_timestamp_survives_a_restart_when_the_tail_is_older(tmp_path):
    # Retention ages a segment by its largest timestamp.  After a restart the tail scan
    # sees only what follows the last offset-index entry: here its batches are older
    # (1000) than an earlier one (50000), which only the time index remembers.
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=1000)
    fill(seg, [2000, 50000, 1000, 1000, 1000])
    seg.close()
    again = LogSegment(str(tmp_path), 0, index_interval_bytes=1000)
    try:
        assert again.largest_timestamp == 50000
    finally:
        again.close()


def test_truncation_drops_the_entries_past_the_cut(segment, tmp_path):
    fill(segment)
    segment.truncate_to(112)            # keeps batches 0-2 (max 9000)
    segment.flush()
    assert segment.largest_timestamp == 9000
    assert entries_on_disk(tmp_path / "00000000000000000100.timeindex") == [(9000, 7)]
    segment.append(112, 115, batch(112, 8000), max_timestamp=8000)
    assert segment.offset_for_time(8000, 0) == (104, 8997)


def test_time_index_unit_rules(tmp_path):
    ti = TimeIndex(str(tmp_path / "x.timeindex"), 10)
    ti.add_entry()                       # nothing observed: no entry
    ti.observe(-1, 12)                   # magic 0 entries have no timestamp
    ti.add_entry()
    assert ti.entries() == [] and ti.start_offset_for(5) == 10
    ti.observe(7, 15)
    ti.observe(7, 16)                    # equal: the first offset with the max stays
    ti.add_entry()
    ti.add_entry()                       # the max did not grow: no second entry
    assert ti.entries() == [(7, 15)]
    ti.write()
    assert os.path.getsize(ti.path) == 12


def test_a_log_loads_its_time_indexes_without_warnings_and_removes_an_orphan_one(tmp_path, caplog):
    """The loader took each segment's .timeindex for a stray file: one warning per log at
    every start (10,000 at 10k partitions), and an orphan time index stayed forever."""
    from kafka_ha.log import Log, LogConfig
    from kafka_ha.model import TopicPartition

    tp = TopicPartition("t", 0)
    lg = Log(str(tmp_path / "t-0"), tp, LogConfig())
    lg.append_as_leader(build_v2_batch([Record(None, b"v", 1000)]), 0)
    lg.close()
    orphan = tmp_path / "t-0" / "00000000000000000500.timeindex"   # its .log is gone
    orphan.write_bytes(b"")
    caplog.set_level("INFO", logger="kafka_ha.log")
    again = Log(str(tmp_path / "t-0"), tp, LogConfig())
    again.close()
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert not orphan.exists()
    assert (tmp_path / "t-0" / "00000000000000000000.timeindex").exists()
