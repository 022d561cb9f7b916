"""A broker's view of topic-level config overrides (``/config/topics/<t>``).

Read when the broker first hosts a partition of the topic; a malformed or
invalid override is logged and the broker default used, never fatal.
"""
from __future__ import annotations

import logging

from kafka_ha.config import BrokerConfig, ConfigError, topic_setting, validate_topic_config
from kafka_ha.zk.broker_store import BrokerStore
from kafka_ha.zk.errors import MalformedZnode, ZkError

log = logging.getLogger(__name__)


class TopicConfigs:
    def __init__(self, store: BrokerStore | None, broker: BrokerConfig) -> None:
        self.store = store
        self.broker = broker
        self._overrides: dict[str, dict[str, str]] = {}

    def overrides(self, topic: str) -> dict[str, str]:
        cached = self._overrides.get(topic)
        if cached is None:
            cached = self._overrides[topic] = self._load(topic)
        return cached

    def _load(self, topic: str) -> dict[str, str]:
        if self.store is None:
            return {}
        try:
            overrides = self.store.topic_config(topic)
        except (MalformedZnode, ZkError) as e:
            log.error("Using broker defaults for topic %s: %s", topic, e)
            return {}
        # Another tool may have written a value our admin commands refuse (say
        # cleanup.policy=compact); say so once here, where it is read.
        for name, value in overrides.items():
            try:
                validate_topic_config({name: value})
            except ConfigError as e:
                log.error("Ignoring topic %s's override %s=%s, using the broker default: %s",
                          topic, name, value, e)
        return overrides

    def invalidate(self, topic: str) -> None:
        self._overrides.pop(topic, None)

    def setting(self, topic: str, name: str):
        return topic_setting(name, self.overrides(topic), self.broker)

    def min_isr(self, topic: str) -> int:
        return self.setting(topic, "min.insync.replicas")

    def max_message_bytes(self, topic: str) -> int:
        return self.setting(topic, "max.message.bytes")
