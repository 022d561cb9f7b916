"""Pure parts of the Spark connector: schema, options, planning, and stream offset logic."""
import pytest

pytest.importorskip("pyarrow", reason="the Spark tests need pyarrow (pip install -e '.[spark]')")
pytest.importorskip("pyspark", minversion="4.2",
                    reason="the Spark tests need pyspark>=4.2 (pip install -e '.[spark]')")

import json
import random

from kafka_ha.spark.arrow import ARROW_SCHEMA, ARROW_SCHEMA_WITH_HEADERS
from kafka_ha.spark.options import Subscription, parse_offsets_spec
from kafka_ha.spark.planning import OffsetRange, cap_by_backlog, split_ranges
from kafka_ha.spark.source import SCHEMA, SCHEMA_WITH_HEADERS, KafkaHaStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows


def test_arrow_schemas_are_what_spark_expects():
    from pyspark.sql.pandas.types import to_arrow_schema
    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)
    assert to_arrow_schema(SCHEMA_WITH_HEADERS, timezone="UTC").equals(ARROW_SCHEMA_WITH_HEADERS)


@pytest.mark.parametrize("options, message", [
    ({"subscribe": " , "}, "names no topic"),
    ({"subscribePattern": "("}, "not a valid regex"),
    ({"assign": "[1]"}, "must be a JSON object"),
    ({"assign": '{"t": ["0"]}'}, "must look like"),
    ({}, "got none"),
])
def test_subscription_errors(options, message):
    with pytest.raises(ValueError, match=message):
        Subscription.parse(options)


def test_offsets_spec():
    assert parse_offsets_spec("endingOffsets", "LATEST", batch_end=True) == "latest"
    with pytest.raises(ValueError, match="-2 .earliest. for \\[t,0\\] is not allowed"):
        parse_offsets_spec("endingOffsets", '{"t": {"0": -2}}', batch_end=True)
    with pytest.raises(ValueError, match="neither a keyword nor valid JSON"):
        parse_offsets_spec("startingOffsets", "soonest")
    with pytest.raises(ValueError, match="must look like"):
        parse_offsets_spec("startingOffsets", '{"t": {"0": -3}}')
    assert Subscription.parse({"subscribePattern": "a.*"}).matches("abc")
    assert not Subscription.parse({"subscribePattern": "a"}).matches("ab")   # whole name


def test_cap_by_backlog_admits_exactly_the_limit():
    rng = random.Random(7)
    for _ in range(500):
        tps = [("t", p) for p in range(rng.randint(1, 6))]
        start = {tp: rng.randint(0, 50) for tp in tps}
        end = {tp: start[tp] + rng.choice([0, 1, 3, 40, 1000]) for tp in tps}
        limit = rng.randint(1, 300)
        capped = cap_by_backlog(start, end, limit)
        total = sum(end[tp] - start[tp] for tp in tps)
        assert sum(capped[tp] - start[tp] for tp in tps) == min(limit, total)
        assert all(start[tp] <= capped[tp] <= end[tp] for tp in tps)


def test_split_ranges_covers_every_offset_once():
    rng = random.Random(3)
    for _ in range(300):
        ranges = [OffsetRange("t", p, s, s + rng.choice([0, 1, 2, 50, 999]))
                  for p, s in enumerate(rng.sample(range(100), 4))]
        wanted = rng.randint(1, 20)
        pieces = split_ranges(ranges, wanted)
        nonempty = [r for r in ranges if r.size]
        assert len(pieces) == min(max(wanted, len(nonempty)), sum(r.size for r in ranges))
        for r in nonempty:
            mine = [x for x in pieces if x.partition == r.partition]
            assert mine[0].start == r.start and mine[-1].end == r.end
            assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
            assert all(x.size > 0 for x in mine)


class FakeLookup:
    """Stands in for OffsetLookup: partitions and offsets set by the test."""

    def __init__(self):
        self.log_start, self.hw, self.leaderless = {}, {}, set()
        self.by_time = {}                  # ((topic, partition), timestamp) -> offset

    def topic_partitions(self, sub, require_topics=True, wait_s=2.0):
        return sorted(tp for tp in self.hw if sub.matches(tp[0]))

    def has_leader(self, tp):
        return tp not in self.leaderless

    def earliest(self, tps):
        return {tp: self.log_start[tp] for tp in tps}

    def latest(self, tps):
        return {tp: self.hw[tp] for tp in tps}

    def by_timestamp(self, stamps):
        return {tp: self.by_time.get((tp, stamp)) for tp, stamp in stamps.items()}

    def close(self):
        pass


def stream_reader(**options):
    reader = KafkaHaStreamReader({"bootstrap.servers": "h:1", "subscribe": "t", **options})
    reader._lookup = FakeLookup()
    return reader, reader._lookup


def test_stream_offsets_new_partitions_limits_and_available_now():
    reader, fake = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="10")
    fake.log_start = {("t", 0): 2, ("t", 1): 0}
    fake.hw = {("t", 0): 12, ("t", 1): 30}
    start = reader.initialOffset()
    assert start == {"t": {"0": 2, "1": 0}}
    assert reader.getDefaultReadLimit() == ReadMaxRows(10)
    end = reader.latestOffset(start, ReadMaxRows(10))          # backlog 10 + 30 -> 2 + 8 (+ 0)
    assert end == {"t": {"0": 4, "1": 8}} or end == {"t": {"0": 5, "1": 7}}
    assert sum(end["t"].values()) - sum(start["t"].values()) == 10
    assert [(r.partition, r.start, r.end) for r in reader.partitions(start, end)] == [
        (0, 2, end["t"]["0"]), (1, 0, end["t"]["1"])]
    assert reader.partitions(end, end) == []

    # availableNow: data after prepare is not admitted; a new partition starts at earliest
    reader.prepareForTriggerAvailableNow()
    fake.hw = {("t", 0): 50, ("t", 1): 30}
    fake.log_start[("t", 2)] = 0
    fake.hw[("t", 2)] = 5
    everything = reader.latestOffset(end, ReadAllAvailable())
    assert everything == {"t": {"0": 12, "1": 30}}
    assert reader.latestOffset(everything, ReadAllAvailable()) == everything   # done
    # without the availableNow target, the new partition and new data show up
    reader._target = None
    fake.leaderless = {("t", 2)}                            # ... once it has a leader
    assert reader.latestOffset(everything, ReadAllAvailable()) == {"t": {"0": 50, "1": 30}}
    fake.leaderless = set()
    later = reader.latestOffset(everything, ReadAllAvailable())
    assert later == {"t": {"0": 50, "1": 30, "2": 5}}
    assert [(r.partition, r.start, r.end) for r in reader.partitions(everything, later)] == [
        (0, 12, 50), (2, 0, 5)]
    assert json.dumps(later) == '{"t": {"0": 50, "1": 30, "2": 5}}'     # canonical order


def test_available_now_reaches_its_target_while_a_new_leaders_hw_lags():
    # Spark ends an availableNow query at the first latestOffset without new data, so the
    # lagging high watermark of a new leader (KAFKA-2334) must not hold a partition below
    # the target: those records were committed when the target was taken.
    reader, fake = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="40")
    fake.log_start, fake.hw = {("t", 0): 0, ("t", 1): 0}, {("t", 0): 100, ("t", 1): 100}
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    first = reader.latestOffset(start, ReadMaxRows(40))
    assert first == {"t": {"0": 20, "1": 20}}
    fake.hw = {("t", 0): 15, ("t", 1): 20}          # new leaders: below and at our position
    assert reader.latestOffset(first, ReadMaxRows(40)) == {"t": {"0": 40, "1": 40}}
    assert reader.latestOffset(first, ReadAllAvailable()) == {"t": {"0": 100, "1": 100}}

    # A target taken from a lagging leader may be below the checkpoint: nothing to read in
    # this run, and no data loss while the high watermark is not below the checkpoint.
    reader, fake = stream_reader(highWatermarkGraceMs="0")
    fake.log_start, fake.hw = {("t", 0): 0}, {("t", 0): 10}
    reader.prepareForTriggerAvailableNow()
    fake.hw = {("t", 0): 25}
    assert reader.latestOffset({"t": {"0": 20}}, ReadAllAvailable()) == {"t": {"0": 20}}
    fake.hw = {("t", 0): 12}
    with pytest.raises(Exception, match="went back from 20 to 12"):
        reader.latestOffset({"t": {"0": 20}}, ReadAllAvailable())


def test_stream_data_loss_checks():
    reader, fake = stream_reader(startingOffsets=json.dumps({"t": {"0": 1}}))
    fake.log_start, fake.hw = {("t", 0): 5}, {("t", 0): 9}
    with pytest.raises(Exception, match="below the log start offset 5"):
        reader.initialOffset()
    reader, fake = stream_reader(startingOffsets=json.dumps({"t": {"0": 1}}),
                                 failOnDataLoss="false", highWatermarkGraceMs="0")
    fake.log_start, fake.hw = {("t", 0): 5}, {("t", 0): 9}
    assert reader.initialOffset() == {"t": {"0": 5}}
    fake.hw = {("t", 0): 3}                                 # truncated below our position
    patient = _with(stream_reader()[0], fake)               # a new leader's HW may lag: wait
    assert patient.latestOffset({"t": {"0": 5}}, ReadAllAvailable()) == {"t": {"0": 5}}
    strict = _with(stream_reader(highWatermarkGraceMs="0")[0], fake)
    with pytest.raises(Exception, match="went back from 5 to 3"):
        strict.latestOffset({"t": {"0": 5}}, ReadAllAvailable())
    assert reader.latestOffset({"t": {"0": 5}}, ReadAllAvailable()) == {"t": {"0": 3}}
    fake.hw = {}                                            # topic deleted
    with pytest.raises(Exception, match=r"partitions \[t,0\] no longer exist"):
        strict.latestOffset({"t": {"0": 5}}, ReadAllAvailable())
    assert reader.latestOffset({"t": {"0": 5}}, ReadAllAvailable()) == {}


def _with(reader, fake):
    reader._lookup = fake
    return reader


def test_stream_reader_pickles_without_its_client():
    import pickle
    reader, _ = stream_reader()
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._lookup is None and copy.subscription == reader.subscription
