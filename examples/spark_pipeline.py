"""Events -> Structured Streaming aggregation -> results topic, on a local kafka-ha cluster.

    bin/kafka-ha-cluster.sh start --dir /tmp/kh       # prints bootstrap.servers and zookeeper.connect
    .venv/bin/pip install -e '.[spark]'               # pyspark>=4.2 and pyarrow
    .venv/bin/python examples/spark_pipeline.py --bootstrap-servers 127.0.0.1:9092,127.0.0.1:9093 \\
        [--zookeeper 127.0.0.1:2181] [--events 2000] [--rounds 2] [--run-id ID]

1. a producer (our own client) writes JSON events ``{"user", "action", "amount"}``
   keyed by user to topic ``events-<run id>``;
2. a Structured Streaming query reads them with ``readStream.format("kafka_ha")``,
   counts events and sums amounts per action, and writes the aggregates (complete mode: all of them after each micro-batch) as
   JSON, keyed by action, to topic ``totals-<run id>`` with ``writeStream.format("kafka_ha")``
   (``trigger(availableNow=True)``, so it processes what is there and stops);
3. a batch read of the totals topic takes the latest value per key and checks it
   against totals computed locally.

Each round produces more events and runs the query again from its checkpoint,
so the totals grow incrementally.  With ``--zookeeper`` the topics are created
with 3 partitions (RF 3), otherwise the brokers auto-create them.

``--pipeline enrich --parquet DIR`` runs a record-by-record pipeline instead: one
round of events, each turned into an enriched JSON record (its source partition
and offset, the user, the action in capitals, the amount in cents) and written
by two availableNow queries, to topic ``enriched-<run id>`` with the ``kafka_ha``
sink and to Parquet files under DIR.  It prints a ``progress`` line per
micro-batch and checks that each query read every event.

``--master spark://host:7077`` runs on a Spark standalone cluster instead of
``local[2]``; ``--conf key=value`` adds Spark settings.  The executors start
``PYSPARK_PYTHON`` (default: this interpreter) and must import kafka_ha: install
it on the workers, or start them with this checkout on ``PYTHONPATH``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Spark's Python workers import kafka_ha too: make sure they find it.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                           if p)

from kafka_ha.client import Producer  # noqa: E402

ACTIONS = ("view", "click", "cart", "buy")


def create_topics(zookeeper: str, topics: list[str]) -> None:
    for topic in topics:
        done = subprocess.run([str(ROOT / "bin" / "kafka-topics.sh"), "--zookeeper", zookeeper,
                               "--create", "--topic", topic, "--partitions", "3",
                               "--replication-factor", "3"], capture_output=True, text=True,
                              env=dict(os.environ, KAFKA_HA_PYTHON=sys.executable))
        if done.returncode != 0 and "already exists" not in done.stdout + done.stderr:
            raise SystemExit(f"creating {topic} failed: {done.stdout}{done.stderr}")


def produce_events(bootstrap: str, topic: str, count: int, rng: random.Random,
                   totals: dict) -> None:
    producer = Producer(bootstrap, acks="all", linger_ms=5, batch_size=65536)
    for _ in range(count):
        user = f"user-{rng.randrange(50)}"
        action = rng.choice(ACTIONS)
        amount = rng.randrange(1, 100)
        producer.send(topic, key=user.encode(),
                      value=json.dumps({"user": user, "action": action,
                                        "amount": amount}).encode())
        n, s = totals.get(action, (0, 0))
        totals[action] = (n + 1, s + amount)
    producer.flush()
    producer.close()


def run_aggregation(spark, bootstrap: str, source: str, sink: str, checkpoint: str) -> list[int]:
    """One availableNow run of the streaming job; returns the rows of each micro-batch."""
    from pyspark.sql import functions as F
    events = (spark.readStream.format("kafka_ha").option("bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", 1000).load())
    parsed = events.select(F.from_json(F.col("value").cast("string"),
                                       "user string, action string, amount int").alias("e"))
    totals = parsed.groupBy("e.action").agg(F.count("*").alias("events"),
                                            F.sum("e.amount").alias("amount"))
    out = totals.select(F.col("action").alias("key"),
                        F.to_json(F.struct("action", "events", "amount")).alias("value"))
    query = (out.writeStream.format("kafka_ha").outputMode("complete")
             .option("bootstrap.servers", bootstrap).option("topic", sink)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"streaming query failed: {query.exception()}")
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def enrich(events):
    """Each event as ``(key, value)``: the user, and JSON of its source partition and offset,
    user, action in capitals and amount in cents (field order as written here)."""
    from pyspark.sql import functions as F
    e = F.from_json(F.col("value").cast("string"), "user string, action string, amount int")
    parsed = events.select("partition", "offset", e.alias("e"))
    return parsed.select(
        F.col("e.user").alias("key"),
        F.to_json(F.struct("partition", "offset", F.col("e.user").alias("user"),
                           F.upper("e.action").alias("action"),
                           (F.col("e.amount") * 100).alias("cents"))).alias("value"))


def run_enrichment(spark, bootstrap: str, source: str, sink: str, parquet: str,
                   checkpoint: str, max_offsets: int) -> dict[str, int]:
    """Two availableNow queries over ``enrich``: to topic ``sink`` and to Parquet at
    ``parquet``.  Prints ``progress <query> batch <id> rows <n>`` per micro-batch; returns
    the rows each query read."""
    events = (spark.readStream.format("kafka_ha").option("bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", max_offsets).load())
    enriched = enrich(events)
    queries = {"topic": (enriched.writeStream.format("kafka_ha").queryName("to_topic")
                         .option("bootstrap.servers", bootstrap).option("topic", sink)
                         .option("checkpointLocation", os.path.join(checkpoint, "topic"))
                         .trigger(availableNow=True).start())}
    # Each query's start spawns a Python process on the driver for the source, which must
    # connect back to the JVM within Spark's fixed 10 s: on a busy machine, do not start
    # the second one while the first one and the executors' Python workers are starting.
    while not queries["topic"].recentProgress and queries["topic"].isActive:
        time.sleep(0.1)
    queries["parquet"] = (enriched.writeStream.format("parquet").queryName("to_parquet")
                          .option("path", parquet)
                          .option("checkpointLocation", os.path.join(checkpoint, "parquet"))
                          .trigger(availableNow=True).start())
    printed = {name: -1 for name in queries}
    rows = {name: 0 for name in queries}

    def report() -> None:
        for name, query in queries.items():
            for p in query.recentProgress:
                if p["batchId"] > printed[name]:
                    printed[name] = p["batchId"]
                    rows[name] += p["numInputRows"]
                    print(f"progress {name} batch {p['batchId']} rows {p['numInputRows']}",
                          flush=True)

    while any(q.isActive for q in queries.values()):
        report()
        time.sleep(0.1)
    report()
    for name, query in queries.items():
        if query.exception() is not None:
            raise SystemExit(f"streaming query {name} failed: {query.exception()}")
    return rows


def read_totals(spark, bootstrap: str, topic: str) -> dict:
    """The latest aggregate per action from the results topic (a batch read)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    df = (spark.read.format("kafka_ha").option("bootstrap.servers", bootstrap)
          .option("subscribe", topic).load())
    latest = (df.withColumn("rank", F.row_number().over(
        Window.partitionBy("key").orderBy(F.col("offset").desc()))).where("rank = 1"))
    result = {}
    for row in latest.select(F.col("value").cast("string").alias("json")).collect():
        value = json.loads(row.json)
        result[value["action"]] = (value["events"], value["amount"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--zookeeper", help="create the topics with 3 partitions through it")
    parser.add_argument("--events", type=int, default=2000, help="events per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--run-id", default=str(int(time.time())),
                        help="suffix of this run's topics (default: the time)")
    parser.add_argument("--pipeline", choices=("totals", "enrich"), default="totals",
                        help="totals: the streaming aggregation (default); enrich: record by "
                             "record to topic enriched-<run id> and to --parquet")
    parser.add_argument("--parquet", help="enrich: directory of the Parquet output")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=1000)
    parser.add_argument("--master", default="local[2]",
                        help="Spark master URL, e.g. spark://host:7077 (default local[2])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting (repeatable)")
    args = parser.parse_args()
    if args.pipeline == "enrich" and not args.parquet:
        parser.error("--pipeline enrich needs --parquet DIR")
    bootstrap = args.bootstrap_servers
    source = f"events-{args.run_id}"
    sink = f"{'enriched' if args.pipeline == 'enrich' else 'totals'}-{args.run_id}"
    if args.zookeeper:
        create_topics(args.zookeeper, [source, sink])

    from pyspark.sql import SparkSession

    from kafka_ha.spark import register
    builder = (SparkSession.builder.master(args.master).appName("kafka-ha-pipeline")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for setting in args.conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)

    checkpoint = tempfile.mkdtemp(prefix="kafka-ha-pipeline-")
    rng = random.Random(42)
    expected: dict = {}
    ok = True
    if args.pipeline == "enrich":
        try:
            started = time.monotonic()
            produce_events(bootstrap, source, args.events, rng, expected)
            print(f"produced {args.events} events to {source} "
                  f"({time.monotonic() - started:.1f} s)", flush=True)
            started = time.monotonic()
            rows = run_enrichment(spark, bootstrap, source, sink, args.parquet, checkpoint,
                                  args.max_offsets_per_trigger)
            print(f"enriched {rows} events from {source} to {sink} and {args.parquet} "
                  f"({time.monotonic() - started:.1f} s)", flush=True)
            ok = all(n == args.events for n in rows.values())
        finally:
            spark.stop()
            shutil.rmtree(checkpoint, ignore_errors=True)
        print("every event was enriched" if ok else "events were NOT all read", flush=True)
        return 0 if ok else 1
    try:
        for round_no in range(1, args.rounds + 1):
            produce_events(bootstrap, source, args.events, rng, expected)
            started = time.monotonic()
            batches = run_aggregation(spark, bootstrap, source, sink, checkpoint)
            got = read_totals(spark, bootstrap, sink)
            print(f"round {round_no}: {args.events} new events on {source}, read in micro-batches "
                  f"of {batches} rows, totals on {sink} "
                  f"({time.monotonic() - started:.1f} s)")
            print(f"  {'action':8} {'events':>8} {'amount':>10}")
            for action in sorted(got):
                print(f"  {action:8} {got[action][0]:>8} {got[action][1]:>10}")
            if got != expected:
                print(f"  MISMATCH: expected {expected}")
                ok = False
    finally:
        spark.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    print("totals match the events produced" if ok else "totals do NOT match")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
