"""Broker configuration: Kafka names, typed values, and errors that name the key."""
import pytest

from kafka_ha.config import BrokerConfig, ConfigError, broker_roll_ms, topic_setting, validate_topic_config

BASE = {"broker.id": 1, "zookeeper.connect": "127.0.0.1:2181"}


def test_defaults_and_types(tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text("broker.id: 3\nzookeeper.connect: 'h:1/x'\nport: 9999\nlog.dirs: /a,/b\n"
                    "unclean.leader.election.enable: 'true'\n")
    cfg = BrokerConfig.load(path)
    assert cfg.broker_id == 3
    assert cfg["port"] == 9999
    assert cfg.log_dirs == ("/a", "/b")
    assert cfg["unclean.leader.election.enable"] is True
    assert cfg["min.insync.replicas"] == 1
    assert cfg.session_timeout_ms == 6000


def test_unknown_key_is_named_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"unknown configuration key 'zookeeper.session.tmeout.ms'"
                                          r".*did you mean 'zookeeper.session.timeout.ms'"):
        BrokerConfig({**BASE, "zookeeper.session.tmeout.ms": 4000})


@pytest.mark.parametrize("key, value", [
    ("port", "abc"), ("broker.id", True), ("min.insync.replicas", 0),
    ("delete.topic.enable", "yes"), ("listeners", "SSL://h:1"),
])
def test_bad_values_name_the_key(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig({**BASE, key: value})


def test_missing_required_key():
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        BrokerConfig({"broker.id": 1})


def test_not_a_mapping(tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        BrokerConfig.load(path)


def test_listeners_override_host_and_port():
    cfg = BrokerConfig({**BASE, "listeners": "PLAINTEXT://127.0.0.2:9100"})
    assert cfg.bind_address == ("127.0.0.2", 9100)
    assert cfg.advertised_address == ("127.0.0.2", 9100)


def test_topic_overrides():
    cfg = BrokerConfig(BASE)
    assert topic_setting("unclean.leader.election.enable", {}, cfg) is False
    assert topic_setting("unclean.leader.election.enable",
                         {"unclean.leader.election.enable": "true"}, cfg) is True
    with pytest.raises(ConfigError, match='Unknown configuration "retention.msx"'):
        validate_topic_config({"retention.msx": "1"})


@pytest.mark.parametrize("name, value, message", [
    ("cleanup.policy", "snapshot", "String must be one of: compact, delete"),
    ("cleanup.policy", "compact,forever", "String must be one of: compact, delete"),
    ("segment.ms", "0", "Value must be at least 1"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be between 0 and 1"),
    ("delete.retention.ms", "-1", "Value must be at least 0"),
    ("segment.bytes", "10", "Value must be at least 26"),
    ("max.message.bytes", "0", "Value must be at least 26"),
    ("min.insync.replicas", "0", "Value must be at least 1"),
    ("retention.ms", "-2", "Value must be at least -1"),
    ("flush.messages", "-1", "Value must be at least 0"),
    ("flush.ms", "soon", "expected an integer"),
])
def test_topic_overrides_out_of_range_get_kafkas_message(name, value, message):
    """A value the broker could not use is refused by the tools, not found out later by
    the broker when it builds the log."""
    with pytest.raises(ConfigError, match=f"^Invalid value {value} for configuration {name}: "
                                          f"{message}"):
        validate_topic_config({name: value})


def test_compaction_and_rolling_settings_and_their_defaults():
    cfg = BrokerConfig(BASE)
    assert validate_topic_config({"cleanup.policy": "delete,compact", "segment.ms": "60000"}) == \
        {"cleanup.policy": "compact,delete", "segment.ms": 60000}
    assert topic_setting("cleanup.policy", {}, cfg) == "delete"
    assert topic_setting("cleanup.policy", {"cleanup.policy": "[compact]"}, cfg) == "compact"
    assert topic_setting("min.cleanable.dirty.ratio", {}, cfg) == 0.5
    assert topic_setting("delete.retention.ms", {}, cfg) == 86400000
    assert broker_roll_ms(cfg) == (168 * 3600000, 0)
    assert broker_roll_ms(BrokerConfig({**BASE, "log.roll.hours": 1, "log.roll.jitter.ms": 5})) == (3600000, 5)
    assert broker_roll_ms(BrokerConfig({**BASE, "log.roll.hours": 1, "log.roll.ms": 7})) == (7, 0)
    with pytest.raises(ConfigError, match="log.cleanup.policy"):
        BrokerConfig({**BASE, "log.cleanup.policy": "keep"})


def test_flush_settings_and_their_defaults():
    cfg = BrokerConfig(BASE)
    assert validate_topic_config({"cleanup.policy": " delete", "flush.messages": "0", "flush.ms": "0"}) == \
        {"cleanup.policy": "delete", "flush.messages": 0, "flush.ms": 0}
    assert cfg["log.flush.interval.messages"] == (1 << 63) - 1          # Kafka's Long.MAX_VALUE: never
    assert cfg["log.flush.interval.ms"] is None
    assert cfg["log.flush.offset.checkpoint.interval.ms"] == 60000
    assert topic_setting("flush.messages", {}, cfg) == (1 << 63) - 1
    assert topic_setting("flush.messages", {"flush.messages": "-5"}, cfg) == (1 << 63) - 1
    with pytest.raises(ConfigError, match="log.segment.bytes: must be >= 26"):
        BrokerConfig({**BASE, "log.segment.bytes": 14})
