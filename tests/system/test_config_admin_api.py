"""The config and log admin APIs through unmodified clients, one 3-broker cluster:
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs (kafka-python's KafkaAdminClient,
confluent-kafka's AdminClient, our own requests for the exact error codes),
DeleteRecords (surviving a kill -9) and DescribeLogDirs, and kafka-configs.sh
--bootstrap-server."""

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test dependency")
kafka = pytest.importorskip("kafka", reason="kafka-python is a test dependency")

from confluent_kafka import admin as cka  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402
from kafka import TopicPartition as KTP  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient  # noqa: E402

from kafka_ha.client.cluster import ClusterMetadata  # noqa: E402
from kafka_ha.protocol.api import ApiKey  # noqa: E402
from kafka_ha.protocol.errors import ErrorCode  # noqa: E402
from tests.harness.kafka import create_topic, read_states, run_tool  # noqa: E402

pytestmark = pytest.mark.system
TOPIC, BROKER = 2, 4


@pytest.fixture(scope="module")
def cluster(request, zk_ensemble):
    from tests.harness.cluster import ClusterFixture
    # No periodic log-start checkpoint during the test: only DeleteRecords' own one can
    # carry a new log start across a kill -9.
    c = ClusterFixture(3, {"log.flush.offset.checkpoint.interval.ms": 3600000},
                       ensemble=zk_ensemble, session_timeout_ms=4000).start()
    request.addfinalizer(c.stop)
    return c


@pytest.fixture(scope="module")
def raw(cluster):
    with ClusterMetadata(cluster.bootstrap_servers, client_id="test-config-admin") as client:
        yield client


def describe(raw, kind, name, version=1, keys=None):
    return raw.request_any(ApiKey.DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True})["results"][0]


def alter(raw, kind, name, configs, validate_only=False):
    return raw.request_any(ApiKey.ALTER_CONFIGS, 0, {
        "resources": [{"resource_type": kind, "resource_name": name,
                       "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "validate_only": validate_only})["responses"][0]


def incremental(raw, name, operations):
    return raw.request_any(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {
        "resources": [{"resource_type": TOPIC, "resource_name": name,
                       "configs": [{"name": k, "config_operation": op, "value": v}
                                   for k, op, v in operations]}],
        "validate_only": False})["responses"][0]


def zk_config(cluster, topic):
    import json
    data, _ = cluster.zk.get(f"/config/topics/{topic}")
    return json.loads(data)["config"]


def leader_of(cluster, topic, partition=0):
    return read_states(cluster, topic)[partition].leader


def earliest_offset(servers, topic, partition=0):
    consumer = KafkaConsumer(bootstrap_servers=servers, client_id="earliest")
    try:
        tp = KTP(topic, partition)
        return consumer.beginning_offsets([tp])[tp]
    finally:
        consumer.close()


def produce(cluster, topic, count, partition=0, size=10):
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    try:
        for i in range(count):
            producer.send(topic, b"v" * size, partition=partition)
        producer.flush(timeout=30)
    finally:
        producer.close()


def test_kafka_python_describe_alter_and_the_broker_applies_it(cluster):
    create_topic(cluster, "kp", 1, 3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, client_id="kp-admin")
    try:
        every = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")],
                                       include_synonyms=True, config_filter="all")["topic"]["kp"]
        assert every["retention.ms"]["value"] == "604800000"
        assert every["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
        assert every["retention.ms"]["synonyms"] == [
            {"name": "log.retention.hours", "value": "168", "source": "DEFAULT_CONFIG"}]
        # The harness's broker files set min.insync.replicas: a static broker setting.
        assert every["min.insync.replicas"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert not any(e["read_only"] for e in every.values())
        produce(cluster, "kp", 1, size=3000)         # accepted before the change

        assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp", configs={
            "max.message.bytes": "2048", "retention.ms": "86400000"})]) == {"topic": {"kp": "OK"}}
        assert zk_config(cluster, "kp") == {"max.message.bytes": "2048", "retention.ms": "86400000"}
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")])
        assert {k: v["value"] for k, v in modified["topic"]["kp"].items()} == {
            "max.message.bytes": "2048", "retention.ms": "86400000"}
        assert modified["topic"]["kp"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

        # The brokers apply it (change notification): a 3000-byte batch is now refused.
        def refused():
            producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                                     retries=0)
            try:
                producer.send("kp", b"v" * 3000, partition=0).get(timeout=30)
                return False
            except kafka.errors.MessageSizeTooLargeError:
                return True
            finally:
                producer.close()
        cluster.wait_until(refused, timeout=30, message="max.message.bytes=2048 not applied")

        brokers = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "2")],
                                         config_filter="all")["broker"]["2"]
        assert brokers["broker.id"] == {"value": "2", "read_only": True,
                                        "config_source": "STATIC_BROKER_CONFIG",
                                        "is_sensitive": False, "synonyms": []}
        assert brokers["log.retention.hours"]["config_source"] == "DEFAULT_CONFIG"

        dirs = {entry["broker"]: entry["log_dirs"] for entry in admin.describe_log_dirs()}
        assert sorted(dirs) == [1, 2, 3]
        for broker, (log_dir,) in dirs.items():
            assert log_dir["error_code"] == 0
            assert log_dir["log_dir"] == str(cluster.data_dir(broker))
            kp = [t for t in log_dir["topics"] if t["name"] == "kp"]
            assert kp and kp[0]["partitions"][0]["partition_size"] > 3000
            assert kp[0]["partitions"][0]["offset_lag"] == 0
            assert kp[0]["partitions"][0]["is_future_key"] is False
    finally:
        admin.close()


def test_bad_input_gets_kafkas_errors(cluster, raw):
    create_topic(cluster, "bad", 1, 1)
    # Unknown names and bad values: INVALID_CONFIG, nothing written.
    refused = alter(raw, TOPIC, "bad", {"no.such.config": "1"})
    assert refused["error_code"] == ErrorCode.INVALID_CONFIG
    assert "no.such.config" in refused["error_message"]
    refused = alter(raw, TOPIC, "bad", {"retention.ms": "soon"})
    assert (refused["error_code"], refused["error_message"]) == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value soon for configuration retention.ms: expected an integer, got 'soon'")
    assert alter(raw, TOPIC, "bad", {"retention.ms": None})["error_code"] == ErrorCode.INVALID_REQUEST
    # validate_only: checked, not written.
    assert alter(raw, TOPIC, "bad", {"retention.ms": "1000"}, validate_only=True)["error_code"] == 0
    assert not cluster.zk.exists("/config/topics/bad") or zk_config(cluster, "bad") == {}
    # Unknown topic, bad topic name, unknown resource type, broker resources.
    for result in (alter(raw, TOPIC, "nosuch", {"retention.ms": "1"}), describe(raw, TOPIC, "nosuch")):
        assert result["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert result["error_message"] == 'Topic "nosuch" does not exist.'
    assert describe(raw, TOPIC, "bad/name")["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert describe(raw, 7, "x")["error_code"] == ErrorCode.INVALID_REQUEST
    broker_alter = alter(raw, BROKER, "1", {"log.retention.hours": "1"})
    assert broker_alter["error_code"] == ErrorCode.INVALID_REQUEST
    assert "Cannot update these configs dynamically: log.retention.hours" in broker_alter["error_message"]
    assert describe(raw, BROKER, "x")["error_code"] == ErrorCode.INVALID_REQUEST
    assert describe(raw, BROKER, "")["configs"] == []
    # Describe v0 (is_default) and a key filter.
    v0 = describe(raw, TOPIC, "bad", version=0, keys=["retention.ms", "nope"])
    assert [(c["name"], c["is_default"]) for c in v0["configs"]] == [("retention.ms", True)]
    # IncrementalAlterConfigs: APPEND on a non-list config, an unknown operation, duplicates.
    assert incremental(raw, "bad", [("retention.ms", 2, "5")])["error_message"] == \
        "Config value append is not allowed for config key: retention.ms"
    assert incremental(raw, "bad", [("retention.ms", 9, "5")])["error_code"] == ErrorCode.INVALID_REQUEST
    assert incremental(raw, "bad", [("retention.ms", 0, "5"), ("retention.ms", 1, None)]
                       )["error_code"] == ErrorCode.INVALID_REQUEST
    # DeleteRecords: past the HW, a negative offset, a topic that does not exist.
    produce(cluster, "bad", 5)
    raw.refresh()
    answer = raw.request(leader_of(cluster, "bad"), ApiKey.DELETE_RECORDS, 1, {
        "topics": [{"name": "bad", "partitions": [{"partition_index": 0, "offset": 6},
                                                  {"partition_index": 0, "offset": -5}]},
                   {"name": "nosuch", "partitions": [{"partition_index": 0, "offset": 1}]}],
        "timeout_ms": 1000})
    assert [(p["error_code"], p["low_watermark"])
            for t in answer["topics"] for p in t["partitions"]] == [
        (ErrorCode.OFFSET_OUT_OF_RANGE, -1), (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    follower = next(b for b in cluster.broker_ids if b != leader_of(cluster, "bad"))
    answer = raw.request(follower, ApiKey.DELETE_RECORDS, 0, {
        "topics": [{"name": "bad", "partitions": [{"partition_index": 0, "offset": 1}]}],
        "timeout_ms": 1000})
    assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NOT_LEADER_FOR_PARTITION
    # Every broker still serves.
    assert sorted(cluster.registered_brokers()) == [1, 2, 3]


def test_confluent_admin_client(cluster):
    create_topic(cluster, "ck", 1, 3)
    admin = cka.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    resource = cka.ConfigResource(cka.ResourceType.TOPIC, "ck")
    described = admin.describe_configs([resource])[resource].result(timeout=30)
    assert described["cleanup.policy"].value == "delete"
    assert described["cleanup.policy"].source == cka.ConfigSource.DEFAULT_CONFIG.value

    change = cka.ConfigResource(cka.ResourceType.TOPIC, "ck", set_config={"retention.ms": "3600000"})
    admin.alter_configs([change])[change].result(timeout=30)
    assert zk_config(cluster, "ck") == {"retention.ms": "3600000"}

    # APPEND to the list config cleanup.policy starts from its value in effect (delete).
    appended = cka.ConfigResource(cka.ResourceType.TOPIC, "ck", incremental_configs=[
        cka.ConfigEntry("cleanup.policy", "compact",
                        incremental_operation=cka.AlterConfigOpType.APPEND),
        cka.ConfigEntry("retention.ms", None, incremental_operation=cka.AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([appended])[appended].result(timeout=30)
    assert zk_config(cluster, "ck") == {"cleanup.policy": "delete,compact"}
    subtracted = cka.ConfigResource(cka.ResourceType.TOPIC, "ck", incremental_configs=[
        cka.ConfigEntry("cleanup.policy", "delete",
                        incremental_operation=cka.AlterConfigOpType.SUBTRACT)])
    admin.incremental_alter_configs([subtracted])[subtracted].result(timeout=30)
    described = admin.describe_configs([resource])[resource].result(timeout=30)
    assert described["cleanup.policy"].value == "compact"
    assert described["retention.ms"].value == "604800000"

    # A compact-only topic refuses DeleteRecords (once the leader has read the change).
    produce(cluster, "ck", 3)

    def policy_refusal():
        future = admin.delete_records([confluent_kafka.TopicPartition("ck", 0, 1)])
        try:
            future[confluent_kafka.TopicPartition("ck", 0, 1)].result(timeout=30)
            return None
        except confluent_kafka.KafkaException as e:
            return e.args[0].code()
    cluster.wait_until(lambda: policy_refusal() == confluent_kafka.KafkaError.POLICY_VIOLATION,
                       timeout=30, message="DeleteRecords was not refused")

    bad = cka.ConfigResource(cka.ResourceType.TOPIC, "ck", set_config={"segment.bytes": "10"})
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        admin.alter_configs([bad])[bad].result(timeout=30)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG


def test_delete_records_survives_kill_and_followers_follow(cluster):
    create_topic(cluster, "dr", 1, 3)
    create_topic(cluster, "dr1", 1, 1)
    produce(cluster, "dr", 100)
    produce(cluster, "dr1", 50)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, client_id="dr-admin")
    try:
        answer = admin.delete_records({KTP("dr", 0): 40, KTP("dr1", 0): 30})
        assert answer[KTP("dr", 0)]["low_watermark"] == 40
        assert answer[KTP("dr1", 0)]["low_watermark"] == 30
        assert earliest_offset(cluster.bootstrap_servers, "dr") == 40
    finally:
        admin.close()
    ck = cka.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    tp = confluent_kafka.TopicPartition("dr", 0, 45)
    deleted = ck.delete_records([tp])[tp].result(timeout=30)
    assert deleted.low_watermark == 45
    # -1 means the high watermark.
    tp = confluent_kafka.TopicPartition("dr1", 0, -1)
    assert ck.delete_records([tp])[tp].result(timeout=30).low_watermark == 50

    # The single replica of dr1 loses nothing of it across kill -9: the checkpoint.
    only = leader_of(cluster, "dr1")
    cluster.kill(only)
    cluster.start_broker(only)
    cluster.wait_until(lambda: leader_of(cluster, "dr1") == only, timeout=60,
                       message="dr1 has no leader after the restart")
    cluster.wait_until(lambda: _earliest_or_none(cluster, "dr1") is not None, timeout=60,
                       message="dr1 cannot be read after the restart")
    assert earliest_offset(cluster.bootstrap_servers, "dr1") == 50

    # The followers of dr learnt the new start: after kill -9 of its leader, the next
    # leader starts at 45 too.
    leader = leader_of(cluster, "dr")
    cluster.kill(leader)
    cluster.wait_until(lambda: leader_of(cluster, "dr") not in (leader, -1), timeout=60,
                       message="dr did not fail over")
    others = cluster.bootstrap_of([b for b in cluster.broker_ids if b != leader])
    assert earliest_offset(others, "dr") == 45
    cluster.start_broker(leader)
    cluster.wait_until(lambda: len(read_states(cluster, "dr")[0].isr) == 3, timeout=60,
                       message=f"broker {leader} did not rejoin dr's ISR")


def _earliest_or_none(cluster, topic):
    try:
        return earliest_offset(cluster.bootstrap_servers, topic)
    except kafka.errors.KafkaError:
        return None


def test_kafka_configs_bootstrap_server(cluster):
    create_topic(cluster, "cli", 1, 1)
    servers = cluster.bootstrap_servers
    rc, out, err = run_tool("kafka-configs.sh", "--bootstrap-server", servers, "--alter",
                            "--entity-type", "topics", "--entity-name", "cli",
                            "--add-config", "retention.ms=5000,cleanup.policy=[compact,delete]")
    assert rc == 0, out + err
    assert "Completed updating config for topic cli." in out
    assert zk_config(cluster, "cli") == {"retention.ms": "5000", "cleanup.policy": "compact,delete"}
    rc, out, _ = run_tool("kafka-configs.sh", "--bootstrap-server", servers, "--alter",
                          "--entity-type", "topics", "--entity-name", "cli",
                          "--delete-config", "cleanup.policy")
    assert rc == 0, out
    rc, out, _ = run_tool("kafka-configs.sh", "--bootstrap-server", servers, "--describe",
                          "--entity-type", "topics", "--entity-name", "cli")
    assert (rc, out) == (0, "Configs for topic 'cli' are retention.ms=5000\n")
    # The ZooKeeper path reads the same overrides.
    rc, zk_out, _ = run_tool("kafka-configs.sh", "--zookeeper", cluster.connect_string, "--describe",
                             "--entity-type", "topics", "--entity-name", "cli")
    assert (rc, zk_out) == (0, out)
    for args, message in (
            (("--alter", "--entity-name", "cli", "--add-config", "retention.ms=soon"),
             "Invalid value soon for configuration retention.ms"),
            (("--alter", "--entity-name", "cli", "--delete-config", "flush.ms"),
             "Invalid config(s): flush.ms"),
            (("--describe", "--entity-name", "nosuch"), 'Topic "nosuch" does not exist.')):
        rc, out, _ = run_tool("kafka-configs.sh", "--bootstrap-server", servers, "--entity-type",
                              "topics", *args)
        assert rc == 1 and out.startswith("Error while executing config command : ") and message in out, out
