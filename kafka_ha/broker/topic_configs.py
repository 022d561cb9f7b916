"""A broker's view of topic-level config overrides (``/config/topics/<t>``).

Read when the broker first hosts a partition of the topic; a malformed or
invalid override is logged and the broker default used, never fatal.
"""
from __future__ import annotations

import logging

from kafka_ha.config import (
    TOPIC_CONFIG_DEFAULTS, BrokerConfig, ConfigError, broker_roll_ms, topic_setting, validate_topic_config)
from kafka_ha.log.config import LogConfig
from kafka_ha.zk.broker_store import BrokerStore
from kafka_ha.zk.errors import MalformedZnode, ZkError

log = logging.getLogger(__name__)


class TopicConfigs:
    def __init__(self, store: BrokerStore | None, broker: BrokerConfig) -> None:
        self.store = store
        self.broker = broker
        self._overrides: dict[str, dict[str, str]] = {}
        # Derived from the overrides and the broker's (static) config; LogConfig is frozen,
        # so every log of a topic shares one (a LeaderAndIsr creates thousands of logs).
        self._log_configs: dict[str | None, LogConfig] = {}

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
        self._log_configs.pop(topic, None)

    def setting(self, topic: str, name: str):
        return topic_setting(name, self.overrides(topic), self.broker)

    def min_isr(self, topic: str) -> int:
        return self.setting(topic, "min.insync.replicas")

    def max_message_bytes(self, topic: str) -> int:
        return self.setting(topic, "max.message.bytes")

    def default_values(self) -> dict[str, object]:
        """Each topic config's value for a topic without overrides (the broker's defaults,
        as :meth:`log_config` derives them), by Kafka name."""
        defaults = self.log_config(None)
        return {name: (getattr(defaults, name.replace(".", "_")) if hasattr(defaults, name.replace(".", "_"))
                       else topic_setting(name, {}, self.broker))
                for name in TOPIC_CONFIG_DEFAULTS}

    def log_config(self, topic: str | None) -> LogConfig:
        """A topic's log settings: its overrides, else the broker's defaults (None: the defaults)."""
        derived = self._log_configs.get(topic)
        if derived is None:
            derived = self._log_configs[topic] = self._derive_log_config(topic)
        return derived

    def _derive_log_config(self, topic: str | None) -> LogConfig:
        cfg = self.broker

        def get(name: str, broker_value=None):
            value = self.setting(topic, name) if topic else None
            if value is None:
                value = broker_value if broker_value is not None else topic_setting(name, {}, cfg)
            return value
        flush_ms = cfg["log.flush.interval.ms"]
        if flush_ms is None:
            flush_ms = cfg["log.flush.scheduler.interval.ms"]   # as Kafka's KafkaConfig.logFlushIntervalMs
        segment_ms, jitter_ms = broker_roll_ms(cfg)
        return LogConfig(segment_bytes=get("segment.bytes"),
                         retention_ms=get("retention.ms", cfg["log.retention.hours"] * 3600000),
                         retention_bytes=get("retention.bytes"),
                         max_message_bytes=get("max.message.bytes"),
                         flush_messages=get("flush.messages"),
                         flush_ms=get("flush.ms", flush_ms),
                         segment_ms=get("segment.ms", segment_ms),
                         segment_jitter_ms=get("segment.jitter.ms", jitter_ms),
                         cleanup_policy=get("cleanup.policy"),
                         delete_retention_ms=get("delete.retention.ms"),
                         min_cleanable_dirty_ratio=get("min.cleanable.dirty.ratio"),
                         min_compaction_lag_ms=get("min.compaction.lag.ms"),
                         log_append_time=get("message.timestamp.type") == "LogAppendTime",
                         timestamp_difference_max_ms=get("message.timestamp.difference.max.ms"),
                         compression_type=get("compression.type"))
