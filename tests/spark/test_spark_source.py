"""The kafka_ha Spark source against real brokers: batch reads and availableNow streams."""
import pytest

pytest.importorskip("pyarrow", reason="the Spark tests need pyarrow (pip install -e '.[spark]')")
pytest.importorskip("pyspark", minversion="4.2",
                    reason="the Spark tests need pyspark>=4.2 (pip install -e '.[spark]')")

import json
import zlib

from kafka_ha.client import ClusterMetadata
from kafka_ha.model import TopicPartition
from tests.harness.kafka import create_topic, topics_cli
from tests.spark.helpers import checksums, produce, reader, run_stream

pytestmark = pytest.mark.system


def test_batch_read_returns_exactly_the_committed_records(spark, cluster_factory):
    from pyspark.sql import functions as F

    cluster = cluster_factory(3)
    create_topic(cluster, "events", 3, 3)
    sent = produce(cluster, "events", 3000)
    df = reader(spark, cluster, subscribe="events").load()

    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType"]
    assert df.rdd.getNumPartitions() == 3                      # one per topic partition
    assert df.count() == 3000
    stats = (df.groupBy("partition")
             .agg(F.count("*").alias("n"), F.sum(F.crc32("value")).alias("crc"),
                  F.min("offset").alias("lo"), F.max("offset").alias("hi"))
             .collect())
    expected = checksums((p, v) for (p, _), v in sent.items())
    assert {r.partition: (r.n, r.crc) for r in stats} == expected
    assert all(r.lo == 0 and r.hi == r.n - 1 for r in stats)
    rows = df.select("key", "value", "topic", "partition", "offset", "timestampType").collect()
    assert {(r.partition, r.offset): r.value for r in rows} == sent
    assert {r.topic for r in rows} == {"events"} and {r.timestampType for r in rows} == {0}
    assert all(isinstance(r.key, bytes) and r.key.startswith(b"k") for r in rows)

    # minPartitions splits ranges; offsets JSON bounds them; assign picks partitions
    assert reader(spark, cluster, subscribe="events", minPartitions=7).load() \
        .rdd.getNumPartitions() == 7
    assert reader(spark, cluster, subscribe="events", minPartitions=7).load().count() == 3000
    counts = {p: n for p, (n, _) in expected.items()}
    bounded = reader(spark, cluster, assign=json.dumps({"events": [0, 2]}),
                     startingOffsets=json.dumps({"events": {"0": 5, "2": -2}}),
                     endingOffsets=json.dumps({"events": {"0": 25, "2": -1}})).load()
    got = bounded.groupBy("partition").count().collect()
    assert {r.partition: r["count"] for r in got} == {0: 20, 2: counts[2]}
    # a pattern subscription sees the topic too; zookeeper.connect finds the brokers
    assert reader(spark, cluster, subscribePattern="ev.*").load().count() == 3000
    assert (spark.read.format("kafka_ha").option("zookeeper.connect", cluster.connect_string)
            .option("subscribe", "events").load().count()) == 3000


def test_available_now_stream_restarts_from_checkpoint_exactly_once(spark, cluster_factory,
                                                                    tmp_path):
    cluster = cluster_factory(3)
    create_topic(cluster, "stream", 2, 3)
    sent = produce(cluster, "stream", 250)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"

    opts = dict(startingOffsets="earliest", maxOffsetsPerTrigger=100)
    assert run_stream(spark, cluster, checkpoint, out, **opts) == [100, 100, 50]

    sent.update(produce(cluster, "stream", 120, start=250))
    rc, stdout, stderr = topics_cli(cluster, "--alter", "--topic", "stream", "--partitions", "3")
    assert rc == 0, (stdout, stderr)
    cluster.wait_until(lambda: _has_leader(cluster, "stream", 2),
                       message="no leader for [stream,2]")
    sent.update(produce(cluster, "stream", 30, start=370, partition=2))

    # only the new records: 120 on the old partitions, 30 on the new one (read from earliest)
    assert run_stream(spark, cluster, checkpoint, out, **opts) == [100, 50]
    # nothing new: the restarted query runs no batch with data
    assert run_stream(spark, cluster, checkpoint, out, **opts) == []

    rows = spark.read.parquet(str(out)).select("partition", "offset", "value").collect()
    got = [((r.partition, r.offset), r.value) for r in rows]
    assert len(got) == len(set(k for k, _ in got)) == 400        # no duplicates
    assert dict(got) == sent                                    # and nothing missing


def _has_leader(cluster, topic, partition):
    with ClusterMetadata(cluster.bootstrap_servers) as meta:
        return meta.refresh(None).leader_for(TopicPartition(topic, partition)) is not None


def test_stream_starts_at_latest_by_default(spark, cluster_factory, tmp_path):
    cluster = cluster_factory(3)
    create_topic(cluster, "stream", 1, 3)
    produce(cluster, "stream", 40)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    assert run_stream(spark, cluster, checkpoint, out) == []   # the 40 old records are skipped
    sent = produce(cluster, "stream", 15, start=40)
    assert run_stream(spark, cluster, checkpoint, out) == [15]
    values = sorted(row.value for row in spark.read.parquet(str(out)).collect())
    assert values == sorted(sent.values())
    assert sum(zlib.crc32(v) for v in values) == sum(zlib.crc32(v) for v in sent.values())


def test_reads_follow_leader_changes(spark, cluster_factory):
    import signal

    from kafka_ha.spark.kafka_io import ClientSettings, read_range
    from tests.harness.kafka import read_states

    cluster = cluster_factory(3, session_timeout_ms=4000)
    create_topic(cluster, "moving", 3, 3)
    sent = produce(cluster, "moving", 1500)
    first = read_states(cluster, "moving")[0].leader
    cluster.kill(first)                      # SIGKILL; then acks=all writes to every partition
    for p in range(3):                       # wait for the new leaders (and their HWs)
        sent.update(produce(cluster, "moving", 50, start=1500 + 50 * p, partition=p))
    rows = reader(spark, cluster, subscribe="moving").load() \
        .select("partition", "offset", "value").collect()
    assert {(r.partition, r.offset): r.value for r in rows} == sent
    assert read_states(cluster, "moving")[0].leader != first

    # a leader moving in the middle of a task's range: the task follows it
    cluster.start_broker(first)
    cluster.wait_until(lambda: len(read_states(cluster, "moving")[0].isr) == 3, timeout=60,
                       message="restarted broker did not rejoin the ISR")
    end = max(o for p, o in sent if p == 0) + 1
    settings = ClientSettings(cluster.bootstrap_servers, max_partition_fetch_bytes=1024,
                              batch_rows=20)
    batches = read_range(settings, "moving", 0, 0, end)
    got = [next(batches)]
    cluster.restart(read_states(cluster, "moving")[0].leader, signal.SIGTERM)
    got.extend(batches)
    values = [v for b in got for v in b.column("value").to_pylist()]
    assert values == [sent[(0, o)] for o in range(end)]
