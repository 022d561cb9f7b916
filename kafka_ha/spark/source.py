"""``kafka_ha``: a PySpark (4.2+) Python data source for kafka-ha topics.

    df = (spark.read.format("kafka_ha").option("bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Reading (batch and ``readStream``) follows Spark's Kafka source: the same
schema (key, value, topic, partition, offset, timestamp, timestampType), the
same options (:mod:`kafka_ha.spark.option_names` lists them; an unknown one is
an error) and the same offset JSON in checkpoints (``{"topic": {"0": next_offset}}``).
Start and end bounds, timestamps included, are in :mod:`kafka_ha.spark.bounds`.  Writing (``write`` / ``writeStream``)
lives in :mod:`kafka_ha.spark.sink`.

One input partition per topic partition (split further by ``minPartitions``),
bounded by the high watermarks snapshotted at planning: only committed data
is read, and a retried task or replayed micro-batch reads exactly the same
records.  Tasks read from the current leader and follow leader changes.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator, Mapping

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader,
                                    InputPartition)
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              ReadMinRows, SupportsTriggerAvailableNow)
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from .bounds import Bounds
from .kafka_io import (ClientSettings, DataLossError, OffsetLookup, SourceError, read_range,
                       warn_data_loss)
from .option_names import check_known
from .options import (Subscription, offsets_from_json, offsets_to_json, option, parse_bool,
                      parse_duration_ms, parse_int)
from .planning import OffsetRange, cap_by_backlog, delay_batch, split_ranges

log = logging.getLogger(__name__)

TP = tuple[str, int]
SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()),
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("offset", LongType()), StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType())])
SCHEMA_WITH_HEADERS = StructType(SCHEMA.fields + [StructField("headers", ArrayType(StructType([
    StructField("key", StringType()), StructField("value", BinaryType())])))])


def _schema_for(options: Mapping[str, str]) -> StructType:
    with_headers = parse_bool("includeHeaders", option(options, "includeHeaders"), False)
    return SCHEMA_WITH_HEADERS if with_headers else SCHEMA


def _check_schema(schema: StructType, options: Mapping[str, str]) -> None:
    fixed = _schema_for(options)
    if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in fixed]:
        raise ValueError(f"the kafka_ha source has a fixed schema ({fixed.simpleString()}); "
                         f"do not pass one (got {schema.simpleString()})")


def _not_below_log_start(tp, start: int, log_start: int, fail_on_data_loss: bool) -> int:
    """``start``, or the log start if retention removed it (data loss unless allowed)."""
    if start >= log_start:
        return start
    if fail_on_data_loss:
        raise DataLossError(
            f"startingOffsets {start} of {_tp(tp)} is below the log start offset {log_start}: "
            f"offsets {start}..{log_start - 1} are no longer in the log")
    warn_data_loss(f"{_tp(tp)} starts at its log start {log_start}, not at {start}")
    return log_start


def _tp(tp: TP) -> str:
    return f"[{tp[0]},{tp[1]}]"


class KafkaHaDataSource(DataSource):
    """Register with ``spark.dataSource.register(KafkaHaDataSource)``; format ``"kafka_ha"``."""

    @classmethod
    def name(cls) -> str:
        return "kafka_ha"

    def schema(self) -> StructType:
        # called by load(): report option mistakes now rather than when the query runs
        check_known(self.options, "source")
        Subscription.parse(self.options)
        return _schema_for(self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        check_known(self.options, "source")
        _check_schema(schema, self.options)
        return KafkaHaBatchReader(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        check_known(self.options, "source")
        _check_schema(schema, self.options)
        return KafkaHaStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool):
        from .sink import KafkaHaWriter
        check_known(self.options, "sink")
        return KafkaHaWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from .sink import KafkaHaStreamWriter
        check_known(self.options, "sink")
        return KafkaHaStreamWriter(self.options, schema, overwrite)


class _ReaderBase:
    """Options shared by the batch and the stream reader (parsed on the driver side)."""

    def _parse_common(self, options: Mapping[str, str], role: str) -> None:
        self.subscription = Subscription.parse(options)
        self.settings = ClientSettings.from_options(options, role)
        self.fail_on_data_loss = parse_bool("failOnDataLoss", option(options, "failOnDataLoss"))
        self.min_partitions = parse_int("minPartitions", option(options, "minPartitions"),
                                        None, 1)
        self.max_records = parse_int("maxRecordsPerPartition",
                                     option(options, "maxRecordsPerPartition"), None, 1)
        self.include_headers = parse_bool("includeHeaders", option(options, "includeHeaders"),
                                          False)

    def _check_named(self, bounds: Bounds, tps: list[TP]) -> None:
        unknown = sorted(set(bounds.named_partitions()) - set(tps))
        if unknown:
            raise SourceError(f"{bounds.source} names partitions outside the subscription "
                              f"({self.subscription.describe()}): "
                              f"{', '.join(map(_tp, unknown))}")

    def _split(self, ranges: list[OffsetRange]) -> list[OffsetRange]:
        return split_ranges(ranges, self.min_partitions, self.max_records)

    def _read(self, partition: InputPartition) -> Iterator:
        if not isinstance(partition, OffsetRange):   # Spark's placeholder for "no partitions"
            return iter(())
        return read_range(self.settings, partition.topic, partition.partition, partition.start,
                          partition.end, self.fail_on_data_loss, self.include_headers)


class KafkaHaBatchReader(_ReaderBase, DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self._parse_common(options, "relation")
        self.starting = Bounds.parse(options, "starting", "earliest", batch=True)
        self.ending = Bounds.parse(options, "ending", "latest", batch=True)

    def partitions(self) -> list[OffsetRange]:
        lookup = OffsetLookup(self.settings)
        try:
            tps = lookup.topic_partitions(self.subscription)
            self._check_named(self.starting, tps)
            self._check_named(self.ending, tps)
            earliest, latest = lookup.earliest(tps), lookup.latest(tps)
            starts = self.starting.resolve(tps, earliest, latest, lookup.by_timestamp)
            ends = self.ending.resolve(tps, earliest, latest, lookup.by_timestamp)
        finally:
            lookup.close()
        ranges = []
        for tp in tps:
            start, end = starts[tp], ends[tp]
            start = _not_below_log_start(tp, start, earliest[tp], self.fail_on_data_loss)
            if end > latest[tp]:
                raise SourceError(f"endingOffsets {end} of {_tp(tp)} is beyond its committed "
                                  f"data (high watermark {latest[tp]})")
            if start > end:
                raise SourceError(f"startingOffsets {start} of {_tp(tp)} is after its ending "
                                  f"offset {end}")
            ranges.append(OffsetRange(tp[0], tp[1], start, end))
        return self._split(ranges)

    def read(self, partition: InputPartition) -> Iterator:
        return self._read(partition)


class KafkaHaStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader; offsets are Spark's Kafka JSON ``{"topic": {"0": next_offset}}``.

    The driver-side calls (``initialOffset``, ``latestOffset``, ``partitions``,
    ``commit``) run in one long-lived Python process, which keeps one metadata
    client; the instance pickled to executors carries no connection.
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        self._parse_common(options, "source")
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if option(options, name) is not None:
                raise ValueError(f"option {name!r} is for batch queries only")
        self.starting = Bounds.parse(options, "starting", "latest")
        self.max_offsets = parse_int("maxOffsetsPerTrigger",
                                     option(options, "maxOffsetsPerTrigger"), None, 1)
        self.min_offsets = parse_int("minOffsetsPerTrigger",
                                     option(options, "minOffsetsPerTrigger"), None, 1)
        self.max_trigger_delay_ms = parse_duration_ms("maxTriggerDelay",
                                                      option(options, "maxTriggerDelay"), "15m")
        if self.min_offsets and self.max_offsets and self.min_offsets > self.max_offsets:
            raise ValueError(f"minOffsetsPerTrigger ({self.min_offsets}) must not exceed "
                             f"maxOffsetsPerTrigger ({self.max_offsets})")
        self._last_trigger_ms = 0.0                   # when a batch was last let through
        self.hw_grace_s = parse_int("highWatermarkGraceMs", option(options, "highWatermarkGraceMs"),
                                    30000, 0) / 1000.0
        self._behind: dict[TP, float] = {}             # when a partition's HW went back
        self._lookup: OffsetLookup | None = None
        self._target: dict[TP, int] | None = None     # availableNow: never read past this
        self._latest: dict[TP, int] | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_lookup"] = None
        return state

    @property
    def lookup(self) -> OffsetLookup:
        if self._lookup is None:
            self._lookup = OffsetLookup(self.settings)
        return self._lookup

    def initialOffset(self) -> dict:
        tps = self.lookup.topic_partitions(self.subscription)
        self._check_named(self.starting, tps)
        earliest, latest = self.lookup.earliest(tps), self.lookup.latest(tps)
        starts = self.starting.resolve(tps, earliest, latest, self.lookup.by_timestamp)
        offsets = {}
        for tp in tps:
            offset = _not_below_log_start(tp, starts[tp], earliest[tp], self.fail_on_data_loss)
            if offset > latest[tp]:
                raise SourceError(f"startingOffsets {offset} of {_tp(tp)} is beyond its "
                                  f"committed data (high watermark {latest[tp]})")
            offsets[tp] = offset
        return offsets_to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        # Python sources get one limit (no composite): the minimum is applied in latestOffset
        if self.max_offsets:
            return ReadMaxRows(self.max_offsets)
        return ReadMinRows(self.min_offsets) if self.min_offsets else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.lookup.topic_partitions(self.subscription, require_topics=False, wait_s=0)
        self._target = self.lookup.latest(tps)
        log.info("availableNow target offsets: %s", offsets_to_json(self._target))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        tps = self.lookup.topic_partitions(self.subscription, require_topics=False, wait_s=0)
        gone = sorted(set(begin) - set(tps))
        if gone and self.fail_on_data_loss:
            raise DataLossError(f"partitions {', '.join(map(_tp, gone))} no longer exist (topic "
                                f"deleted?)")
        if self._target is not None:
            tps = [tp for tp in tps if tp in self._target]
        # a partition just added may have no leader yet: it joins in a later batch
        tps = [tp for tp in tps if tp in begin or self.lookup.has_leader(tp)]
        latest = self.lookup.latest(tps)
        self._latest = dict(latest)
        new = [tp for tp in tps if tp not in begin]
        begin.update(self.lookup.earliest(new) if new else {})
        end = {}
        now = time.monotonic()
        for tp in tps:
            target = None if self._target is None else self._target[tp]
            if target is not None and target >= begin[tp]:
                # availableNow reads up to its snapshot, which was committed when taken, even
                # while a new leader's high watermark still lags it: Spark ends the query at
                # the first batch without new data, so holding back here would stop it short.
                end[tp] = target
                self._behind.pop(tp, None)
                continue
            if latest[tp] >= begin[tp]:
                # (a target below our position, taken from a lagging leader: nothing to read)
                end[tp] = latest[tp] if target is None else begin[tp]
                self._behind.pop(tp, None)
                continue
            end[tp] = latest[tp] if target is None else min(latest[tp], target)
            # A new leader's high watermark may lag its predecessor's until its followers
            # have fetched once (KAFKA-2334): wait that out before calling it data loss.
            if now - self._behind.setdefault(tp, now) < self.hw_grace_s:
                end[tp] = begin[tp]
                continue
            if self.fail_on_data_loss:
                raise DataLossError(
                    f"the high watermark of {_tp(tp)} went back from {begin[tp]} to "
                    f"{latest[tp]} for over {self.hw_grace_s:g} s (partition truncated or topic "
                    f"re-created)")
            warn_data_loss(f"the high watermark of {_tp(tp)} went back from {begin[tp]} to "
                           f"{latest[tp]}")
        if self.min_offsets and self._target is None and limit == self.getDefaultReadLimit():
            backlog = sum(max(0, end[tp] - begin[tp]) for tp in end)
            delay, self._last_trigger_ms = delay_batch(
                backlog, self.min_offsets, time.time() * 1000, self._last_trigger_ms,
                self.max_trigger_delay_ms)
            if delay:
                return start
        if isinstance(limit, ReadMaxRows):
            end = cap_by_backlog({tp: begin[tp] for tp in end if begin[tp] <= end[tp]}, end,
                                 limit.max_rows)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:   # partitions discovered since the last batch start at their earliest offset
            begin.update(self.lookup.earliest(new))
        ranges = []
        for tp, stop in sorted(until.items()):
            if begin[tp] > stop:
                log.warning("skipping %s: start %d is after end %d", _tp(tp), begin[tp], stop)
                continue
            ranges.append(OffsetRange(tp[0], tp[1], begin[tp], stop))
        return self._split(ranges)

    def read(self, partition: InputPartition) -> Iterator:
        return self._read(partition)

    def commit(self, end: dict) -> None:
        log.debug("batch committed up to %s", end)

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None
