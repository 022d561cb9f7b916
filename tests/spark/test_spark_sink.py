"""The kafka_ha Spark sink: batch and streaming writes, consumed back with our own client."""
import pytest

pytest.importorskip("pyarrow", reason="the Spark tests need pyarrow (pip install -e '.[spark]')")
pytest.importorskip("pyspark", minversion="4.2",
                    reason="the Spark tests need pyspark>=4.2 (pip install -e '.[spark]')")

import pyarrow as pa
from tests.harness.kafka import create_topic
from tests.spark.helpers import consume, produce, write

pytestmark = pytest.mark.system


def test_batch_write_string_and_binary_columns_round_trip(spark, cluster_factory):
    cluster = cluster_factory(3)
    create_topic(cluster, "strings", 2, 3)
    create_topic(cluster, "blobs", 3, 3)

    rows = [(f"k{i % 7}", f"välue-{i}") for i in range(500)]
    write(spark.createDataFrame(rows, "key string, value string").repartition(2), cluster,
          topic="strings")
    got = consume(cluster, "strings", [0, 1])
    assert sorted((r.key, r.value) for r in got) == sorted(
        (k.encode(), v.encode()) for k, v in rows)
    # same key, same partition (the producer's partitioner)
    assert len({(r.key, r.partition) for r in got}) == len({r.key for r in got})

    blobs = [("blobs", None if i % 5 == 0 else bytes([i % 256, 0, 255]), bytes(range(i % 256)),
              i % 3, [("h", b"\x00%d" % i)]) for i in range(300)]
    write(spark.createDataFrame(
        blobs, "topic string, key binary, value binary, partition int, "
               "headers array<struct<key:string,value:binary>>"), cluster)
    got = consume(cluster, "blobs", [0, 1, 2])
    assert sorted((r.partition, r.key or b"", r.value, r.headers) for r in got) == sorted(
        (p, k or b"", v, (("h", h[0][1]),)) for _, k, v, p, h in blobs)

    # read back through the source, headers included
    back = (spark.read.format("kafka_ha").option("bootstrap.servers", cluster.bootstrap_servers)
            .option("subscribe", "blobs").option("includeHeaders", "true").load().collect())
    assert sorted((r.partition, r.value, [tuple(h) for h in r.headers]) for r in back) == sorted(
        (p, v, [("h", h[0][1])]) for _, k, v, p, h in blobs)

    # the topic option overrides the column
    write(spark.createDataFrame([("blobs", "x")], "topic string, value string"), cluster,
          topic="strings")
    assert len(consume(cluster, "strings", [0, 1])) == 501


def test_writer_task_reports_counts_and_fails_on_unwritable_records(cluster_factory):
    from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

    from kafka_ha.spark.sink import KafkaHaWriter

    cluster = cluster_factory(3)
    create_topic(cluster, "counted", 2, 3)
    schema = StructType([StructField("value", BinaryType()),
                         StructField("partition", IntegerType())])
    writer = KafkaHaWriter({"bootstrap.servers": cluster.bootstrap_servers, "topic": "counted"},
                           schema, overwrite=False)
    batch = pa.RecordBatch.from_pydict({"value": [b"a", b"b", b"c"], "partition": [0, 1, 1]})
    message = writer.write(iter([batch, batch]))
    assert (message.records, message.bytes) == (6, 6)
    assert message.by_partition == {("counted", 0): 2, ("counted", 1): 4}

    bad = pa.RecordBatch.from_pydict({"value": [b"a"], "partition": [9]})
    with pytest.raises(Exception, match="not acknowledged.*no partition 9"):
        writer.write(iter([bad]))
    with pytest.raises(ValueError, match="only appends"):
        KafkaHaWriter({"bootstrap.servers": cluster.bootstrap_servers, "topic": "counted"},
                      schema, overwrite=True)


def test_sink_rejects_bad_columns(spark):
    with pytest.raises(Exception, match="needs a 'value' column"):
        write(spark.createDataFrame([("a",)], "v string"), _Servers(), topic="t")
    with pytest.raises(Exception, match="'topic' column or the 'topic' option"):
        write(spark.createDataFrame([("a",)], "value string"), _Servers())
    with pytest.raises(Exception, match="column 'key' must be string or binary"):
        write(spark.createDataFrame([(1, "a")], "key int, value string"), _Servers(), topic="t")


class _Servers:
    bootstrap_servers = "127.0.0.1:1"


def test_write_stream_round_trip(spark, cluster_factory, tmp_path):
    from pyspark.sql import functions as F

    cluster = cluster_factory(3)
    create_topic(cluster, "raw", 2, 3)
    create_topic(cluster, "upper", 2, 3)
    sent = produce(cluster, "raw", 200)
    stream = (spark.readStream.format("kafka_ha")
              .option("bootstrap.servers", cluster.bootstrap_servers)
              .option("subscribe", "raw").option("startingOffsets", "earliest").load()
              .select("key", F.upper(F.col("value").cast("string")).alias("value")))
    query = (stream.writeStream.format("kafka_ha")
             .option("bootstrap.servers", cluster.bootstrap_servers).option("topic", "upper")
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True)
             .start())
    query.awaitTermination(120)
    assert query.exception() is None
    got = consume(cluster, "upper", [0, 1])
    assert sorted(r.value for r in got) == sorted(v.upper() for v in sent.values())
