"""Applying topic config changes without a restart (``/config/changes``).

A ``config_change_<seq>`` notification names a topic whose overrides in
``/config/topics/<t>`` changed (all three of Kafka's notification formats are
read); the broker re-reads them, so min.insync.replicas, unclean election,
retention and segment size take effect at once.  One that names a broker
(``brokers/<id>`` or ``brokers/<default>``, KIP-226) makes the broker re-read its
dynamic configs (dynamic_config.py).  Notifications older than 15
minutes are purged, as Kafka 0.8.2's TopicConfigManager does.
"""
from __future__ import annotations

import logging
from typing import Callable

import gevent
from gevent.event import Event

from kafka_ha.clock import now_ms
from kafka_ha.zk.broker_store import BrokerStore
from kafka_ha.zk.errors import MalformedZnode, ZkError, error_text

log = logging.getLogger(__name__)
PURGE_AFTER_MS = 15 * 60 * 1000


class ConfigChangeWatcher:
    """Re-reads a topic's overrides (or the broker configs) when a ``config_change_``
    notification names it."""

    def __init__(self, store: BrokerStore, on_topic_change: Callable[[str], None],
                 on_broker_change: Callable[[str], None] = lambda _entity: None,
                 on_watching: Callable[[], None] = lambda: None) -> None:
        """``on_watching()`` runs once the first listing has set the watch: what was read
        before it (the dynamic broker configs at start-up) is read again there, so a change
        made in between is not lost among the notifications skipped as already read."""
        self.store = store
        self._on_watching = on_watching
        self._on_topic_change = on_topic_change
        self._on_broker_change = on_broker_change
        self._seen: set[str] = set()
        self._wakeup = Event()
        self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        self._greenlet.kill(block=False)

    def _run(self) -> None:
        first = True
        while True:
            try:
                children = self.store.config_changes(watch=lambda _e: self._wakeup.set())
                self._handle(children, first)
                if first:
                    self._on_watching()
                first = False
            except (ZkError, OSError) as e:
                log.warning("Config change watch failed (%s); retrying", error_text(e))
                gevent.sleep(1)
                continue
            self._wakeup.wait()
            self._wakeup.clear()

    def _handle(self, children: list[str], first: bool) -> None:
        new = sorted(c for c in children if c not in self._seen)
        self._seen = set(children)
        if first or not new:
            return  # at start-up every override is read fresh anyway
        now = now_ms()
        for change in self.store.read_config_changes(new):
            if isinstance(change, MalformedZnode):
                log.error("Ignoring config change notification: %s", change)
                continue
            if change.topic:
                log.info("Topic %s config changed (%s)", change.topic, change.path)
                self._on_topic_change(change.topic)
            if change.broker:
                log.info("Broker config %s changed (%s)", change.broker, change.path)
                self._on_broker_change(change.broker)
            if now - change.created_ms > PURGE_AFTER_MS:
                try:
                    self.store.delete_config_change(change.path)
                except ZkError:
                    pass
