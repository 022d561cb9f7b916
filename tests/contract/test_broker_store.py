"""BrokerStore's contract, run against the in-memory fake and the real ensemble (no broker
processes): each operation's znode, its bytes, and the project's errors in place of the
client library's."""

import threading

import pytest

from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.broker_store import BrokerStore, ConfigChange
from kafka_ha.zk.errors import (MalformedZnode, ZkBadVersion, ZkNodeExists, ZkNoNode,
                                ZkSessionExpired, ZkUnavailable, error_text)
from kafka_ha.zk.mapped_client import WatchEvent
from kafka_ha.zk.schemas import validate_znode

TP = TopicPartition("t", 0)


@pytest.fixture
def zk(new_session):
    """The session the store runs on, also used to arrange and check raw znodes."""
    return new_session()


def test_registration_is_an_ephemeral_node_of_this_session(zk):
    store = BrokerStore(zk)
    store.ensure_persistent_paths()
    assert all(zk.exists(p) for p in zn.PERSISTENT_PATHS)
    info = BrokerInfo(3, "h3", 9093, timestamp_ms=1420000000000)
    store.create_registration(info)
    with pytest.raises(ZkNodeExists):
        store.create_registration(info)
    data, stat = zk.get("/brokers/ids/3")
    validate_znode("broker_registration", data)
    assert stat.ephemeralOwner == store.session_id == zk.client_id[0]
    got = store.registration(3)
    assert (got.info.host, got.info.port, got.info.epoch) == ("h3", 9093, stat.czxid)
    assert (got.owner_session, got.version) == (store.session_id, stat.version)
    assert store.registration(4) is None


def test_a_malformed_registration_is_read_without_its_info(zk):
    zk.create("/brokers/ids/5", b"not json", makepath=True)
    got = BrokerStore(zk).registration(5)
    assert got.info is None and got.owner_session == 0  # a persistent node: no owner


def test_registration_is_deleted_only_at_the_version_read(zk):
    store = BrokerStore(zk)
    store.ensure_persistent_paths()
    store.create_registration(BrokerInfo(1, "h", 9092))
    with pytest.raises(ZkBadVersion):
        store.delete_registration(1, version=7)
    store.delete_registration(1, version=store.registration(1).version)
    with pytest.raises(ZkNoNode):
        store.delete_registration(1, version=0)


def test_the_registration_watch_is_handed_the_projects_event(zk):
    store = BrokerStore(zk)
    store.ensure_persistent_paths()
    events = []
    fired = threading.Event()

    def watch(event):
        events.append(event)
        fired.set()
    assert store.watch_registration(2, watch) is False  # an exists watch: fires on creation
    store.create_registration(BrokerInfo(2, "h", 9092))
    assert fired.wait(10)
    fired.clear()
    assert store.watch_registration(2, watch) is True
    zk.delete("/brokers/ids/2")
    assert fired.wait(10)
    assert events == [WatchEvent.CREATED, WatchEvent.DELETED]


def test_topic_config_and_its_change_notifications(zk):
    store = BrokerStore(zk)
    assert store.topic_config("t") == {}
    zk.create(azn.TopicConfigZNode.path("t"), azn.TopicConfigZNode.encode({"retention.ms": "5"}),
              makepath=True)
    assert store.topic_config("t") == {"retention.ms": "5"}
    zk.set(azn.TopicConfigZNode.path("t"), b'{"version":1,"config":{"retention.ms":5}}')
    with pytest.raises(MalformedZnode, match="/config/topics/t"):
        store.topic_config("t")

    fired = threading.Event()
    zk.ensure_path(azn.ConfigChangeZNode.PATH)
    assert store.config_changes(watch=lambda _e: fired.set()) == []
    good = zk.create(azn.ConfigChangeZNode.PREFIX, azn.ConfigChangeZNode.encode("t"), sequence=True)
    assert fired.wait(10)
    bad = zk.create(azn.ConfigChangeZNode.PREFIX, b"{", sequence=True)
    other = zk.create(azn.ConfigChangeZNode.PREFIX,
                      b'{"version":2,"entity_path":"clients/c"}', sequence=True)
    names = sorted(store.config_changes(watch=lambda _e: None)) + ["config_change_9999999999"]
    changes = store.read_config_changes(names)  # the last one never existed: left out
    assert len(changes) == 3
    assert changes[0] == ConfigChange(good, "t", zk.exists(good).ctime)
    assert isinstance(changes[1], MalformedZnode) and changes[1].path == bad
    assert changes[2] == ConfigChange(other, None, zk.exists(other).ctime)
    store.delete_config_change(good)
    assert not zk.exists(good)
    broker = zk.create(azn.ConfigChangeZNode.PREFIX, azn.ConfigChangeZNode.encode("3", "brokers"),
                       sequence=True)
    [change] = store.read_config_changes([broker.rsplit("/", 1)[1]])
    assert change == ConfigChange(broker, None, zk.exists(broker).ctime, "3")


def test_dynamic_broker_configs_are_read(zk):
    store = BrokerStore(zk)
    assert store.broker_config(2) == {} and store.broker_config("<default>") == {}
    zk.create(azn.BrokerConfigZNode.path(2),
              azn.BrokerConfigZNode.encode({"follower.replication.throttled.rate": "9"}), makepath=True)
    assert store.broker_config(2) == {"follower.replication.throttled.rate": "9"}
    zk.create(azn.BrokerConfigZNode.path("<default>"), b'{"version":1,"config":{"x":1}}')
    with pytest.raises(MalformedZnode, match="<default>"):
        store.broker_config("<default>")


def test_consumer_offsets_in_the_0_8_layout(zk):
    store = BrokerStore(zk)
    store.commit_offset("g", "t", 0, 42)  # creates the node and its parents
    store.commit_offset("g", "t", 0, 43)  # then overwrites it
    assert zk.get("/consumers/g/offsets/t/0")[0] == b"43"
    zk.create("/consumers/g/offsets/t/2", b"x")
    got = store.committed_offsets("g", [("t", 0), ("t", 1), ("t", 2)])
    assert got[("t", 0)] == 43 and got[("t", 1)] is None
    assert isinstance(got[("t", 2)], MalformedZnode)
    with pytest.raises(ValueError):
        store.commit_offset("g/h", "t", 0, 1)
    with pytest.raises(ValueError):
        store.committed_offsets("g", [("a/b", 0)])


def test_controller_id(zk):
    store = BrokerStore(zk)
    assert store.controller_id() is None
    zk.create(zn.ControllerZNode.PATH, zn.ControllerZNode.encode(2, 1))
    assert store.controller_id() == 2


def test_a_leaders_isr_write_is_fenced_by_the_state_version(zk):
    store = BrokerStore(zk)
    with pytest.raises(ZkNoNode):
        store.partition_state(TP)
    zk.create(zn.TopicPartitionStateZNode.path(*TP),
              zn.TopicPartitionStateZNode.encode(LeaderAndIsr(1, 0, (1, 2), 1)), makepath=True)
    state = store.partition_state(TP)
    assert (state.isr, state.zk_version) == ((1, 2), 0)
    shrunk = LeaderAndIsr(1, 0, (1,), 1)
    assert store.write_partition_state(TP, shrunk, version=0) == 1
    with pytest.raises(ZkBadVersion):  # written since: the controller's, say
        store.write_partition_state(TP, shrunk, version=0)
    assert store.partition_state(TP).same_content(shrunk)

    path = store.notify_isr_change([TP, TopicPartition("t", 1)])
    assert path.startswith(azn.IsrChangeNotificationZNode.PREFIX)
    data = zk.get(path)[0]
    validate_znode("isr_change_notification", data)
    assert azn.IsrChangeNotificationZNode.decode(data, path) == [TP, TopicPartition("t", 1)]


def test_a_closed_session_fails_with_the_projects_error(zk):
    store = BrokerStore(zk)
    zk.stop()
    assert not store.connected and store.session_id is None
    with pytest.raises(ZkUnavailable) as failed:
        store.controller_id()
    # The name log lines print is the client's, as before.
    assert isinstance(failed.value, ZkSessionExpired)
    assert error_text(failed.value).startswith("ConnectionClosedError")


def test_a_watch_set_twice_is_called_once(zk):
    """The broker re-watches its registration after every reconnection; the client
    library keeps one watch per callback, and must still see one callback here."""
    store = BrokerStore(zk)
    store.ensure_persistent_paths()
    store.create_registration(BrokerInfo(1, "h", 9092))
    calls = []

    class Registration:
        def on_event(self, event):
            calls.append(event)
    watcher = Registration()
    assert store.watch_registration(1, watcher.on_event)
    assert store.watch_registration(1, watcher.on_event)  # a bound method: equal, not identical
    later = threading.Event()
    assert not store.watch_registration(2, lambda _e: later.set())
    zk.delete("/brokers/ids/1")
    store.create_registration(BrokerInfo(2, "h", 9093))
    # Watches run one at a time in the order their events came: once the second has
    # run, every call of the first has too.
    assert later.wait(10)
    assert calls == [WatchEvent.DELETED]


def test_the_first_broker_creates_the_cluster_id_and_every_other_reads_it(zk, new_session):
    store = BrokerStore(zk)
    store.ensure_persistent_paths()
    first = store.cluster_id()
    data, _ = zk.get("/cluster/id")
    validate_znode("cluster_id", data)
    assert zn.ClusterIdZNode.decode(data) == first
    assert BrokerStore(new_session()).cluster_id() == first     # another broker: the same id


def test_a_malformed_cluster_id_is_reported_not_replaced(zk):
    zk.create("/cluster/id", b"{oops", makepath=True)
    with pytest.raises(MalformedZnode):
        BrokerStore(zk).cluster_id()
    assert zk.get("/cluster/id")[0] == b"{oops"
