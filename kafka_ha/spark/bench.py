"""Spark source/sink throughput against our own client, measured in the same run.

    python -m kafka_ha.spark.bench [--records 1000000] [--size 100] [--partitions 4]
                                   [--master local[2]] [--bootstrap H:P,... --zookeeper Z]
                                   [--stream-rate 2000] [--stream-seconds 20]

Without ``--bootstrap`` it starts its own 3-node ZooKeeper ensemble and 3
brokers on 127.0.0.1 (as ``kafka-data-bench.sh`` does).  Then, on RF=3 topics:

1. **Producer** (baseline for the sink): one process sends ``--records`` records
   of ``--size`` bytes with acks=all; this is also the data the reads use;
2. **Consumer** (baseline for the source): one process reads them all back;
3. **Spark batch read**: ``spark.read.format("kafka_ha")`` over the same topic,
   forcing every row through the JVM (count and sum of value lengths);
4. **Spark batch write**: ``spark.range(N)`` rendered to values of the same size,
   written with ``df.write.format("kafka_ha")`` (acks=all);
5. **Streaming latency** (:mod:`kafka_ha.spark.bench_latency`): a producer sends
   ``--stream-rate`` records/s for ``--stream-seconds`` to a fresh topic while a
   ``readStream`` query with the default trigger collects each micro-batch to the
   driver; per micro-batch, the wait of its oldest and newest record from ``send``
   to the result on the driver; p50 and p99 over the batches.

Spark's start-up, the first data-source query (which spawns its Python
workers) and the JVM's warm-up are excluded: one untimed full read runs first.
Each measurement is repeated (``--repeat``, interleaved so that a noisy
moment on a shared machine hits both sides); the table shows medians and
ranges.  Results go to ``--json`` (default bench-results/spark.json) and, as Markdown,
to stdout.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from kafka_ha.bench_results import Run, Table, add_output_options, print_summary, ratio
from kafka_ha.client import Consumer, Producer

from .bench_latency import percentile, stream_latency

ROOT = Path(__file__).resolve().parents[2]


def create_topic(zookeeper: str, topic: str, partitions: int, rf: int) -> None:
    from kafka_ha.tools.data_bench import tool
    tool("kafka-topics.sh", "--zookeeper", zookeeper, "--create", "--topic", topic,
         "--partitions", str(partitions), "--replication-factor", str(rf))


def wait_for_leaders(bootstrap: str, topics: list[str], timeout_s: float = 60) -> None:
    from kafka_ha.client import ClusterMetadata
    deadline = time.monotonic() + timeout_s
    with ClusterMetadata(bootstrap) as meta:
        while True:
            snap = meta.refresh(None)
            if all(snap.partitions_for(t) and len(snap.available_partitions_for(t))
                   == len(snap.partitions_for(t)) for t in topics):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"topics {topics} have no leaders after {timeout_s} s")
            time.sleep(0.2)


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    """Records/s of one Producer (acks=all) sending ``records`` values of ``size`` bytes."""
    producer = Producer(bootstrap, acks="all", linger_ms=5, batch_size=65536)
    pad = b"x" * max(0, size - 10)
    started = time.monotonic()
    for i in range(records):
        producer.send(topic, value=b"%010d" % i + pad)
    producer.flush()
    elapsed = time.monotonic() - started
    producer.close()
    return records / elapsed


def consume(bootstrap: str, topic: str, partitions: int) -> tuple[int, float]:
    """(records, records/s) of one Consumer reading the whole topic to its end offsets."""
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=4 << 20)
    tps = [(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    ends = consumer.end_offsets(tps)
    count, started = 0, time.monotonic()
    while any(consumer.position(tp) < ends[tp] for tp in ends):
        count += len(consumer.poll(1000))
    elapsed = time.monotonic() - started
    consumer.close()
    return count, count / elapsed


def end_total(bootstrap: str, topic: str, partitions: int) -> int:
    with Consumer(bootstrap) as consumer:
        return sum(consumer.end_offsets([(topic, p) for p in range(partitions)]).values())


def spark_session(master: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from kafka_ha.spark import register
    spark = (SparkSession.builder.master(master).appName("kafka-ha-spark-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def spark_read(spark, bootstrap: str, topic: str) -> tuple[int, float]:
    from pyspark.sql import functions as F
    df = spark.read.format("kafka_ha").option("bootstrap.servers", bootstrap) \
        .option("subscribe", topic).load()
    started = time.monotonic()
    row = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()[0]
    elapsed = time.monotonic() - started
    return row.n, row.n / elapsed


def spark_write(spark, bootstrap: str, topic: str, records: int, size: int,
                partitions: int) -> float:
    from pyspark.sql import functions as F
    df = spark.range(records, numPartitions=partitions).select(
        F.rpad(F.lpad(F.col("id").cast("string"), 10, "0"), size, "x").alias("value"))
    started = time.monotonic()
    df.write.format("kafka_ha").mode("append").option("bootstrap.servers", bootstrap) \
        .option("topic", topic).save()
    return records / (time.monotonic() - started)


PATHS = (("consumer", "our Consumer, one process", "consumer"),
         ("spark_read", "Spark batch read (`kafka_ha`)", "consumer"),
         ("producer", "our Producer, one process, acks=all", "producer"),
         ("spark_write", "Spark batch write (`kafka_ha`), acks=all", "producer"))


def method(args: argparse.Namespace, spark_version: str) -> str:
    latency = ("" if not args.stream_seconds else
               f" Streaming latency: a producer thread sends {args.stream_rate} records/s "
               f"(acks=all, linger 1 ms, the send time in each value) for {args.stream_seconds} "
               f"s to a fresh topic read by a readStream query with the default trigger; "
               f"foreachBatch collects each micro-batch's oldest and newest send time to the "
               f"driver, and a batch's latency is when that collect returns minus its oldest "
               f"(newest) send time.")
    where = ("an existing cluster" if args.bootstrap else
             "its own 3-node ZooKeeper ensemble and 3 brokers on 127.0.0.1")
    return (f"On {where}, topics of {args.partitions} partitions, RF 3, {args.records} records of "
            f"{args.size} B; Spark {spark_version} {args.master} on the same machine. Baselines in "
            f"the same run: our Consumer (one process) reading the same topic for the Spark read, "
            f"our Producer (one process, acks=all, linger 5 ms) writing as many records for the "
            f"Spark write. Spark's start-up, its first query (Python worker spawn) and one full "
            f"untimed read (JVM warm-up) are excluded; each measurement runs {args.repeat} times, "
            f"interleaved, and the table shows medians and ranges. MB/s count value bytes "
            f"only.{latency}")


def tables(rates: dict[str, list[float]], repeat: int, size: int,
           latency: dict | None = None) -> list[Table]:
    out = [Table(f"Records per second, median of {repeat} runs",
                 [("path", "", 0), ("records/s", "", 0), ("MB/s", "", 1), ("low", "", 0),
                  ("high", "", 0), ("vs our client", "x", 2)],
                 [[name, median(rates[key]), median(rates[key]) * size / 1e6, min(rates[key]),
                   max(rates[key]), median(rates[key]) / median(rates[base])]
                  for key, name, base in PATHS])]
    if latency:
        batches = latency["batches"]
        rows = [[f"{which} record of the batch",
                 percentile([b[key] for b in batches], 50),
                 percentile([b[key] for b in batches], 99), max(b[key] for b in batches)]
                for which, key in (("oldest", "oldest_ms"), ("newest", "newest_ms"))]
        out.append(Table(
            f"Streaming end-to-end latency per micro-batch ({len(batches)} batches, "
            f"{latency['sent']} records at {latency['rate']} records/s, median "
            f"{percentile([b['rows'] for b in batches], 50):.0f} rows per batch)",
            [("send to result on the driver", "", 0), ("p50", "ms", 0), ("p99", "ms", 0),
             ("max", "ms", 0)], rows))
    return out


def ratios(rates: dict[str, list[float]], size: int) -> list[dict]:
    return [ratio("Spark batch read", median(rates["spark_read"]) * size / 1e6,
                  "our Consumer, one process", median(rates["consumer"]) * size / 1e6, "MB/s",
                  goal="at least 0.8x"),
            ratio("Spark batch write, acks=all", median(rates["spark_write"]),
                  "our Producer, one process, acks=all", median(rates["producer"]), "records/s")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafka_ha.spark.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap", help="an existing cluster's bootstrap servers")
    parser.add_argument("--zookeeper", help="its zookeeper.connect (to create the topics)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement")
    parser.add_argument("--stream-rate", type=int, default=2000,
                        help="records/s sent during the streaming latency measurement")
    parser.add_argument("--stream-seconds", type=float, default=20,
                        help="how long it sends (0: no latency measurement)")
    add_output_options(parser, "spark")
    args = parser.parse_args(argv)
    run = Run("spark", "Spark source and sink", parser.prog, argv)
    if bool(args.bootstrap) != bool(args.zookeeper):
        parser.error("--bootstrap and --zookeeper go together")

    cluster, work = None, None
    if args.bootstrap:
        bootstrap, zookeeper = args.bootstrap, args.zookeeper
    else:
        from kafka_ha.tools.controller_bench import free_ports
        from kafka_ha.tools.local_cluster import LocalCluster
        work = Path(tempfile.mkdtemp(prefix="kafka-ha-spark-bench-"))
        cluster = LocalCluster(work, brokers=3, zk_port=free_ports(1)[0] // 10 * 10,
                               broker_ports=free_ports(3), zk_session_timeout_ms=6000)
        print("starting a local cluster ...", file=sys.stderr)
        cluster.start()
        bootstrap, zookeeper = cluster.bootstrap_servers, cluster.connect_string
    suffix = f"{int(time.time())}"
    src, out_spark, out_client, lat = (f"sbench-src-{suffix}", f"sbench-spark-{suffix}",
                                       f"sbench-client-{suffix}", f"sbench-latency-{suffix}")
    spark = None
    try:
        for topic in (src, out_spark, out_client, lat):
            create_topic(zookeeper, topic, args.partitions, 3)
        wait_for_leaders(bootstrap, [src, out_spark, out_client, lat])
        n = args.records
        print(f"producer: {n} x {args.size} B, acks=all ...", file=sys.stderr)
        producer_rates = [produce(bootstrap, src, n, args.size)]
        print(f"spark session ({args.master}) and warm-up ...", file=sys.stderr)
        spark = spark_session(args.master)
        assert spark_read(spark, bootstrap, src)[0] == n
        consumer_rates, read_rates, write_rates = [], [], []
        for i in range(args.repeat):
            print(f"round {i + 1}/{args.repeat}: consumer, spark read, spark write, producer ...",
                  file=sys.stderr)
            consumed, rate = consume(bootstrap, src, args.partitions)
            consumer_rates.append(rate)
            read, rate = spark_read(spark, bootstrap, src)
            read_rates.append(rate)
            assert consumed == read == n, (consumed, read, n)
            write_rates.append(spark_write(spark, bootstrap, out_spark, n, args.size,
                                           args.partitions))
            if i:   # the first producer run made the source data
                producer_rates.append(produce(bootstrap, out_client, n, args.size))
        written = end_total(bootstrap, out_spark, args.partitions)
        assert written == n * args.repeat, (written, n)
        latency = None
        if args.stream_seconds:
            print(f"streaming latency: {args.stream_rate} records/s for {args.stream_seconds} s "
                  f"...", file=sys.stderr)
            latency = stream_latency(spark, bootstrap, lat, args.stream_rate,
                                     args.stream_seconds, args.size)
        results = {"records": n, "size": args.size, "partitions": args.partitions,
                   "master": args.master, "spark_version": spark.version, "repeat": args.repeat,
                   "records_per_s": {"consumer": consumer_rates, "spark_read": read_rates,
                                     "producer": producer_rates, "spark_write": write_rates},
                   "stream_latency": latency}
        data = run.write(args.json, method=method(args, spark.version), results=results,
                         ratios=ratios(results["records_per_s"], args.size),
                         tables=tables(results["records_per_s"], args.repeat, args.size,
                                       latency), note=args.note)
        print_summary(data, args.json)
    finally:
        if spark is not None:
            spark.stop()
        if cluster is not None:
            cluster.stop()
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
