"""The pure parts of the config and log admin APIs: config merges, DescribeConfigs
entries, and DeleteRecords' decisions (over fake partitions)."""
from types import SimpleNamespace

import pytest

from kafka_ha.admin.topic_config_changes import (
    APPEND, DELETE, SET, SUBTRACT, TopicConfigError, checked_config, incremental_config,
    replaced_config)
from kafka_ha.broker.config_descriptions import (
    broker_config_entries, broker_values, topic_config_entries)
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.log_admin_apis import LogAdminApis
from kafka_ha.config import BrokerConfig
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.config_admin_api import DEFAULT_CONFIG, STATIC_BROKER_CONFIG, TOPIC_CONFIG
from kafka_ha.protocol.errors import ErrorCode


def no_default(name):
    return None


def test_incremental_operations_follow_kip_339():
    current = {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert incremental_config(current, [("retention.ms", SET, "5"), ("flush.ms", DELETE, None)],
                              no_default) == {"retention.ms": "5", "cleanup.policy": "compact"}
    # APPEND adds what is missing, to the override when there is one; SUBTRACT removes.
    assert incremental_config(current, [("cleanup.policy", APPEND, "delete,compact")],
                              no_default)["cleanup.policy"] == "compact,delete"
    assert incremental_config(current, [("cleanup.policy", SUBTRACT, "compact")],
                              no_default)["cleanup.policy"] == ""
    assert current == {"retention.ms": "1000", "cleanup.policy": "compact"}, "input unchanged"
    # Without an override, APPEND starts from the value in effect.
    assert incremental_config({}, [("cleanup.policy", APPEND, "compact")],
                              lambda name: "delete") == {"cleanup.policy": "delete,compact"}
    for operations, message in (
            ([("retention.ms", SUBTRACT, "1")], "Config value subtract is not allowed"),
            ([("retention.ms", SET, None)], "Null value not supported for : retention.ms"),
            ([("retention.ms", 7, "1")], "Unknown config operation 7"),
            ([("a", SET, "1"), ("a", DELETE, None)], "duplicate config keys: a")):
        with pytest.raises(TopicConfigError, match=message) as refused:
            incremental_config({}, operations, no_default)
        assert refused.value.code == ErrorCode.INVALID_REQUEST


def test_alter_configs_replaces_the_whole_set_and_validation_names_the_config():
    assert replaced_config([]) == {}
    with pytest.raises(TopicConfigError, match="duplicate config keys: flush.ms") as refused:
        replaced_config([("flush.ms", "1"), ("flush.ms", "2")])
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert checked_config({"cleanup.policy": "compact,delete"}) == {"cleanup.policy": "compact,delete"}
    # An empty list after SUBTRACT is not a cleanup policy: refused before anything is written.
    with pytest.raises(TopicConfigError, match="cleanup.policy") as refused:
        checked_config({"cleanup.policy": ""})
    assert refused.value.code == ErrorCode.INVALID_CONFIG


def test_topic_entries_name_their_source_and_synonyms():
    broker = BrokerConfig({"broker.id": 1, "zookeeper.connect": "h:1", "log.retention.hours": 24,
                           "log.roll.ms": 1000})
    values = broker_values(broker)
    defaults = {"retention.ms": 86400000, "segment.ms": 1000, "flush.ms": 2 ** 63 - 1,
                "cleanup.policy": "delete"}
    entries = {e["name"]: e for e in topic_config_entries(
        {"cleanup.policy": "compact"}, defaults, values,
        ["retention.ms", "segment.ms", "flush.ms", "cleanup.policy"], include_synonyms=True)}
    retention = entries["retention.ms"]
    assert (retention["value"], retention["config_source"], retention["is_default"]) == \
        ("86400000", STATIC_BROKER_CONFIG, False)
    assert retention["synonyms"] == [
        {"name": "log.retention.hours", "value": "24", "source": STATIC_BROKER_CONFIG},
        {"name": "log.retention.hours", "value": "168", "source": DEFAULT_CONFIG}]
    # log.roll.ms (set) comes before log.roll.hours (default); a key without a value is left out.
    assert [(s["name"], s["source"]) for s in entries["segment.ms"]["synonyms"]] == [
        ("log.roll.ms", STATIC_BROKER_CONFIG), ("log.roll.hours", DEFAULT_CONFIG)]
    assert [s["name"] for s in entries["flush.ms"]["synonyms"]] == ["log.flush.scheduler.interval.ms"]
    assert entries["flush.ms"]["config_source"] == DEFAULT_CONFIG and entries["flush.ms"]["is_default"]
    policy = entries["cleanup.policy"]
    assert (policy["value"], policy["config_source"], policy["read_only"]) == ("compact", TOPIC_CONFIG, False)
    assert policy["synonyms"][0] == {"name": "cleanup.policy", "value": "compact", "source": TOPIC_CONFIG}
    # Without include_synonyms the source stays, the list goes.
    plain = topic_config_entries({}, defaults, values, ["retention.ms"], include_synonyms=False)[0]
    assert plain["synonyms"] == [] and plain["config_source"] == STATIC_BROKER_CONFIG


def test_broker_entries_are_read_only_with_their_source():
    values = broker_values(BrokerConfig({"broker.id": 7, "zookeeper.connect": "h:1"}))
    entries = {e["name"]: e for e in broker_config_entries(
        values, ["broker.id", "log.roll.ms", "auto.create.topics.enable", "no.such.key"], True)}
    assert set(entries) == {"broker.id", "log.roll.ms", "auto.create.topics.enable"}
    assert all(e["read_only"] for e in entries.values())
    assert (entries["broker.id"]["value"], entries["broker.id"]["config_source"]) == ("7", STATIC_BROKER_CONFIG)
    assert entries["log.roll.ms"]["value"] is None and entries["log.roll.ms"]["synonyms"] == []
    assert entries["auto.create.topics.enable"]["value"] == "true"
    assert entries["auto.create.topics.enable"]["is_default"]


class FakePartition:
    """What DeleteRecords reads of a partition; followers' log starts set by the test."""

    def __init__(self, hw, policy="delete", leader=True, follower_start=None):
        self.is_leader = leader
        self.high_watermark = hw
        self.log = SimpleNamespace(log_start_offset=0, config=SimpleNamespace(delete=policy != "compact"))
        self.follower_start = follower_start

    def maybe_increment_log_start_offset(self, offset):
        self.log.log_start_offset = max(self.log.log_start_offset, min(offset, self.high_watermark))

    @property
    def low_watermark(self):
        starts = [self.log.log_start_offset]
        if self.follower_start is not None:
            starts.append(self.follower_start)
        return min(starts)


def delete(partitions, offsets, timeout_ms=0):
    checkpoints = []
    apis = LogAdminApis(HostedPartitions(partitions, partition_exists=lambda tp: tp.topic == "t"), None,
                        lambda: checkpoints.append(1))
    answer = apis.delete_records({"topics": [{"name": topic, "partitions": [
        {"partition_index": p, "offset": o} for p, o in parts]} for topic, parts in offsets.items()],
        "timeout_ms": timeout_ms}, 1)
    return [(p["error_code"], p["low_watermark"]) for t in answer["topics"] for p in t["partitions"]], \
        len(checkpoints)


def test_delete_records_decisions():
    tp = TopicPartition
    parts = {tp("t", 0): FakePartition(hw=40), tp("t", 1): FakePartition(hw=10, policy="compact"),
             tp("t", 2): FakePartition(hw=10, leader=False), tp("t", 3): FakePartition(hw=30)}
    answer, checkpoints = delete(parts, {"t": [(0, -1), (1, 5), (2, 5), (3, 31), (9, 1)],
                                         "gone": [(0, 1)]})
    assert answer == [(ErrorCode.NONE, 40), (ErrorCode.POLICY_VIOLATION, -1),
                      (ErrorCode.NOT_LEADER_FOR_PARTITION, -1), (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
                      (ErrorCode.NOT_LEADER_FOR_PARTITION, -1), (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert checkpoints == 1
    # Below the log start already: nothing moves (nothing to checkpoint), the answer is the
    # current start.
    assert delete(parts, {"t": [(0, 12)]}) == ([(ErrorCode.NONE, 40)], 0)
    # Nothing accepted: no checkpoint written.
    assert delete(parts, {"t": [(3, 99)]}) == ([(ErrorCode.OFFSET_OUT_OF_RANGE, -1)], 0)


def test_delete_records_waits_for_the_followers_log_start():
    lagging = FakePartition(hw=50, follower_start=0)
    answer, _ = delete({TopicPartition("t", 0): lagging}, {"t": [(0, 20)]}, timeout_ms=0)
    assert answer == [(ErrorCode.REQUEST_TIMED_OUT, -1)]
    assert lagging.log.log_start_offset == 20, "the leader's own log moved all the same"
    lagging.follower_start = 25
    assert delete({TopicPartition("t", 0): lagging}, {"t": [(0, 20)]})[0] == [(ErrorCode.NONE, 20)]


def test_low_watermark_is_the_lowest_log_start_of_the_live_replicas(tmp_path):
    from kafka_ha.broker.partition import Partition
    from tests.harness.leader_setup import TP, RecordingIsrWriter, batch, open_log, state
    live = {1, 2, 3}
    p = Partition(TP, 1, open_log(tmp_path), lambda: 1, RecordingIsrWriter(),
                  is_live=lambda broker: broker in live)
    p.make_leader(state((1, 2, 3)))
    for _ in range(10):
        p.append_as_leader(batch(), acks=1)
    for follower in (2, 3):
        p.on_follower_fetch(follower, 10, now=1000)
    assert p.high_watermark == 10
    p.maybe_increment_log_start_offset(6)
    assert (p.log.log_start_offset, p.low_watermark) == (6, 0), "no follower has reported yet"
    p.on_follower_log_start(2, 6)
    p.on_follower_log_start(3, 4)
    assert p.low_watermark == 4
    live.discard(3)
    assert p.low_watermark == 6, "a dead follower does not hold it back"
    p.log.close()


def test_every_topic_config_names_the_broker_key_of_its_default():
    from kafka_ha.broker.config_descriptions import topic_config_synonyms
    from kafka_ha.config import KEYS_BY_NAME, TOPIC_CONFIG_DEFAULTS
    # Kafka's throttled-replica lists have no broker-level default, so no synonym.
    no_broker_default = {"leader.replication.throttled.replicas",
                         "follower.replication.throttled.replicas"}
    for name, (broker_key, _) in TOPIC_CONFIG_DEFAULTS.items():
        synonyms = topic_config_synonyms(name)
        if name in no_broker_default:
            assert synonyms == () and broker_key is None, name
            continue
        assert synonyms, name
        assert all(key in KEYS_BY_NAME for key in synonyms), name
        if broker_key is not None:
            assert broker_key in synonyms, name


def test_broker_resources_alter_and_describe_dynamic_configs():
    """KIP-226 through AlterConfigs / IncrementalAlterConfigs of a broker resource, over an
    in-memory store: the write, its notification, and what describe then reports."""
    from kafka_ha.broker.config_admin_apis import ConfigAdminApis
    from kafka_ha.broker.topic_configs import TopicConfigs
    from kafka_ha.protocol.config_admin_api import (
        BROKER_RESOURCE, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG)

    class Store:
        def __init__(self):
            self.configs, self.notified = {}, []

        def broker_config(self, entity):
            return dict(self.configs.get(str(entity), {}))

        def set_broker_config(self, entity, configs):
            self.configs[str(entity)] = dict(configs)

        def notify_config_change(self, name, entity_type="topics"):
            self.notified.append(f"{entity_type}/{name}")

    store = Store()
    broker = BrokerConfig({"broker.id": 7, "zookeeper.connect": "h:1"})
    apis = ConfigAdminApis(7, SimpleNamespace(store=store), TopicConfigs(None, broker))

    def alter(name, configs, incremental=False):
        resource = {"resource_type": BROKER_RESOURCE, "resource_name": name, "configs": [
            {"name": k, "value": v, "config_operation": op} for k, (op, v) in configs.items()]}
        call = apis.incremental_alter_configs if incremental else apis.alter_configs
        answer = call({"resources": [resource], "validate_only": False}, 0)["responses"][0]
        return answer["error_code"], answer["error_message"]

    assert alter("7", {"leader.replication.throttled.rate": (0, "100")}) == (0, None)
    assert alter("", {"logger.levels": (0, "kafka=WARN")}) == (0, None)
    assert alter("7", {"follower.replication.throttled.rate": (0, "5")}, incremental=True) == (0, None)
    assert store.configs == {"7": {"leader.replication.throttled.rate": "100",
                                   "follower.replication.throttled.rate": "5"},
                             "<default>": {"logger.levels": "kafka=WARN"}}
    assert store.notified == ["brokers/7", "brokers/<default>", "brokers/7"]
    assert alter("7", {"leader.replication.throttled.rate": (1, None)}, incremental=True) == (0, None)
    assert store.configs["7"] == {"follower.replication.throttled.rate": "5"}
    code, message = alter("7", {"log.retention.hours": (0, "1")})
    assert code == ErrorCode.INVALID_REQUEST and "Cannot update these configs dynamically" in message
    assert alter("8", {"logger.levels": (0, "kafka=WARN")})[0] == ErrorCode.INVALID_REQUEST
    assert alter("", {"leader.replication.throttled.rate": (0, "1")})[0] == ErrorCode.INVALID_REQUEST
    described = apis.describe_configs({"resources": [
        {"resource_type": BROKER_RESOURCE, "resource_name": "7", "configuration_keys": [
            "follower.replication.throttled.rate", "logger.levels", "broker.id"]},
        {"resource_type": BROKER_RESOURCE, "resource_name": "", "configuration_keys": None}],
        "include_synonyms": False}, 1)["results"]
    mine = {e["name"]: (e["value"], e["config_source"], e["read_only"]) for e in described[0]["configs"]}
    assert mine == {"follower.replication.throttled.rate": ("5", DYNAMIC_BROKER_CONFIG, False),
                    "logger.levels": ("kafka=WARN", DYNAMIC_DEFAULT_BROKER_CONFIG, False),
                    "broker.id": ("7", STATIC_BROKER_CONFIG, True)}
    assert [(e["name"], e["value"]) for e in described[1]["configs"]] == [("logger.levels", "kafka=WARN")]
