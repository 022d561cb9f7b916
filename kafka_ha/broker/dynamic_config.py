"""A broker's dynamic configs (KIP-226) in force: read from ``/config/brokers/<id>`` and
``/config/brokers/<default>`` at start-up and again on each ``brokers/...`` change
notification (config_changes.ConfigChangeWatcher), then applied: the replication
throttle rates to the two quotas, ``logger.levels`` to the loggers.

A key without a dynamic value takes the broker's file value again, so deleting a
throttle (``--delete-config``) lifts it.  An unreadable node is logged and changes
nothing: a bad write by another tool never stops the broker.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from kafka_ha.admin.broker_config_changes import DEFAULT, effective_dynamic
from kafka_ha.broker.replication_quota import ReplicationQuota
from kafka_ha.config import BrokerConfig
from kafka_ha.zk.broker_store import BrokerStore
from kafka_ha.zk.errors import MalformedZnode, ZkError, error_text

log = logging.getLogger(__name__)
LevelsApplier = Callable[[tuple, tuple], None]


class DynamicBrokerConfig:
    def __init__(self, store: BrokerStore, static: BrokerConfig, leader_quota: ReplicationQuota,
                 follower_quota: ReplicationQuota, apply_levels: LevelsApplier) -> None:
        self.store = store
        self.static = static
        self.broker_id = static.broker_id
        self.leader_quota, self.follower_quota = leader_quota, follower_quota
        self._apply_levels = apply_levels
        self._levels = static["logger.levels"]        # the levels in force
        self._file_levels = static["logger.levels"]   # the file's, as of the last SIGHUP
        self.values: dict[str, Any] = {}   # the dynamic values in force

    def concerns(self, entity: str) -> bool:
        return entity in (DEFAULT, str(self.broker_id))

    def reload(self) -> None:
        try:
            default = self.store.broker_config(DEFAULT)
            own = self.store.broker_config(self.broker_id)
        except (MalformedZnode, ZkError, OSError) as e:
            log.error("Broker %d: dynamic broker configs not re-read, unchanged: %s", self.broker_id,
                      error_text(e) if isinstance(e, ZkError) else e)
            return
        values = effective_dynamic(default, own)
        for name in sorted((set(default) | set(own)) - set(values)):
            log.error("Broker %d: ignoring dynamic config %s (not valid here); using the file's value",
                      self.broker_id, name)
        self.apply(values)

    def file_levels_changed(self, levels: tuple) -> None:
        """SIGHUP re-read the file's ``logger.levels``: they apply unless a dynamic value
        overrides them."""
        self._file_levels = levels
        self.apply(self.values)

    def apply(self, values: dict[str, Any]) -> None:
        def value(name: str) -> Any:
            if name == "logger.levels":
                return values.get(name, self._file_levels)
            return values.get(name, self.static[name])
        self.leader_quota.set_bound(value("leader.replication.throttled.rate"))
        self.follower_quota.set_bound(value("follower.replication.throttled.rate"))
        levels = value("logger.levels")
        if levels != self._levels:
            self._apply_levels(levels, self._levels)
            self._levels = levels
        if values != self.values:
            log.info("Broker %d: dynamic broker configs now %s", self.broker_id,
                     ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "none")
        self.values = values
