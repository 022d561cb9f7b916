"""message.timestamp.type and message.timestamp.difference.max.ms: the leader's pure
stamping step (records.timestamps), the topic configs, and the log's append."""
import pytest

from kafka_ha.config import ConfigError, validate_topic_config
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log import Log
from kafka_ha.model import TopicPartition
from kafka_ha.records.builder import Record, build_legacy_message_set, build_v2_batch
from kafka_ha.records.errors import InvalidTimestampError
from kafka_ha.records.reader import decode_records
from kafka_ha.records.shallow import iter_entries, validate_entry
from kafka_ha.records.timestamps import apply_timestamp_type, stamp_log_append_time, timestamp_problem

RECS = [Record(b"k", b"a", 100), Record(None, b"b", 300), Record(None, b"c", 200)]


def stamped(data):
    buf = bytearray(data)
    stamp_log_append_time(buf, 777)
    for entry in iter_entries(buf):
        validate_entry(buf, entry)          # the CRC was recomputed
    return [(r.offset, r.timestamp_ms, r.timestamp_type, r.value) for r in decode_records(buf)]


@pytest.mark.parametrize("compression", ["none", "gzip", "zstd"])
def test_log_append_time_stamps_v2_batches(compression):
    data = build_v2_batch(RECS, compression=compression)
    assert stamped(data) == [(0, 777, 1, b"a"), (1, 777, 1, b"b"), (2, 777, 1, b"c")]


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_log_append_time_stamps_magic_1_entries_and_wrappers(compression):
    data = build_legacy_message_set(RECS, magic=1, compression=compression)
    assert [ts for _, ts, _, _ in stamped(data)] == [777, 777, 777]
    assert {kind for _, _, kind, _ in stamped(data)} == {1}


def test_magic_0_has_no_timestamp_to_stamp_or_check():
    data = build_legacy_message_set(RECS, magic=0)
    assert [(ts, kind) for _, ts, kind, _ in stamped(data)] == [(-1, -1)] * 3
    assert timestamp_problem(data, 10**12, 0) is None


def test_create_time_bounds_check_the_first_and_largest_timestamps():
    batch = build_v2_batch(RECS)                # base 100, max 300
    assert timestamp_problem(batch, 200, 100) is None
    assert "timestamp 300" in timestamp_problem(batch, 150, 100)
    assert "timestamp 100" in timestamp_problem(batch, 250, 100)
    with pytest.raises(InvalidTimestampError) as err:
        apply_timestamp_type(bytearray(batch), 300, False, 10, 5000)
    assert err.value.code.name == "INVALID_TIMESTAMP"
    assert apply_timestamp_type(bytearray(batch), 300, False, 10**6, 5000) == (300, -1)
    assert apply_timestamp_type(bytearray(batch), 300, True, 10, 5000) == (5000, 5000)


def test_topic_configs_parse_as_kafka_names_them():
    assert validate_topic_config({"message.timestamp.type": "LogAppendTime",
                                  "message.timestamp.difference.max.ms": "60000"}) == {
        "message.timestamp.type": "LogAppendTime", "message.timestamp.difference.max.ms": 60000}
    with pytest.raises(ConfigError, match="String must be one of: CreateTime, LogAppendTime"):
        validate_topic_config({"message.timestamp.type": "WallClock"})
    with pytest.raises(ConfigError, match="at least 0"):
        validate_topic_config({"message.timestamp.difference.max.ms": "-1"})


def test_the_log_stamps_and_indexes_the_leaders_time(tmp_path, monkeypatch):
    from kafka_ha import clock
    monkeypatch.setattr(clock, "now_ms", lambda: 123_456)
    lg = Log(str(tmp_path / "t-0"), TopicPartition("t", 0), LogConfig(log_append_time=True))
    info = lg.append_as_leader(build_v2_batch(RECS), 0)
    assert (info.max_timestamp, info.log_append_time) == (123_456, 123_456)
    assert [r.timestamp_ms for r in decode_records(lg.read(0, 1 << 20).to_bytes())] == [123_456] * 3
    assert lg.offset_for_time(123_456) == (0, 123_456) and lg.offset_for_time(123_457) is None
    strict = Log(str(tmp_path / "u-0"), TopicPartition("u", 0), LogConfig(timestamp_difference_max_ms=1000))
    with pytest.raises(InvalidTimestampError):
        strict.append_as_leader(build_v2_batch(RECS), 0)
    assert strict.log_end_offset == 0          # nothing was appended


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_create_time_bounds_check_every_record_not_only_the_first_and_largest(compression):
    """Kafka's LogValidator checks each record: a record between the first and the largest
    may be the one out of bounds (here 50, with the first 200 and the largest 300)."""
    batch = build_v2_batch([Record(None, b"a", 200), Record(None, b"b", 50), Record(None, b"c", 300)],
                           compression=compression)
    assert "timestamp 50 " in timestamp_problem(batch, 250, 100)
    assert timestamp_problem(batch, 250, 200) is None
    # Without a bound (the default) nothing is read at all.
    assert timestamp_problem(batch, 10**15, (1 << 63) - 1) is None
