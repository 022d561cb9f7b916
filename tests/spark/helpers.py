"""Helpers for the Spark tests: producing and consuming with our own client, checksums,
and the kafka_ha reader, writer and availableNow parquet streams."""
import time
import zlib
from collections import deque

from kafka_ha.client import Consumer, Producer


def send_all(cluster, topic, records, **config):
    """Send ``(key, value, partition)`` triples with acks=all; yield ``(RecordMetadata, value)``.

    Pairs come in send order, as soon as the record and all before it are acknowledged,
    so only the unacknowledged futures are held: a caller that folds the pairs into
    checksums can send millions of records in constant memory.  A record that was not
    acknowledged raises its error here.  ``config`` goes to the Producer (default
    ``linger_ms=2``).
    """
    producer = Producer(cluster.bootstrap_servers, acks="all", **{"linger_ms": 2, **config})
    pending = deque()
    try:
        for key, value, partition in records:
            pending.append((value, producer.send(topic, value=value, key=key,
                                                 partition=partition)))
            while pending and pending[0][1].done():
                value, future = pending.popleft()
                yield future.get(), value
        producer.flush()
        while pending:
            value, future = pending.popleft()
            yield future.get(), value
    finally:
        producer.close()


def produce(cluster, topic, count, start=0, partition=None, prefix=b"v"):
    """Send ``count`` keyed records with acks=all; return ``{(partition, offset): value}``."""
    records = ((b"k%d" % (i % 17), prefix + b"%d" % i, partition)
               for i in range(start, start + count))
    return {(meta.partition, meta.offset): value
            for meta, value in send_all(cluster, topic, records)}


def consume(cluster, topic, partitions, timeout_s=60):
    """Every committed record of ``topic`` as ConsumerRecords (reads to the end offsets)."""
    consumer = Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest",
                        fetch_max_wait_ms=100)
    tps = [(topic, p) for p in partitions]
    consumer.assign(tps)
    ends = consumer.end_offsets(tps)
    records = []
    deadline = time.monotonic() + timeout_s
    try:
        while any(consumer.position(tp) < ends[tp] for tp in ends):
            assert time.monotonic() < deadline, f"consumer stuck below {ends}"
            records.extend(consumer.poll(500))
    finally:
        consumer.close()
    return records


def checksums(pairs):
    """``{partition: (count, sum of crc32(value))}`` of ``(partition, value)`` pairs."""
    out = {}
    for partition, value in pairs:
        count, total = out.get(partition, (0, 0))
        out[partition] = (count + 1, total + zlib.crc32(value))
    return out


class PartitionDigest:
    """Per-partition digest of ``(offset, value)`` records, computed incrementally.

    ``count``, ``lo``/``hi`` (min and max offset), ``crc`` (sum of crc32(value)) and
    ``bound`` (sum of crc32 of ``b"<offset>:" + value``), which changes when a value
    moves to another offset.  :func:`spark_digests` computes the same in Spark.
    """
    __slots__ = ("count", "crc", "bound", "lo", "hi")

    def __init__(self):
        self.count = self.crc = self.bound = 0
        self.lo = self.hi = None

    def add(self, offset, value):
        self.count += 1
        self.crc += zlib.crc32(value)
        self.bound += zlib.crc32(value, zlib.crc32(b"%d:" % offset))
        self.lo = offset if self.lo is None else min(self.lo, offset)
        self.hi = offset if self.hi is None else max(self.hi, offset)

    def as_tuple(self):
        return self.count, self.crc, self.bound, self.lo, self.hi


def spark_digests(df):
    """``{partition: (count, crc, bound, lo, hi)}`` of a source DataFrame, as
    :class:`PartitionDigest` computes them; aggregated in Spark, only one row per
    partition reaches the driver."""
    from pyspark.sql import functions as F

    offset_prefix = F.concat(F.col("offset").cast("string"), F.lit(":")).cast("binary")
    rows = (df.groupBy("partition")
            .agg(F.count("*").alias("n"), F.sum(F.crc32("value")).alias("crc"),
                 F.sum(F.crc32(F.concat(offset_prefix, F.col("value")))).alias("bound"),
                 F.min("offset").alias("lo"), F.max("offset").alias("hi"))
            .collect())
    return {r.partition: (r.n, r.crc, r.bound, r.lo, r.hi) for r in rows}


def write(df, cluster, **options):
    """``df.write.format("kafka_ha")`` in append mode to ``cluster`` (anything with
    ``bootstrap_servers``)."""
    w = df.write.format("kafka_ha").mode("append").option("bootstrap.servers",
                                                          cluster.bootstrap_servers)
    for key, value in options.items():
        w = w.option(key, value)
    w.save()


def reader(spark, cluster_or_servers, **options):
    servers = getattr(cluster_or_servers, "bootstrap_servers", cluster_or_servers)
    r = spark.read.format("kafka_ha").option("bootstrap.servers", servers)
    for key, value in options.items():
        r = r.option(key, value)
    return r


def start_stream(spark, cluster, checkpoint, out, topic="stream", **options):
    """Start an availableNow query from ``topic`` into parquet files at ``out``."""
    r = (spark.readStream.format("kafka_ha").option("bootstrap.servers", cluster.bootstrap_servers)
         .option("subscribe", topic))
    for key, value in options.items():
        r = r.option(key, value)
    return (r.load().writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())


def batch_rows(query):
    """The input row counts of the query's batches that had data."""
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def run_stream(spark, cluster, checkpoint, out, topic="stream", **options):
    """Run one availableNow query (:func:`start_stream`) to its successful end; its
    :func:`batch_rows`."""
    query = start_stream(spark, cluster, checkpoint, out, topic, **options)
    query.awaitTermination(120)
    assert not query.isActive, "availableNow query did not finish"
    assert query.exception() is None, query.exception()
    return batch_rows(query)
