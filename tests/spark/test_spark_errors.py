"""Clear errors from the kafka_ha source: missing topics, no cluster, offsets that are gone."""
import pytest

pytest.importorskip("pyarrow", reason="the Spark tests need pyarrow (pip install -e '.[spark]')")
pytest.importorskip("pyspark", minversion="4.2",
                    reason="the Spark tests need pyspark>=4.2 (pip install -e '.[spark]')")

import json

from kafka_ha.client import Consumer
from tests.harness.kafka import create_topic
from tests.harness.ports import free_ports
from tests.spark.helpers import produce, reader

pytestmark = pytest.mark.system


def _fails(df_or_callable, match):
    with pytest.raises(Exception, match=match) as info:
        df_or_callable() if callable(df_or_callable) else df_or_callable.collect()
    return str(info.value)


def test_missing_topic_and_partitions(spark, cluster_factory):
    cluster = cluster_factory(3)
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


def test_offsets_below_the_log_start(spark, cluster_factory):
    from kafka_ha.spark.kafka_io import ClientSettings, DataLossError, read_range

    cluster = cluster_factory(3, overrides={"log.retention.check.interval.ms": 100})
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
    assert "failOnDataLoss=false" in msg
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
