"""What ``--throttle`` sets and ``--verify``/``--cancel`` remove, and the dynamic broker
configs (KIP-226) a broker applies: pure parts and in-memory targets, no ZooKeeper."""
import io
import logging

import pytest

from kafka_ha.admin.broker_config_changes import (
    checked_broker_config, effective_dynamic, broker_entity)
from kafka_ha.admin.reassign_throttle import (
    FOLLOWER_REPLICAS, LEADER_REPLICAS, apply_throttle, remove_throttle)
from kafka_ha.admin.topic_config_changes import TopicConfigError
from kafka_ha.broker.dynamic_config import DynamicBrokerConfig
from kafka_ha.broker.replication_quota import UNBOUNDED, ReplicationQuota
from kafka_ha.config import BrokerConfig
from kafka_ha.model import TopicPartition as TP
from kafka_ha.zk.errors import MalformedZnode

LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"


class MemoryTarget:
    def __init__(self, brokers, topics):
        self.brokers_ = {b: {} for b in brokers}
        self.topics = topics

    def topic_config(self, topic):
        return dict(self.topics.get(topic, {}))

    def set_topic_config(self, topic, configs):
        self.topics[topic] = dict(configs)

    def broker_config(self, broker):
        return dict(self.brokers_[broker])

    def set_broker_config(self, broker, configs):
        self.brokers_[broker] = dict(configs)

    def brokers(self):
        return sorted(self.brokers_)


def test_execute_throttles_the_moving_replicas_and_verify_removes_only_the_throttle():
    target = MemoryTarget([1, 2, 3, 4, 5], {"t": {"retention.ms": "1000"}})
    current = {TP("t", 0): (1, 2), TP("t", 1): (2, 3), TP("u", 0): (1,)}
    proposed = {TP("t", 0): (2, 4), TP("t", 1): (2, 3), TP("u", 0): (1,)}
    out = io.StringIO()
    apply_throttle(target, current, proposed, 10_000, out)
    assert out.getvalue() == "The inter-broker throttle limit was set to 10000 B/s\n"
    assert target.topics["t"] == {"retention.ms": "1000", LEADER_REPLICAS: "0:1,0:2",
                                  FOLLOWER_REPLICAS: "0:4"}
    assert "u" not in target.topics, "a topic that does not move is not throttled"
    throttled = {b for b, c in target.brokers_.items() if c == {LEADER_RATE: "10000",
                                                                FOLLOWER_RATE: "10000"}}
    assert throttled == {1, 2, 3, 4}, "the brokers of the current and the new replicas"
    target.brokers_[5] = {"logger.levels": "kafka=WARN"}
    out = io.StringIO()
    assert remove_throttle(target, ["t", "t"], out)
    assert out.getvalue() == "Throttle was removed.\n"
    assert target.topics["t"] == {"retention.ms": "1000"}
    assert target.brokers_ == {1: {}, 2: {}, 3: {}, 4: {}, 5: {"logger.levels": "kafka=WARN"}}
    assert not remove_throttle(target, ["t"], io.StringIO()), "nothing left: nothing said"


def test_only_dynamic_keys_with_valid_values_are_accepted():
    assert checked_broker_config("1", {LEADER_RATE: "100", "logger.levels": "kafka=DEBUG"})
    with pytest.raises(TopicConfigError, match="Cannot update these configs dynamically: num.partitions"):
        checked_broker_config("1", {"num.partitions": "3"})
    with pytest.raises(TopicConfigError, match="Unknown broker config"):
        checked_broker_config("1", {"no.such.key": "3"})
    with pytest.raises(TopicConfigError, match="can only be set per broker"):
        checked_broker_config("<default>", {FOLLOWER_RATE: "100"})
    with pytest.raises(TopicConfigError, match="Invalid value fast"):
        checked_broker_config("1", {LEADER_RATE: "fast"})
    assert broker_entity("") == "<default>" and broker_entity("07") == "7"
    with pytest.raises(TopicConfigError, match="must be an integer"):
        broker_entity("one")


def test_a_broker_s_own_value_wins_and_rates_never_come_from_the_default():
    default = {"logger.levels": "kafka=WARN", LEADER_RATE: "5"}
    assert effective_dynamic(default, {}) == {"logger.levels": (("kafka", "WARN"),)}
    assert effective_dynamic(default, {"logger.levels": "kafka=ERROR", FOLLOWER_RATE: "9"}) == {
        FOLLOWER_RATE: 9, "logger.levels": (("kafka", "ERROR"),)}
    assert effective_dynamic({}, {LEADER_RATE: "bad"}) == {}, "an invalid value is skipped"


class Store:
    def __init__(self):
        self.configs = {"<default>": {}, 1: {}}
        self.broken = False

    def broker_config(self, entity):
        if self.broken:
            raise MalformedZnode("/config/brokers/1", "not JSON")
        return self.configs[entity]


def test_the_broker_applies_and_lifts_dynamic_configs(caplog):
    store = Store()
    static = BrokerConfig({"broker.id": 1, "zookeeper.connect": "zk", LEADER_RATE: "777"})
    leader = ReplicationQuota(1, lambda t: "", clock_ms=lambda: 0)
    follower = ReplicationQuota(1, lambda t: "", clock_ms=lambda: 0)
    applied = []
    dynamic = DynamicBrokerConfig(store, static, leader, follower,
                                  lambda levels, previous: applied.append((levels, previous)))
    dynamic.reload()
    assert (leader.bound, follower.bound) == (777, UNBOUNDED), "the file's values at first"
    assert dynamic.concerns("1") and dynamic.concerns("<default>") and not dynamic.concerns("2")
    store.configs[1] = {LEADER_RATE: "1000", FOLLOWER_RATE: "2000"}
    store.configs["<default>"] = {"logger.levels": "kafka.controller=DEBUG"}
    dynamic.reload()
    assert (leader.bound, follower.bound) == (1000, 2000)
    assert applied == [((("kafka.controller", "DEBUG"),), ())]
    store.broken = True
    with caplog.at_level(logging.ERROR):
        dynamic.reload()
    assert (leader.bound, follower.bound) == (1000, 2000), "unreadable: nothing changes"
    assert "not re-read" in caplog.text
    store.broken = False
    store.configs = {"<default>": {}, 1: {}}
    dynamic.reload()
    assert (leader.bound, follower.bound) == (777, UNBOUNDED), "deleted: the file's values again"
    assert applied[-1] == ((), (("kafka.controller", "DEBUG"),))
    dynamic.file_levels_changed((("kafka", "INFO"),))            # SIGHUP with new file levels
    assert applied[-1] == ((("kafka", "INFO"),), ())
    store.configs["<default>"] = {"logger.levels": "kafka=ERROR"}
    dynamic.reload()
    dynamic.file_levels_changed((("kafka", "DEBUG"),))           # the dynamic value still wins
    assert applied[-1] == ((("kafka", "ERROR"),), (("kafka", "INFO"),))
