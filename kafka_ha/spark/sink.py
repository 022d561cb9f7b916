"""The ``kafka_ha`` sink: ``df.write.format("kafka_ha")`` and ``df.writeStream.format("kafka_ha")``.

Columns as in Spark's Kafka sink: ``value`` (string or binary, required),
``key`` (string or binary, optional), ``topic`` (string; the ``topic`` option
overrides it), ``partition`` (int, optional: null lets the producer's
partitioner choose), ``headers`` (``array<struct<key:string,value:binary>>``,
optional).  Other columns are ignored.

Each task produces its rows with ``acks=all`` (option ``acks``), waits until
every record is acknowledged, and returns a :class:`KafkaHaCommitMessage` with
its counts; a record that could not be written fails the task, and Spark
retries it.  Delivery is therefore at-least-once: a retried task or batch
may write some records twice.
"""
from __future__ import annotations

import logging
from functools import partial
from dataclasses import dataclass, field
from typing import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)
from pyspark.sql.types import (ArrayType, BinaryType, ByteType, IntegerType, ShortType,
                               StringType, StructType)

from kafka_ha.client import NoBrokersAvailable, Producer
from kafka_ha.client.producer import parse_acks

from .kafka_io import SourceError, resolve_bootstrap
from .option_names import client_option
from .options import option, parse_int

log = logging.getLogger(__name__)


@dataclass
class KafkaHaCommitMessage(WriterCommitMessage):
    """What one task wrote: record count, payload bytes, and records per ``(topic, partition)``."""

    records: int = 0
    bytes: int = 0
    by_partition: dict = field(default_factory=dict)


def _check_columns(schema: StructType, topic_option: str | None) -> None:
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise ValueError(f"the kafka_ha sink needs a 'value' column (string or binary); "
                         f"the DataFrame has {schema.simpleString()}")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], (StringType, BinaryType)):
            raise ValueError(f"column {name!r} must be string or binary, not "
                             f"{types[name].simpleString()}")
    if topic_option is None and "topic" not in types:
        raise ValueError("the kafka_ha sink needs a 'topic' column or the 'topic' option")
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise ValueError(f"column 'topic' must be string, not {types['topic'].simpleString()}")
    if "partition" in types and not isinstance(types["partition"], (IntegerType, ShortType,
                                                                     ByteType)):
        raise ValueError(f"column 'partition' must be int, not "
                         f"{types['partition'].simpleString()}")
    if "headers" in types:
        headers = types["headers"]
        element = headers.elementType if isinstance(headers, ArrayType) else None
        if not (isinstance(element, StructType) and len(element.fields) == 2
                and isinstance(element.fields[0].dataType, StringType)
                and isinstance(element.fields[1].dataType, (BinaryType, StringType))):
            raise ValueError(f"column 'headers' must be array<struct<key:string,value:binary>>, "
                             f"not {headers.simpleString()}")


def _as_bytes(column: pa.Array) -> list:
    values = column.to_pylist()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return [None if v is None else v.encode() for v in values]
    return values


def _headers(column: pa.Array) -> list:
    out = []
    for value in column.to_pylist():
        if not value:
            out.append(())
            continue
        pairs = []
        for h in value:
            hk, hv = list(h.values())
            pairs.append((hk, hv.encode() if isinstance(hv, str) else hv))
        out.append(tuple(pairs))
    return out


class _Write:
    """Driver-side validation plus the task-side produce loop (pickled to executors)."""

    def _setup(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise ValueError("the kafka_ha sink only appends: use mode('append')")
        self.bootstrap = resolve_bootstrap(options)
        self.topic = option(options, "topic")
        _check_columns(schema, self.topic)
        # producer settings: "<key>" or Spark's "kafka.<key>"
        self.acks = client_option(options, "acks", "all")
        self.compression = option(options, "compression") or client_option(
            options, "compression.type", "none")
        self.linger_ms = parse_int("linger.ms", client_option(options, "linger.ms"), 5, 0)
        self.batch_size = parse_int("batch.size", client_option(options, "batch.size"), 65536, 1)
        self.max_block_ms = parse_int("max.block.ms", client_option(options, "max.block.ms"),
                                      60000, 1)
        self.delivery_timeout_ms = parse_int(
            "delivery.timeout.ms", client_option(options, "delivery.timeout.ms"), 120000, 1)
        self.client_id = client_option(options, "client.id", "kafka-ha-spark-writer")
        parse_acks(self.acks)

    def _write(self, batches: Iterator[pa.RecordBatch]) -> KafkaHaCommitMessage:
        producer = Producer(self.bootstrap, acks=self.acks, compression=self.compression,
                            linger_ms=self.linger_ms, batch_size=self.batch_size,
                            max_block_ms=self.max_block_ms,
                            delivery_timeout_ms=self.delivery_timeout_ms,
                            client_id=self.client_id)
        message = KafkaHaCommitMessage()
        failures: list[BaseException] = []
        counts = message.by_partition

        def done(topic: str, future) -> None:
            exc = future.exception()
            if exc is not None:
                failures.append(exc)
            else:
                tp = (topic, future.get().partition)
                counts[tp] = counts.get(tp, 0) + 1

        try:
            for batch in batches:
                self._send_batch(producer, batch, done, message)
                if failures:
                    break
            if not failures:
                producer.flush()
        finally:
            producer.close(timeout=0 if failures else None)
        if failures:
            if isinstance(failures[0], NoBrokersAvailable):
                raise SourceError(f"cannot reach the kafka-ha cluster at bootstrap.servers="
                                  f"{self.bootstrap}: {failures[0]}") from failures[0]
            raise SourceError(f"{len(failures)} record(s) were not acknowledged by the cluster at "
                              f"{self.bootstrap}; first error: {failures[0]}") from failures[0]
        message.records = sum(counts.values())
        return message

    def _send_batch(self, producer: Producer, batch: pa.RecordBatch, done, message) -> None:
        names = batch.schema.names
        n = batch.num_rows
        values = _as_bytes(batch.column("value"))
        keys = _as_bytes(batch.column("key")) if "key" in names else [None] * n
        if self.topic is not None:
            topics = [self.topic] * n
        else:
            topics = batch.column("topic").to_pylist()
        parts = batch.column("partition").to_pylist() if "partition" in names else [None] * n
        headers = _headers(batch.column("headers")) if "headers" in names else [()] * n
        size = 0
        for topic, key, value, part, hdrs in zip(topics, keys, values, parts, headers):
            if topic is None:
                raise SourceError("a row has a null 'topic' (and no 'topic' option is set)")
            producer.send(topic, value=value, key=key, partition=part,
                          headers=hdrs).add_done_callback(partial(done, topic))
            size += (len(value) if value else 0) + (len(key) if key else 0)
        message.bytes += size


def _summarize(messages) -> tuple[int, int, int]:
    ok = [m for m in messages if isinstance(m, KafkaHaCommitMessage)]
    return len(ok), sum(m.records for m in ok), len(messages) - len(ok)


class KafkaHaWriter(_Write, DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        self._setup(options, schema, overwrite)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaHaCommitMessage:
        return self._write(iterator)

    def commit(self, messages) -> None:
        tasks, records, failed = _summarize(messages)
        log.info("kafka_ha: %d task(s) wrote %d record(s)", tasks, records)

    def abort(self, messages) -> None:
        tasks, records, failed = _summarize(messages)
        log.warning("kafka_ha: write aborted; %d task(s) had written %d record(s) (at-least-once: "
                    "they stay in the log), %d task(s) failed", tasks, records, failed)


class KafkaHaStreamWriter(_Write, DataSourceStreamArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        self._setup(options, schema, False)   # streaming "complete"/"update" modes append too

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaHaCommitMessage:
        return self._write(iterator)

    def commit(self, messages, batchId: int) -> None:
        tasks, records, _ = _summarize(messages)
        log.info("kafka_ha: batch %d: %d task(s) wrote %d record(s)", batchId, tasks, records)

    def abort(self, messages, batchId: int) -> None:
        tasks, records, failed = _summarize(messages)
        log.warning("kafka_ha: batch %d aborted; %d record(s) already written, %d task(s) failed",
                    batchId, records, failed)
