"""Log compaction on real logs in a temporary directory: offsets kept, the last value of
every key kept, tombstones gone only after delete.retention.ms, the active segment and
everything at or above the high watermark untouched, and a crash at any step of the
swap leaves a log that loads."""
import os

import pytest

from kafka_ha.log import Log, LogConfig
from kafka_ha.log.clean_swap import SWAP_SUFFIX, complete_interrupted_cleaning
from kafka_ha.log.cleaner import Throttler, build_offset_map, clean_log, write_cleaned_segment
from kafka_ha.log.compaction import batch_records, keep_record, map_entry_cost, rewrite_batch
from kafka_ha.model import TopicPartition
from kafka_ha.records import CorruptRecordError, Record, build_v2_batch, decode_records, iter_entries
from kafka_ha.records.format import V2_HEADER, crc32c

TP = TopicPartition("compacted", 0)
NOW = 10**13                                # far after every record's timestamp
UNTHROTTLED = Throttler(float("inf"))


def config(**overrides):
    return LogConfig(**{"segment_bytes": 1000, "cleanup_policy": "compact", "delete_retention_ms": 0,
                        "file_delete_delay_ms": 0, **overrides})


def open_log(tmp_path, **overrides):
    return Log(str(tmp_path / "compacted-0"), TP, config(**overrides))


def put(lg, key, value, n=1):
    """Append one batch of ``n`` records of ``key`` (value None: tombstones)."""
    lg.append_as_leader(build_v2_batch([Record(key, value, 1000)] * n), 0)


def records(lg, start=0):
    return [(r.offset, r.key, r.value) for r in decode_records(lg.read(start, 10**8).to_bytes(), start)]


def clean(lg, first_dirty=0, hw=None, now=NOW):
    return clean_log(lg, first_dirty, lg.log_end_offset if hw is None else hw, now, 10**6, UNTHROTTLED)


def fill_updates(lg, rounds=10, keys=5):
    for i in range(rounds):
        for k in range(keys):
            put(lg, b"key-%d" % k, b"value-%d-%d" % (k, i))


def latest(recs):
    last = {}
    for offset, key, value in recs:
        last[key] = (offset, value)
    return last


def test_a_pass_keeps_the_last_record_of_each_key_at_its_offset(tmp_path):
    lg = open_log(tmp_path)
    fill_updates(lg)
    before = records(lg)
    active = lg.segments()[-1]
    active_bytes = open(active.log_path, "rb").read()
    result = clean(lg)
    assert result.completed and result.segments_rewritten > 0
    assert result.first_dirty == active.base_offset
    after = records(lg)
    assert latest(after) == latest(before)
    assert set(after) <= set(before), "every kept record has its original offset"
    closed = [r for r in after if r[0] < active.base_offset]
    assert len({key for _, key, _ in closed}) == len(closed), "one record per key below the active segment"
    assert open(lg.segments()[-1].log_path, "rb").read() == active_bytes
    assert lg.log_end_offset == 50
    lg.close()
    reopened = open_log(tmp_path)
    assert records(reopened) == after and reopened.log_end_offset == 50
    reopened.close()


def test_nothing_at_or_above_the_high_watermark_changes(tmp_path):
    lg = open_log(tmp_path)
    fill_updates(lg)
    bases = lg.segment_base_offsets()
    hw = bases[3] + 1                              # inside the fourth segment
    before = records(lg)
    result = clean(lg, hw=hw)
    assert result.first_dirty == bases[3]
    assert [r for r in records(lg) if r[0] >= bases[3]] == [r for r in before if r[0] >= bases[3]]
    assert lg.segment_base_offsets() == bases
    lg.close()


def more_updates(lg, rounds=4):
    """Updates of other keys than fill_updates' (new dirty data for the next pass)."""
    for i in range(rounds):
        for k in range(3):
            put(lg, b"other-%d" % k, b"%d" % i)


def test_tombstones_stay_until_they_are_below_the_horizon(tmp_path):
    lg = open_log(tmp_path)
    fill_updates(lg, rounds=4)
    put(lg, b"key-0", None)
    more_updates(lg)                                 # key-0's tombstone is now in a closed segment
    first = clean(lg)
    assert latest(records(lg))[b"key-0"][1] is None, "the pass that first sees a tombstone keeps it"
    assert [r for r in records(lg) if r[1] == b"key-0"] == [(20, b"key-0", None)]
    more_updates(lg)
    second = clean_log(lg, first.first_dirty, lg.log_end_offset, NOW, 10**6, UNTHROTTLED,
                       tombstones_removable_below=20)
    assert latest(records(lg))[b"key-0"][1] is None, "not below the horizon: kept"
    more_updates(lg)
    clean_log(lg, second.first_dirty, lg.log_end_offset, NOW, 10**6, UNTHROTTLED,
              tombstones_removable_below=first.first_dirty)
    assert b"key-0" not in latest(records(lg)), "below the horizon: gone"
    assert latest(records(lg))[b"key-1"][1] == b"value-1-3"
    lg.close()


def test_min_compaction_lag_leaves_young_segments_alone(tmp_path):
    lg = open_log(tmp_path, min_compaction_lag_ms=60_000)
    fill_updates(lg)
    before = records(lg)
    assert clean(lg, now=1000 + 59_999).segments_rewritten == 0      # records stamped 1000
    assert records(lg) == before
    assert clean(lg, now=1000 + 60_000).segments_rewritten > 0
    lg.close()


def test_a_rewritten_batch_keeps_offsets_and_producer_fields_in_dense_batches():
    batch = bytearray(build_v2_batch([Record(b"a", b"1", 5), Record(b"b", b"2", 6), Record(b"a", b"3", 7),
                                      Record(b"c", b"4", 8)],
                                     base_offset=100, compression="gzip", partition_leader_epoch=4))
    fields = list(V2_HEADER.unpack_from(batch, 0))
    fields[9:12] = [77, 2, 40]                      # a producer id, epoch and base sequence
    V2_HEADER.pack_into(batch, 0, *fields)
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    entry = next(iter_entries(batch))
    latest_of = {b"a": 102, b"b": 101, b"c": 103}
    out, changed = rewrite_batch(batch, entry, lambda r: keep_record(r.offset, r.key, r.tombstone,
                                                                     latest_of.get(r.key), False))
    assert changed
    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in decode_records(out)] == \
        [(101, b"b", b"2", 6), (102, b"a", b"3", 7), (103, b"c", b"4", 8)]
    new = V2_HEADER.unpack_from(out, 0)
    assert new[0] == 101 and new[2] == 4 and new[5] == fields[5] and new[6] == 2   # base, epoch, codec, delta
    assert new[7] == fields[7] and new[8] == 8 and new[9:12] == (77, 2, 41)        # timestamps, producer
    # A hole in the middle: two dense batches, each record at its offset.
    out, _ = rewrite_batch(batch, entry, lambda r: r.offset != 102)
    pieces = list(iter_entries(out))
    assert [(p.first_offset, p.last_offset) for p in pieces] == [(100, 101), (103, 103)]
    assert V2_HEADER.unpack_from(out, pieces[1].position)[11] == 43
    assert [r.offset for r in decode_records(out)] == [100, 101, 103]
    assert rewrite_batch(batch, entry, lambda r: True) == (bytes(batch), False)
    assert rewrite_batch(batch, entry, lambda r: False) == (None, True)
    assert [r.offset for r in batch_records(out, pieces[0])] == [100, 101]


def test_the_offset_map_stops_at_a_segment_boundary_when_it_is_full(tmp_path):
    lg = open_log(tmp_path)
    fill_updates(lg, rounds=2, keys=40)
    segments = lg.segments()
    spans = [(s.log_path, s.size, nb) for s, nb in zip(segments, lg.segment_base_offsets()[1:])]
    full_map, end = build_offset_map(spans, 0, 10**6, UNTHROTTLED)
    assert end == segments[-1].base_offset and len(full_map) == 40
    assert lg.segment_base_offsets()[:3] == [0, 12, 23]          # 12 and 11 new keys
    first_cost = sum(map_entry_cost(b"key-%d" % k) for k in range(12))
    second_cost = sum(map_entry_cost(b"key-%d" % k) for k in range(12, 23))
    small_map, end = build_offset_map(spans, 0, first_cost + second_cost - 1, UNTHROTTLED)
    assert (end, len(small_map)) == (12, 12), "the second segment's keys do not fit"
    small_map, end = build_offset_map(spans, 0, 1, UNTHROTTLED)
    assert (end, len(small_map)) == (12, 12), "the first segment is always taken"
    assert build_offset_map(spans, 0, first_cost + second_cost, UNTHROTTLED)[1] == 23
    lg.close()


def test_a_truncation_while_a_copy_is_written_stops_the_pass(tmp_path):
    lg = open_log(tmp_path)
    fill_updates(lg)
    before = records(lg)

    def offload(fn, *args):
        if fn is write_cleaned_segment:
            lg.truncate_to(lg.log_end_offset - 3)      # a follower meets its new leader
        return fn(*args)
    result = clean_log(lg, 0, lg.log_end_offset, NOW, 10**6, UNTHROTTLED, offload)
    assert not result.completed and result.first_dirty == 0
    assert records(lg) == before[:-3]
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", SWAP_SUFFIX))]
    lg.close()


def test_a_follower_appends_across_the_gaps_of_a_compacted_leader(tmp_path):
    leader = open_log(tmp_path)
    fill_updates(leader)
    clean(leader)
    follower = Log(str(tmp_path / "follower-0"), TP, config(segment_bytes=10**6))
    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(leader.read(follower.log_end_offset, 10**6).to_bytes())
    assert records(follower) == records(leader)
    leader.close()
    follower.close()


def test_the_throttler_sleeps_to_keep_the_rate():
    now, slept = [0.0], []
    throttler = Throttler(1000, clock=lambda: now[0], sleep=slept.append)
    throttler.acquire(500)
    assert slept == [0.5]
    now[0] = 0.5
    throttler.acquire(500)
    assert slept == [0.5, 0.5]


# --- merging segments, and a crash at every step of the swap ------------------------------------


def four_segments_and_an_active_one(tmp_path):
    """A: keys a00..a11; B: y00..y11 (all superseded by D); C: z00..z11; D: y00..y11; E active."""
    lg = open_log(tmp_path, segment_bytes=10**6)
    for prefix, value in ((b"a", b"1"), (b"y", b"old"), (b"z", b"1"), (b"y", b"new"), (b"e", b"1")):
        for k in range(12 if prefix != b"e" else 1):
            put(lg, prefix + b"%02d" % k, value)
        if prefix != b"e":
            lg._roll(lg.log_end_offset)
    sizes = [s.size for s in lg.segments()]
    # Groups of two (A, B) and (C, D): B's records are all gone, so B goes before the commit.
    lg.config = config(segment_bytes=sizes[0] + sizes[1] + 1)
    return lg


def test_small_segments_are_merged_and_a_wholly_removed_one_goes(tmp_path):
    lg = four_segments_and_an_active_one(tmp_path)
    before = records(lg)
    result = clean(lg)
    assert result.completed and result.segments_rewritten == 4 and result.first_dirty == 48
    assert lg.segment_base_offsets() == [0, 24, 48]
    assert records(lg) == [r for r in before if not 12 <= r[0] < 24]
    lg.close()
    reopened = open_log(tmp_path, segment_bytes=10**6)
    assert reopened.segment_base_offsets() == [0, 24, 48]
    assert records(reopened) == [r for r in before if not 12 <= r[0] < 24]
    reopened.close()


class Crash(Exception):
    pass


def crash_after(monkeypatch, allowed):
    """Let ``allowed`` file renames, replaces and unlinks happen, then "crash" on the next."""
    done = [0]
    for name in ("rename", "replace", "unlink"):
        def operation(*args, real=getattr(os, name), **kwargs):
            if done[0] >= allowed:
                raise Crash()
            done[0] += 1
            return real(*args, **kwargs)
        monkeypatch.setattr(os, name, operation)


@pytest.mark.parametrize("allowed", range(14))
def test_a_crash_at_any_step_of_the_swap_leaves_a_log_that_loads(tmp_path, monkeypatch, allowed):
    lg = four_segments_and_an_active_one(tmp_path)
    before = records(lg)
    with monkeypatch.context() as patch:
        crash_after(patch, allowed)
        try:
            result = clean(lg)
        except Crash:
            result = None
    lg.close()
    reopened = open_log(tmp_path, segment_bytes=10**6)
    after = records(reopened)
    assert set(after) <= set(before), "a record changed its offset, key or value"
    assert latest(after) == latest(before), "the last record of a key was lost"
    assert {r for r in before if r not in after} <= {r for r in before if 12 <= r[0] < 24}, \
        "only superseded records may be gone"
    assert not [n for n in os.listdir(reopened.dir) if n.endswith((".cleaned", SWAP_SUFFIX))]
    if result is not None:
        assert after == [r for r in before if not 12 <= r[0] < 24]
    reopened.append_as_leader(build_v2_batch([Record(b"new", b"v")]), 1)
    assert reopened.log_end_offset == 50
    reopened.close()


def test_recovery_removes_an_uncommitted_index_swap_and_unfinished_copies(tmp_path):
    for name in ("00000000000000000000.log", "00000000000000000000.index.swap",
                 "00000000000000000000.log.cleaned", "00000000000000000007.index.cleaned"):
        open(tmp_path / name, "wb").close()
    assert complete_interrupted_cleaning(str(tmp_path)) == []
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000000.log"]


def test_a_failed_copy_leaves_no_cleaned_file(tmp_path):
    lg = open_log(tmp_path)
    fill_updates(lg)
    before = records(lg)

    def offload(fn, *args):
        if fn is write_cleaned_segment:
            fn(*args)                                   # the copy is on disk...
            raise OSError(28, "No space left on device")  # ...and then the disk is full
        return fn(*args)
    with pytest.raises(OSError):
        clean_log(lg, 0, lg.log_end_offset, NOW, 10**6, UNTHROTTLED, offload)
    assert not [n for n in os.listdir(lg.dir) if n.endswith(".cleaned")]
    assert records(lg) == before
    lg.close()


def test_a_compacted_log_refuses_records_without_a_key(tmp_path):
    lg = open_log(tmp_path)
    put(lg, b"k", b"v")
    with pytest.raises(CorruptRecordError, match="Compacted topic cannot accept message without key"):
        lg.append_as_leader(build_v2_batch([Record(b"k", b"v"), Record(None, b"no key")], compression="gzip"), 0)
    assert lg.log_end_offset == 1
    plain = Log(str(tmp_path / "plain-0"), TP, LogConfig())
    plain.append_as_leader(build_v2_batch([Record(None, b"no key")]), 0)
    assert plain.log_end_offset == 1
    plain.close()
    lg.close()


def test_a_batch_whose_crc_fails_is_not_rewritten_with_a_fresh_one(tmp_path):
    lg = open_log(tmp_path)
    fill_updates(lg)
    first = lg.segments()[0]
    with open(first.log_path, "r+b") as f:
        f.seek(first.size - 1)
        last = f.read(1)
        f.seek(first.size - 1)
        f.write(bytes([last[0] ^ 1]))              # one flipped bit in the last value
    with pytest.raises(CorruptRecordError):
        clean(lg)
    assert not [n for n in os.listdir(lg.dir) if n.endswith(".cleaned")]
    lg.close()
