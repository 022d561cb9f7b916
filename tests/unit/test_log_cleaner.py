"""The broker's log cleaner over a LogManager: which logs it cleans, the cleaner checkpoint,
and a restart of the first dirty offset after a truncation."""
import os

from kafka_ha.broker.log_cleaner import LogCleaner
from kafka_ha.config import BrokerConfig
from kafka_ha.log import LogConfig, LogManager, OffsetCheckpointFile
from kafka_ha.log.cleaner import CLEANER_CHECKPOINT
from kafka_ha.model import TopicPartition
from kafka_ha.records import Record, build_v2_batch, decode_records

COMPACTED, PLAIN = TopicPartition("compacted", 0), TopicPartition("plain", 0)
CONFIGS = {"compacted": LogConfig(segment_bytes=1000, cleanup_policy="compact"),
           "plain": LogConfig(segment_bytes=1000)}


def run_here(fn, *args):
    return fn(*args)


def updates(lg, rounds=10, keys=5):
    for i in range(rounds):
        for k in range(keys):
            lg.append_as_leader(build_v2_batch([Record(b"k%d" % k, b"%d" % i, 1000)]), 0)


def setup(tmp_path, **broker):
    manager = LogManager([str(tmp_path)], LogConfig(), lambda topic: CONFIGS[topic])
    logs = {tp: manager.get_or_create_log(tp) for tp in (COMPACTED, PLAIN)}
    for lg in logs.values():
        updates(lg)
    hws = {tp: lg.log_end_offset for tp, lg in logs.items()}
    config = BrokerConfig({"broker.id": 1, "zookeeper.connect": "127.0.0.1:1", **broker})
    return manager, logs, hws, LogCleaner(manager, lambda: hws, config, offload=run_here)


def count(lg):
    return len(list(decode_records(lg.read(lg.log_start_offset, 10**8).to_bytes())))


def test_only_compacted_logs_are_cleaned_and_the_checkpoint_records_the_progress(tmp_path):
    manager, logs, hws, cleaner = setup(tmp_path)
    assert cleaner.clean_once()
    assert count(logs[PLAIN]) == 50 and count(logs[COMPACTED]) < 50
    active_base = logs[COMPACTED].segment_base_offsets()[-1]
    assert OffsetCheckpointFile(str(tmp_path / CLEANER_CHECKPOINT)).read() == {COMPACTED: active_base}
    assert not cleaner.clean_once(), "nothing dirty is left below the active segment"
    manager.close()
    again = LogManager([str(tmp_path)], LogConfig(), lambda topic: CONFIGS[topic])
    restarted = LogCleaner(again, lambda: hws, BrokerConfig({"broker.id": 1, "zookeeper.connect": "x"}),
                           offload=run_here)
    assert restarted.first_dirty == {COMPACTED: active_base}
    again.close()


def test_the_dirty_ratio_threshold_and_the_high_watermark_are_respected(tmp_path):
    manager, logs, hws, cleaner = setup(tmp_path)
    hws[COMPACTED] = 0
    assert not cleaner.clean_once(), "nothing is committed"
    hws[COMPACTED] = logs[COMPACTED].log_end_offset
    logs[COMPACTED].config = LogConfig(segment_bytes=1000, cleanup_policy="compact",
                                       min_cleanable_dirty_ratio=1.0)
    cleaner.first_dirty[COMPACTED] = logs[COMPACTED].segment_base_offsets()[1]
    assert not cleaner.clean_once(), "a clean first segment keeps the ratio below 1.0"
    manager.close()


def test_a_truncation_makes_the_next_pass_start_at_the_log_start(tmp_path):
    manager, logs, hws, cleaner = setup(tmp_path)
    lg = logs[COMPACTED]
    assert cleaner.clean_once()
    assert cleaner._first_dirty(COMPACTED, lg) > 0
    lg.truncate_to(lg.log_end_offset - 1)
    assert cleaner._first_dirty(COMPACTED, lg) == 0
    manager.close()


def test_a_corrupt_checkpoint_only_means_cleaning_from_the_start(tmp_path):
    with open(os.path.join(tmp_path, CLEANER_CHECKPOINT), "w") as f:
        f.write("garbage")
    manager, logs, hws, cleaner = setup(tmp_path)
    assert cleaner.first_dirty == {}
    assert cleaner.clean_once()
    manager.close()


def test_a_log_the_cleaner_cannot_parse_is_marked_uncleanable(tmp_path):
    manager, logs, hws, cleaner = setup(tmp_path)
    first = logs[COMPACTED].segments()[0]
    with open(first.log_path, "r+b") as f:
        f.seek(61)                  # the first record's length varint, after the batch header
        f.write(b"\x7f")            # -64: no record has a negative length
    assert not cleaner.clean_once()
    assert cleaner.uncleanable == {COMPACTED}
    assert not cleaner.clean_once() and all(c.key != COMPACTED for c in cleaner.candidates(0))
    manager.close()


def test_tombstones_go_delete_retention_ms_after_a_pass_cleaned_past_them(tmp_path, monkeypatch):
    import kafka_ha.broker.log_cleaner as module
    manager, logs, hws, cleaner = setup(tmp_path)
    lg = logs[COMPACTED]
    lg.config = LogConfig(segment_bytes=1000, cleanup_policy="compact", delete_retention_ms=60_000)
    lg.append_as_leader(build_v2_batch([Record(b"k0", None, 1000)]), 0)
    now = [10**12]
    monkeypatch.setattr(module, "now_ms", lambda: now[0])

    def pass_with_new_data(at):
        now[0] = at
        for i in range(30):   # keys other than k0 keep the dirty section growing
            lg.append_as_leader(build_v2_batch([Record(b"k%d" % (1 + i % 4), b"%d" % i, 1000)]), 0)
        hws[COMPACTED] = lg.log_end_offset
        assert cleaner.clean_once()

    def k0():
        return [r.value for r in decode_records(lg.read(0, 10**8).to_bytes()) if r.key == b"k0"]
    pass_with_new_data(10**12)
    pass_with_new_data(10**12 + 59_999)
    assert k0() == [None], "kept: no pass cleaned past it 60 s ago"
    pass_with_new_data(10**12 + 60_000)
    assert k0() == [], "60 s after the first pass cleaned past it"
    manager.close()


def test_a_cleaned_copy_gets_the_groups_time_index_without_a_rebuild(tmp_path, monkeypatch):
    from kafka_ha.log.segment import LogSegment
    manager = LogManager([str(tmp_path)], LogConfig(), lambda topic: CONFIGS[topic])
    lg = manager.get_or_create_log(COMPACTED)
    for i in range(50):       # timestamps that grow: each segment's largest is its last record's
        lg.append_as_leader(build_v2_batch([Record(b"k%d" % (i % 5), b"%d" % i, 1000 + i)]), 0)
    hws = {COMPACTED: lg.log_end_offset}
    config = BrokerConfig({"broker.id": 1, "zookeeper.connect": "127.0.0.1:1"})
    cleaner = LogCleaner(manager, lambda: hws, config, offload=run_here)
    before = [s.largest_timestamp for s in lg.segments()[:-1]]
    rebuilt = []
    real = LogSegment._rebuild_index
    monkeypatch.setattr(LogSegment, "_rebuild_index", lambda self: rebuilt.append(self) or real(self))
    assert cleaner.clean_once()
    assert rebuilt == [], "the swap (on the event loop) scanned a segment to rebuild an index"
    cleaned = lg.segments()[:-1]
    # Upper bounds of what each copy holds (emptied copies keep their old bound).
    assert [s.largest_timestamp for s in cleaned] == before
    assert lg.offset_for_time(1000 + 48)[0] == 48      # the latest k3, kept by compaction
    manager.close()
