"""The Spark Kafka connector's options on the kafka_ha source and sink, and clear errors
(missing topics, no cluster, offsets that are gone), against real brokers.

One cluster for the module (each test asserts many options on small data): timestamps,
offsets by timestamp, maxRecordsPerPartition, kafka.* pass-through, unknown options,
groupIdPrefix, the sink's topic and kafka.* settings, minOffsetsPerTrigger with
maxTriggerDelay, the offsets-behind-latest numbers of the streaming progress, and
failOnDataLoss with Spark's text.
"""
import pytest

pytest.importorskip("pyarrow", reason="the Spark tests need pyarrow (pip install -e '.[spark]')")
pytest.importorskip("pyspark", minversion="4.2",
                    reason="the Spark tests need pyspark>=4.2 (pip install -e '.[spark]')")

import json
import time

from kafka_ha.client import Consumer, Producer
from kafka_ha.spark.kafka_io import DATA_LOSS_FAILS
from kafka_ha.spark.monitoring import offsets_behind, progress_line
from tests.harness.cluster import ClusterFixture
from tests.harness.kafka import create_topic
from tests.harness.ports import free_ports
from tests.spark.helpers import batch_rows, consume, produce, reader, write

pytestmark = pytest.mark.system

# Record i of a partition has timestamp BASE_MS + 10 * i: an hour ago, well inside the
# default retention.ms (7 days), which the module cluster enforces every 100 ms.
BASE_MS = (int(time.time()) - 3600) * 1000


@pytest.fixture(scope="module")
def cluster(zk_ensemble):
    # (retention runs every 100 ms for test_offsets_below_the_log_start's short topic)
    c = ClusterFixture(3, {"log.retention.check.interval.ms": 100}, ensemble=zk_ensemble).start()
    try:
        create_topic(c, "timed", 2, 2)
        producer = Producer(c.bootstrap_servers, acks="all", linger_ms=2)
        try:
            futures = [producer.send("timed", value=b"p%d-%d" % (p, i), partition=p,
                                     timestamp_ms=BASE_MS + 10 * i)
                       for i in range(100) for p in range(2)]
            producer.flush()
            assert all(f.get().offset >= 0 for f in futures)
        finally:
            producer.close()
        yield c
    finally:
        c.stop()


def _error(df_or_callable):
    with pytest.raises(Exception) as info:
        df_or_callable() if callable(df_or_callable) else df_or_callable.collect()
    return str(info.value)


def _offsets(df):
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_timestamps_partitioning_and_client_options(spark, cluster):
    # startingTimestamp / endingTimestamp: the first record at or after each time, per partition
    df = reader(spark, cluster, subscribe="timed", startingTimestamp=str(BASE_MS + 255),
                endingTimestamp=str(BASE_MS + 500)).load()
    assert _offsets(df) == [(p, o) for p in range(2) for o in range(26, 50)]
    # the timestamp options win over startingOffsets / endingOffsets, as in Spark
    df = reader(spark, cluster, subscribe="timed", startingTimestamp=str(BASE_MS + 990),
                startingOffsets="earliest", endingOffsets="latest").load()
    assert _offsets(df) == [(0, 99), (1, 99)]
    # per-partition timestamps; an end timestamp beyond the data ends at the latest offset
    by_time = json.dumps({"timed": {"0": BASE_MS + 950, "1": BASE_MS}})
    df = reader(spark, cluster, subscribe="timed", startingOffsetsByTimestamp=by_time,
                endingOffsetsByTimestamp=json.dumps({"timed": {"0": BASE_MS + 10 ** 9,
                                                               "1": BASE_MS + 30}})).load()
    assert _offsets(df) == [(0, o) for o in range(95, 100)] + [(1, o) for o in range(3)]
    assert "must give a timestamp for every partition of the subscription; missing: [timed,1]" \
        in _error(reader(spark, cluster, subscribe="timed", startingOffsetsByTimestamp=json.dumps(
            {"timed": {"0": BASE_MS}})).load())
    # no record that late: an error, or the latest offset with the strategy "latest"
    late = str(BASE_MS + 10 ** 9)
    assert ("no record of [timed,0] has a timestamp at or after %s (startingTimestamp)" % late
            in _error(reader(spark, cluster, subscribe="timed", startingTimestamp=late).load()))
    assert reader(spark, cluster, subscribe="timed", startingTimestamp=late,
                  startingOffsetsByTimestampStrategy="latest").load().count() == 0

    # maxRecordsPerPartition cuts ranges; with minPartitions the larger count wins
    df = reader(spark, cluster, subscribe="timed", maxRecordsPerPartition="30").load()
    assert df.rdd.getNumPartitions() == 8 and df.count() == 200
    assert reader(spark, cluster, subscribe="timed", maxRecordsPerPartition="30",
                  minPartitions="10").load().rdd.getNumPartitions() == 10

    # kafka.* settings reach the client: a bad value is its error, good ones read everything
    assert "option 'max.partition.fetch.bytes' must be >= 1024" in _error(
        reader(spark, cluster, subscribe="timed", **{"kafka.max.partition.fetch.bytes": "10"})
        .load())
    client = {"kafka.max.partition.fetch.bytes": "1024", "kafka.fetch.max.wait.ms": "50",
              "kafka.request.timeout.ms": "20000", "kafka.security.protocol": "PLAINTEXT"}
    assert reader(spark, cluster, subscribe="timed", groupIdPrefix="etl", **client) \
        .load().count() == 200
    no_bootstrap = spark.read.format("kafka_ha").option("subscribe", "timed") \
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers).option("kafka.group.id", "g")
    assert no_bootstrap.load().count() == 200
    # unknown options and client settings kafka-ha does not have are errors naming the known
    msg = _error(reader(spark, cluster, subscribe="timed", startingOffset="earliest").load)
    # (Spark hands the options over with lower-cased names)
    assert "unknown option 'startingoffset' for the kafka_ha source (known: subscribe," \
        in msg.lower()
    assert "startingOffsetsByTimestamp" in msg and "maxTriggerDelay" in msg
    assert "kafka.ssl.truststore.location' is not supported: kafka-ha's client has no such " \
        "setting" in _error(reader(spark, cluster, subscribe="timed", **{
            "kafka.ssl.truststore.location": "/x"}).load)
    assert "security.protocol 'SSL' is not supported" in _error(
        reader(spark, cluster, subscribe="timed", **{"kafka.security.protocol": "SSL"}).load)


def test_sink_options(spark, cluster):
    create_topic(cluster, "written", 1, 2)
    rows = spark.createDataFrame([(f"v{i}",) for i in range(30)], "value string")
    write(rows, cluster, topic="written", **{"kafka.acks": "1", "kafka.linger.ms": "0",
                                             "kafka.compression.type": "gzip"})
    assert sorted(r.value for r in consume(cluster, "written", [0])) == sorted(
        b"v%d" % i for i in range(30))
    assert "unknown option 'subscribe' for the kafka_ha sink" in _error(
        lambda: write(rows, cluster, topic="written", subscribe="x"))
    assert "acks" in _error(lambda: write(rows, cluster, topic="written",
                                          **{"kafka.acks": "some"}))


def test_min_offsets_per_trigger_and_progress_lag(spark, cluster, tmp_path):
    create_topic(cluster, "trig", 2, 2)

    def start(name, **options):
        r = (spark.readStream.format("kafka_ha")
             .option("bootstrap.servers", cluster.bootstrap_servers)
             .option("subscribe", "trig").option("startingOffsets", "earliest"))
        for key, value in options.items():
            r = r.option(key, value)
        return (r.load().writeStream.format("parquet").option("path", str(tmp_path / name))
                .option("checkpointLocation", str(tmp_path / f"{name}-cp"))
                .trigger(processingTime="100 milliseconds").start())

    query = start("held", minOffsetsPerTrigger="50", maxTriggerDelay="1h",
                  maxOffsetsPerTrigger="60")
    try:
        query.processAllAvailable()                      # nothing yet: the delay clock starts
        produce(cluster, "trig", 20)
        query.processAllAvailable()
        assert batch_rows(query) == []                   # 20 < 50 within the hour: held back
        produce(cluster, "trig", 100, start=20)
        query.processAllAvailable()
        assert batch_rows(query) == [60, 60]             # 120 >= 50, in batches of at most 60
        with_rows = [p for p in query.recentProgress if p["numInputRows"]]
        first, second = (offsets_behind(p["sources"][0]) for p in with_rows)
        assert sum(first["partitions"].values()) == 60   # read 60 of the 120 committed
        assert first["maxOffsetsBehindLatest"] >= first["avgOffsetsBehindLatest"] \
            >= first["minOffsetsBehindLatest"] >= 0
        assert second["partitions"] == {"[trig,0]": 0, "[trig,1]": 0}
        assert second["maxOffsetsBehindLatest"] == 0
        line = progress_line(with_rows[0])
        assert line.startswith(f"batch {with_rows[0]['batchId']}: 60 rows; [trig,0] 0..") \
            and "offsets behind latest: avg 30.0 max" in line
    finally:
        query.stop()

    # maxTriggerDelay lets a small backlog through once it has passed
    query = start("delayed", minOffsetsPerTrigger="1000", maxTriggerDelay="2s")
    try:
        deadline = time.monotonic() + 60
        while sum(batch_rows(query)) < 120:
            assert time.monotonic() < deadline and query.exception() is None, batch_rows(query)
            time.sleep(0.2)
        assert all(n < 1000 for n in batch_rows(query))
    finally:
        query.stop()


def test_format_is_found_without_register_and_register_still_works(spark, cluster):
    """The session fixture never registers the format: every test here reads through
    Spark's own look-up of pyspark_kafka_ha (bin/install.sh puts it on the path)."""
    from kafka_ha.spark import KafkaHaDataSource, register

    assert reader(spark, cluster, subscribe="timed").load().count() == 200
    assert register(spark) is KafkaHaDataSource           # the explicit path, as before
    assert reader(spark, cluster, subscribe="timed", endingOffsets=json.dumps(
        {"timed": {"0": 7, "1": 3}})).load().count() == 10


def _fails(df_or_callable, match):
    with pytest.raises(Exception, match=match) as info:
        df_or_callable() if callable(df_or_callable) else df_or_callable.collect()
    return str(info.value)


def test_missing_topic_and_partitions(spark, cluster):
    create_topic(cluster, "present", 2, 3)
    _fails(reader(spark, cluster, subscribe="present,nope").load(),
           r"topic\(s\) 'nope' do not exist in the cluster at 127\.0\.0\.1")
    assert not cluster.zk.exists("/brokers/topics/nope")       # looking did not create it
    _fails(reader(spark, cluster, assign=json.dumps({"present": [0, 5]})).load(),
           r"assign names partitions that do not exist: \[present,5\]")
    _fails(reader(spark, cluster, subscribe="present",
                  startingOffsets=json.dumps({"other": {"0": 1}})).load(),
           r"startingOffsets names partitions outside the subscription.*\[other,0\]")
    _fails(reader(spark, cluster, subscribe="present",
                  endingOffsets=json.dumps({"present": {"0": 10}})).load(),
           r"endingOffsets 10 of \[present,0\] is beyond its committed data \(high watermark 0\)")
    # options are checked on the driver, before any task runs
    _fails(lambda: reader(spark, cluster).load(),         # load() already checks these
           "exactly one of the options 'subscribe', 'subscribePattern' or 'assign'")
    _fails(lambda: reader(spark, cluster, subscribe="present", startingOffsets="latest")
           .load().collect(), "startingOffsets 'latest' is not allowed in batch queries")
    # a pattern that matches nothing is an empty result, not an error
    assert reader(spark, cluster, subscribePattern="zzz.*").load().count() == 0


def test_unreachable_cluster(spark):
    port = free_ports(1)[0]
    _fails(reader(spark, f"127.0.0.1:{port}", subscribe="t").load(),
           rf"cannot reach the kafka-ha cluster at bootstrap.servers=127.0.0.1:{port}: "
           rf"no broker reachable")
    with pytest.raises(Exception, match="cannot reach the kafka-ha cluster"):
        (spark.createDataFrame([("v",)], "value string").write.format("kafka_ha").mode("append")
         .option("bootstrap.servers", f"127.0.0.1:{port}").option("topic", "t")
         .option("max.block.ms", "2000").save())


def test_offsets_below_the_log_start(spark, cluster):
    from kafka_ha.spark.kafka_io import ClientSettings, DataLossError, read_range

    create_topic(cluster, "short", 1, 3, "--config", "segment.bytes=1024",
                 "--config", "retention.bytes=2048")
    for i in range(10):
        produce(cluster, "short", 20, start=20 * i)

    def bounds():
        with Consumer(cluster.bootstrap_servers) as c:
            return c.beginning_offsets([("short", 0)]), c.end_offsets([("short", 0)])

    cluster.wait_until(lambda: list(bounds()[0].values())[0] > 0, timeout=30,
                       message="retention never deleted a segment")
    (start,), (end,) = (list(d.values()) for d in bounds())
    msg = _fails(reader(spark, cluster, subscribe="short",
                        startingOffsets=json.dumps({"short": {"0": 0}})).load(),
                 r"startingOffsets 0 of \[short,0\] is below the log start offset")
    assert msg.replace("\n", " ").count(DATA_LOSS_FAILS) == 1     # Spark's own instruction
    lenient = reader(spark, cluster, subscribe="short", failOnDataLoss="false",
                     startingOffsets=json.dumps({"short": {"0": 0}})).load()
    assert lenient.count() == end - start
    # the same check inside a task, when retention passes a range after it was planned
    settings = ClientSettings(cluster.bootstrap_servers)
    with pytest.raises(DataLossError, match=rf"offsets 0\.\.{start - 1} of \[short,0\] are no "
                                            r"longer in the log"):
        list(read_range(settings, "short", 0, 0, end))
    batches = list(read_range(settings, "short", 0, 0, end, fail_on_data_loss=False))
    assert sum(b.num_rows for b in batches) == end - start
    assert batches[0].column("offset")[0].as_py() == start
