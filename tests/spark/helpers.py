"""Producing and consuming helpers for the Spark tests (our own client, no Spark)."""
import time
import zlib

from kafka_ha.client import Consumer, Producer


def produce(cluster, topic, count, start=0, partition=None, prefix=b"v"):
    """Send ``count`` keyed records with acks=all; return ``{(partition, offset): value}``."""
    producer = Producer(cluster.bootstrap_servers, acks="all", linger_ms=2)
    futures = []
    for i in range(start, start + count):
        value = prefix + b"%d" % i
        futures.append((value, producer.send(topic, value=value, key=b"k%d" % (i % 17),
                                             partition=partition)))
    producer.flush()
    producer.close()
    out = {}
    for value, future in futures:
        meta = future.get()
        out[(meta.partition, meta.offset)] = value
    return out


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


def reader(spark, cluster_or_servers, **options):
    servers = getattr(cluster_or_servers, "bootstrap_servers", cluster_or_servers)
    r = spark.read.format("kafka_ha").option("bootstrap.servers", servers)
    for key, value in options.items():
        r = r.option(key, value)
    return r
