"""The example pipeline on a real Spark standalone cluster, across ``kill -9`` of a broker.

One master and two workers (one core, 1 GiB each) from the installed pyspark
(tests/harness/spark_standalone.py); ``examples/spark_pipeline.py --pipeline enrich
--master spark://...`` as the driver, in its own process, as a user runs it.  The
events' partitions are read by the executors' Python workers: Spark's event log
shows every task that read records ran on an executor.  The leader of the events
topic's partition 0 is killed once the first micro-batch is done; the enriched
topic and the Parquet output must then hold exactly one enriched record per event.

The kafka_ha sink is at-least-once (a produce retried after a leader died can
write a record twice), so the enriched topic's replicas are on the two brokers
that survive: the kill tests the source's reads, and any duplicate in the sink
topic is a failure.
"""
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyarrow", reason="the Spark tests need pyarrow (pip install -e '.[spark]')")
pytest.importorskip("pyspark", minversion="4.2",
                    reason="the Spark tests need pyspark>=4.2 (pip install -e '.[spark]')")

import pyarrow.parquet as pq

from tests.harness.kafka import create_topic, read_states
from tests.harness.load import read_partitions
from tests.harness.spark_standalone import QUICK_JVM, SparkStandalone

pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "spark_pipeline.py"
EVENTS = 20_000
PER_TRIGGER = 7_000          # 3 micro-batches per query


def test_example_pipeline_on_standalone_cluster_enriches_each_event_once_across_a_kill(
        cluster_factory, tmp_path):
    spark = SparkStandalone(tmp_path / "spark", workers=2, cores=1, memory="1g",
                            python_path=str(ROOT))
    spark.launch()                      # the JVMs start while the brokers do
    try:
        cluster = cluster_factory(3, session_timeout_ms=4000)
        source, sink = "events-sa", "enriched-sa"
        create_topic(cluster, source, 3, 3)
        victim = read_states(cluster, source)[0].leader
        a, b = [i for i in cluster.broker_ids if i != victim]
        create_topic(cluster, sink, 3, 2, "--replica-assignment", f"{a}:{b},{b}:{a},{a}:{b}")
        # The driver starts while the workers register: it waits for both executors
        # (spark.scheduler.minRegisteredResourcesRatio) before its first job.
        spark.wait_master(60)
        out, events_dir = tmp_path / "parquet", tmp_path / "events"
        events_dir.mkdir()
        lines, killed_after = _run_example(spark, cluster, out, events_dir, victim)
    except BaseException:
        print(spark.report(), file=sys.stderr)
        raise
    finally:
        spark.stop()

    # the kill came after the first batch and before the last one of the topic query
    rows_after_kill = sum(int(line.split()[-1]) for line in lines[killed_after + 1:]
                          if line.startswith("progress "))
    assert killed_after is not None and rows_after_kill > 0, lines
    assert lines[-1] == "every event was enriched", lines

    # exactly one enriched record per event, in the topic and in the Parquet output
    events = read_partitions(cluster, source, 3)
    assert len(events) == EVENTS
    expected = Counter(_enriched(r) for r in events)
    assert len(expected) == EVENTS
    assert Counter((r.key, r.value) for r in read_partitions(cluster, sink, 3)) == expected
    assert Counter(_parquet_rows(out)) == expected

    # the partitions were read by the executors' tasks, on both executors
    reads = _records_read_by_executor(events_dir)
    assert "driver" not in reads and set(reads) <= {"0", "1"}, reads
    assert len(reads) == 2, reads
    assert sum(reads.values()) == 2 * EVENTS, reads      # two queries, each read every event


def _run_example(spark, cluster, out, events_dir, victim):
    """Run the example as the driver; kill ``victim`` at its first progress line with rows.
    Returns its stdout lines and the index of the line the kill followed."""
    conf = {"spark.cores.max": "2", "spark.executor.cores": "1",
            "spark.executor.memory": "512m", "spark.driver.memory": "512m",
            # wait for both executors before the first job, so both take tasks
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": events_dir.as_uri(),
            "spark.eventLog.compress": "false",
            "spark.driver.extraJavaOptions": QUICK_JVM,
            "spark.executor.extraJavaOptions": QUICK_JVM}
    argv = [sys.executable, str(EXAMPLE), "--bootstrap-servers", cluster.bootstrap_servers,
            "--run-id", "sa", "--pipeline", "enrich", "--parquet", str(out),
            "--events", str(EVENTS), "--max-offsets-per-trigger", str(PER_TRIGGER),
            "--master", spark.master_url]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    stderr = spark.dir / "driver.err"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(argv, env=spark.env(), stdout=subprocess.PIPE, stderr=err,
                                text=True, cwd=ROOT)
    watchdog = threading.Timer(240, proc.kill)
    watchdog.start()
    lines, killed_after = [], None
    try:
        for line in proc.stdout:
            print(time.strftime("%H:%M:%S"), line, end="", file=sys.stderr)
            lines.append(line.rstrip("\n"))
            if killed_after is None and line.startswith("progress ") and int(line.split()[-1]):
                cluster.kill(victim)
                killed_after = len(lines) - 1
        rc = proc.wait()
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()
    assert rc == 0, "\n".join(lines) + "\n" + stderr.read_text(errors="replace")[-6000:]
    return lines, killed_after


def _enriched(record):
    """The example's ``enrich`` of one event record, as ``(key, value)`` bytes: Spark's
    to_json writes the struct's fields in order, without spaces."""
    event = json.loads(record.value)
    value = {"partition": record.partition, "offset": record.offset, "user": event["user"],
             "action": event["action"].upper(), "cents": event["amount"] * 100}
    return event["user"].encode(), json.dumps(value, separators=(",", ":")).encode()


def _parquet_rows(out):
    """``(key, value)`` of the Parquet sink's committed files: those in its
    ``_spark_metadata`` log (a retried task's leftover file is not in it)."""
    files = set()
    for log in sorted((out / "_spark_metadata").iterdir()):
        if log.name.startswith("."):
            continue
        for line in log.read_text().splitlines()[1:]:          # line 1: the log version
            entry = json.loads(line)
            if entry["action"] == "add":
                files.add(entry["path"])
            else:
                files.discard(entry["path"])
    rows = []
    for path in files:
        table = pq.read_table(path.removeprefix("file://"), columns=["key", "value"])
        rows += [(k.encode(), v.encode()) for k, v in zip(table.column("key").to_pylist(),
                                                          table.column("value").to_pylist())]
    return rows


def _records_read_by_executor(events_dir):
    """``{executor id: records read}`` summed over the finished tasks in Spark's event log
    (Spark 4 writes it as a directory of rolled ``events_<n>_<app id>`` files)."""
    reads = Counter()
    logs = sorted(events_dir.glob("*/events_*"), key=lambda p: int(p.name.split("_")[1]))
    assert logs, f"no event log under {events_dir}"
    for line in (line for log in logs for line in log.read_text().splitlines()):
        event = json.loads(line)
        if event["Event"] == "SparkListenerTaskEnd" and event.get("Task Metrics"):
            records = event["Task Metrics"]["Input Metrics"]["Records Read"]
            if records:
                reads[event["Task Info"]["Executor ID"]] += records
    return dict(reads)
