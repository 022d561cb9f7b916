"""Time-based rolling: segment.ms on append (Kafka's rule) and the retention pass
rolling a quiet, committed, expired active segment so that retention.ms empties
a topic that no longer receives data."""
import os

from kafka_ha import clock
from kafka_ha.log import Log, LogConfig
from kafka_ha.model import TopicPartition
from kafka_ha.records import Record, build_v2_batch, decode_records

TP = TopicPartition("quiet", 0)


def batch(timestamp_ms, n=2):
    return build_v2_batch([Record(b"k", b"v", timestamp_ms)] * n)


def open_log(tmp_path, **config):
    return Log(str(tmp_path / "quiet-0"), TP, LogConfig(**config))


def test_an_append_rolls_when_its_timestamp_is_segment_ms_past_the_first_batch(tmp_path):
    lg = open_log(tmp_path, segment_ms=1000)
    lg.append_as_leader(batch(10_000), 0)
    lg.append_as_leader(batch(11_000), 0)          # waited exactly 1000: not more
    assert lg.segment_base_offsets() == [0]
    lg.append_as_leader(batch(11_001), 0)
    assert lg.segment_base_offsets() == [0, 4]
    lg.append_as_leader(batch(11_500), 0)          # the new segment measures from its own first batch
    assert lg.segment_base_offsets() == [0, 4]
    lg.close()


def test_the_jitter_brings_the_roll_forward(tmp_path):
    lg = open_log(tmp_path, segment_ms=1000, segment_jitter_ms=10_000)
    lg.append_as_leader(batch(10_000), 0)
    lg._segments[-1].roll_jitter_ms = 600           # drawn below min(jitter, segment.ms)
    lg.append_as_leader(batch(10_401), 0)
    assert lg.segment_base_offsets() == [0, 2]
    assert 0 <= lg._segments[-1].roll_jitter_ms < 1000
    lg.close()


def test_a_first_batch_without_timestamp_measures_wall_clock_since_creation(tmp_path):
    lg = open_log(tmp_path, segment_ms=1000)
    lg.append_as_leader(batch(-1), 0)
    lg._segments[-1].created_ms = clock.now_ms() - 5000
    lg.append_as_leader(batch(-1), 0)
    assert lg.segment_base_offsets() == [0, 2]
    lg.close()


def test_the_first_batch_timestamp_is_read_back_after_a_restart(tmp_path):
    lg = open_log(tmp_path, segment_ms=1000)
    lg.append_as_leader(batch(10_000), 0)
    lg.close()
    lg = open_log(tmp_path, segment_ms=1000)
    lg.append_as_leader(batch(12_000), 0)
    assert lg.segment_base_offsets() == [0, 2]
    lg.close()


def test_a_quiet_committed_topic_is_emptied_by_retention_ms(tmp_path):
    lg = open_log(tmp_path, retention_ms=60_000)
    now = clock.now_ms()
    lg.append_as_leader(batch(now - 120_000), 0)
    lg.append_as_leader(batch(now - 90_000), 0)
    assert lg.delete_old_segments(now, high_watermark=4) == 1      # rolled, then deleted
    assert lg.segment_base_offsets() == [4]
    assert lg.log_start_offset == lg.log_end_offset == 4
    lg.append_as_leader(batch(now), 0)                              # the log goes on at 4
    assert [r.offset for r in decode_records(lg.read(4, 10**6).to_bytes())] == [4, 5]
    lg.close()


def test_the_active_segment_stays_while_it_is_young_uncommitted_or_compacted_only(tmp_path):
    now = clock.now_ms()
    for config, records_at, hw in ((dict(retention_ms=60_000), now - 30_000, 2),   # young
                                    (dict(retention_ms=60_000), now - 90_000, 1),  # not all committed
                                    (dict(retention_ms=60_000, cleanup_policy="compact"), now - 90_000, 2),
                                    (dict(retention_ms=-1), now - 90_000, 2)):
        lg = open_log(tmp_path, **config)
        lg.append_as_leader(batch(records_at), 0)
        assert lg.delete_old_segments(now, high_watermark=hw) == 0, config
        assert lg.segment_base_offsets() == [0]
        lg.close()
        for name in os.listdir(lg.dir):
            os.unlink(os.path.join(lg.dir, name))


def test_a_garbage_first_header_does_not_break_the_roll_check(tmp_path):
    from kafka_ha.log.segment import LogSegment
    segment = LogSegment(str(tmp_path), 0)
    with open(segment.log_path, "r+b") as f:
        f.write(b"\0" * 8 + b"\0\0\0\1" + b"\0" * 20)     # size 1: no entry can be that small
    segment._size = 32
    assert segment.first_batch_timestamp() == -1
    segment.close()


def test_a_follower_fetch_larger_than_a_segment_is_split_across_rolls(tmp_path):
    """A leader's read may span several of its segments (a lagging follower fetches up to
    replica.fetch.max.bytes); the follower rolls between whole entries instead of refusing."""
    leader = Log(str(tmp_path / "leader-0"), TP, LogConfig(segment_bytes=1000))
    for i in range(40):
        leader.append_as_leader(build_v2_batch([Record(b"k%d" % i, b"v" * 40, 1000)]), 0)
    fetched = leader.read(0, 10**6).to_bytes()
    assert len(fetched) > 3000
    follower = Log(str(tmp_path / "follower-0"), TP, LogConfig(segment_bytes=1000))
    info = follower.append_as_follower(fetched)
    assert (info.first_offset, info.last_offset, info.count) == (0, 39, 40)
    assert follower.read(0, 10**6).to_bytes() == fetched
    assert len(follower.segment_base_offsets()) > 3
    assert all(s.size <= 1000 for s in follower.segments())
    leader.close()
    follower.close()
