"""A topic's LogConfig is derived once and shared by its partitions' logs (a LeaderAndIsr
creating 10k logs derived it 10k times), until the topic's overrides change."""
from __future__ import annotations

from kafka_ha.broker.topic_configs import TopicConfigs
from kafka_ha.config import BrokerConfig


class Overrides:
    """The store's one read used here: ``/config/topics/<t>`` as a dict."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, str]] = {}
        self.reads = 0

    def topic_config(self, topic: str) -> dict[str, str]:
        self.reads += 1
        return dict(self.values.get(topic, {}))


def test_a_topics_log_config_is_shared_until_its_overrides_change():
    store = Overrides()
    configs = TopicConfigs(store, BrokerConfig({"broker.id": 1, "zookeeper.connect": "zk:2181"}))
    store.values["t"] = {"retention.ms": "1000"}
    first = configs.log_config("t")
    assert first.retention_ms == 1000 and configs.log_config("t") is first and store.reads == 1
    assert configs.log_config("other") is not first and configs.log_config(None).retention_ms == 7 * 24 * 3600000

    store.values["t"] = {"retention.ms": "2000"}
    assert configs.log_config("t") is first              # not re-read until told
    configs.invalidate("t")
    assert configs.log_config("t").retention_ms == 2000
