"""The broker's config-change watcher (broker/config_changes.py) against a fake store:
broker entities (KIP-226) reach the broker's callback, and the start-up read is repeated
once the watch is set."""
import gevent

from kafka_ha.broker.config_changes import ConfigChangeWatcher
from kafka_ha.clock import now_ms
from kafka_ha.zk.broker_store import ConfigChange


class Store:
    def __init__(self):
        self.children, self.changes, self.watch = [], {}, None

    def config_changes(self, watch):
        self.watch = watch
        return list(self.children)

    def read_config_changes(self, names):
        return [self.changes[n] for n in names]

    def notify(self, name, change):
        self.children.append(name)
        self.changes[name] = change
        self.watch(None)


def test_topic_and_broker_notifications_reach_their_callbacks():
    store, topics, brokers, watching = Store(), [], [], []
    watcher = ConfigChangeWatcher(store, topics.append, brokers.append, lambda: watching.append(1))
    try:
        gevent.sleep(0.01)
        assert watching == [1], "the start-up read is repeated once the watch is set"
        store.notify("config_change_0000000000",
                     ConfigChange("/config/changes/config_change_0000000000", None, now_ms(), "1"))
        store.notify("config_change_0000000001",
                     ConfigChange("/config/changes/config_change_0000000001", "t", now_ms()))
        gevent.sleep(0.01)
        assert brokers == ["1"] and topics == ["t"]
        assert watching == [1]
    finally:
        watcher.stop()
