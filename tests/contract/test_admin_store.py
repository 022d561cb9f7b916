"""AdminStore's and BenchStore's contract, run against the in-memory fake and the real
ensemble (no broker processes): each store operation's znodes and errors.

The admin tools' behaviour end to end is in tests/system/test_admin_commands_zk.py.
Connecting (``AdminStore.connect``) needs a real ensemble and is tested on it alone.
"""

import uuid

import pytest

from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.admin_store import AdminStore
from kafka_ha.zk.bench_store import BenchStore
from kafka_ha.zk.errors import (MalformedZnode, ZkBadVersion, ZkNodeExists, ZkNoNode, ZkTimeout,
                                ZkUnavailable)
from kafka_ha.zk.schemas import validate_znode

T0 = TopicPartition("t", 0)


@pytest.fixture
def zk(new_session):
    """The session the store runs on, also used to arrange and check raw znodes."""
    return new_session()


@pytest.fixture
def store(zk):
    return AdminStore(zk)


# ---- on the real ensemble alone ---------------------------------------------------------

@pytest.fixture
def connect(zk_ensemble):
    return f"{zk_ensemble.connect_string}/admin-store-{uuid.uuid4().hex[:10]}"


@pytest.mark.filterwarnings("ignore:No chroot path exists")  # kazoo says so; expected here
def test_connect_leaves_a_missing_chroot_alone_when_told(zk_ensemble, connect):
    with AdminStore.connect(connect, 10000, 30000, create_chroot=False) as store:
        assert store.live_broker_ids() == [] and store.topics() == []
    with AdminStore.connect(zk_ensemble.connect_string, 10000, 30000) as root:
        assert not root.zk.client.exists(connect[connect.index("/"):])


def test_an_unreachable_ensemble_is_a_timeout():
    with pytest.raises(ZkTimeout) as failed:
        AdminStore.connect("127.0.0.1:1", 10000, 1000)
    assert isinstance(failed.value, ZkUnavailable)


# ---- on both ---------------------------------------------------------------------------

def test_brokers_and_controller(store, zk):
    assert store.live_broker_ids() == [] and store.registered_brokers() == []
    for broker_id in (10, 2):
        zk.create(zn.BrokerIdZNode.path(broker_id),
                  zn.BrokerIdZNode.encode(BrokerInfo(broker_id, f"h{broker_id}", 9092)),
                  makepath=True)
    zk.create("/brokers/ids/not-an-id", b"")
    assert store.live_broker_ids() == [2, 10]
    assert [(b.broker_id, b.host) for b in store.registered_brokers()] == [(2, "h2"), (10, "h10")]
    zk.set(zn.BrokerIdZNode.path(10), b"{}")
    with pytest.raises(MalformedZnode, match="/brokers/ids/10"):
        store.registered_brokers()
    assert store.controller_id() is None
    zk.create(zn.ControllerZNode.PATH, zn.ControllerZNode.encode(2, 1))
    assert store.controller_id() == 2


def test_create_topic_writes_config_and_assignment_together(store, zk):
    assert not store.topic_exists("t")
    store.create_topic(TopicAssignment("t", {0: (1, 2)}), {"retention.ms": "5"})
    assert store.topic_exists("t") and store.topics() == ["t"]
    validate_znode("topic_assignment", zk.get(zn.TopicZNode.path("t"))[0])
    assert store.assignment("t").partitions == {0: (1, 2)}
    assert store.topic_config("t") == {"retention.ms": "5"} and store.topics_with_config() == ["t"]
    with pytest.raises(ZkNodeExists):  # the loser writes nothing, not even its config
        store.create_topic(TopicAssignment("t", {0: (3,)}), {"retention.ms": "9"})
    assert store.topic_config("t") == {"retention.ms": "5"}


def test_create_topic_overwrites_a_config_left_without_its_topic(store, zk):
    zk.create(azn.TopicConfigZNode.path("u"), azn.TopicConfigZNode.encode({"flush.ms": "1"}),
              makepath=True)
    store.create_topic(TopicAssignment("u", {0: (1,)}), {})
    assert store.topic_config("u") == {}


def test_an_assignment_is_rewritten_only_at_the_version_read(store):
    store.create_topic(TopicAssignment("t", {0: (1,)}), {})
    read = store.assignment("t")
    store.set_assignment(TopicAssignment("t", {0: (1,), 1: (2,)}, read.zk_version))
    with pytest.raises(ZkBadVersion):
        store.set_assignment(TopicAssignment("t", {0: (1,), 1: (3,)}, read.zk_version))
    assert store.assignment("t").partitions == {0: (1,), 1: (2,)}
    assert store.assignment("gone") is None


def test_config_change_and_its_notification(store, zk):
    store.set_topic_config("t", {"flush.ms": "10"})  # creates the node
    store.set_topic_config("t", {"flush.ms": "20"})  # then overwrites it
    assert store.topic_config("t") == {"flush.ms": "20"}
    store.notify_config_change("t")
    [name] = zk.get_children(azn.ConfigChangeZNode.PATH)
    data = zk.get(f"{azn.ConfigChangeZNode.PATH}/{name}")[0]
    validate_znode("config_change_notification", data)
    assert azn.ConfigChangeZNode.decode(data, name) == "t"


def test_requests_to_the_controller_exist_once(store):
    assert store.reassignment() is None and store.preferred_election_data() is None
    store.create_reassignment({T0: (2, 1)})
    with pytest.raises(ZkNodeExists):
        store.create_reassignment({T0: (3,)})
    assert store.reassignment() == {T0: (2, 1)}
    store.create_preferred_election([T0])
    with pytest.raises(ZkNodeExists):
        store.create_preferred_election([T0])
    assert azn.PreferredReplicaElectionZNode.decode(store.preferred_election_data()) == [T0]
    assert not store.marked_for_deletion("t")
    store.create_deletion_marker("t")
    assert store.marked_for_deletion("t") and store.topics_marked_for_deletion() == ["t"]
    with pytest.raises(ZkNodeExists):
        store.create_deletion_marker("t")


def test_partition_states_leave_out_missing_and_malformed_ones(store, zk):
    t1, t2 = TopicPartition("t", 1), TopicPartition("t", 2)
    zk.create(zn.TopicPartitionStateZNode.path(*T0),
              zn.TopicPartitionStateZNode.encode(LeaderAndIsr(1, 0, (1,), 1)), makepath=True)
    zk.create(zn.TopicPartitionStateZNode.path(*t2), b"[]", makepath=True)
    states = store.partition_states([T0, t1, t2])
    assert list(states) == [T0] and states[T0].leader == 1


def test_bench_rewrites_states_unchanged_and_fails_on_a_write_in_between(zk):
    bench = BenchStore(zk)
    zk.ensure_path(zn.BROKER_TOPICS_PATH)
    bench.create_assignments(TopicAssignment(f"b{i}", {0: (1,)}) for i in range(3))
    assert bench.topics() == ["b0", "b1", "b2"]
    tps = [TopicPartition(f"b{i}", 0) for i in range(3)]
    for tp in tps:
        zk.create(zn.TopicPartitionStateZNode.path(*tp),
                  zn.TopicPartitionStateZNode.encode(LeaderAndIsr(1, 0, (1,), 1)),
                  makepath=True)
    before = {tp: zk.get(zn.TopicPartitionStateZNode.path(*tp)) for tp in tps}
    snapshot = bench.snapshot_states(tps)
    bench.rewrite_unchanged(snapshot)
    for tp, (data, stat) in before.items():
        after_data, after_stat = zk.get(zn.TopicPartitionStateZNode.path(*tp))
        assert (after_data, after_stat.version) == (data, stat.version + 1)
    with pytest.raises(ZkBadVersion):
        bench.rewrite_unchanged(snapshot)  # at the versions before: someone wrote since
    with pytest.raises(ZkNoNode):
        bench.snapshot_states([TopicPartition("none", 0)])


def test_broker_config_and_its_notification(store, zk):
    """KIP-226: /config/brokers/<id> and <default>, announced as brokers/<entity>."""
    assert store.broker_config(1) == {} and store.brokers_with_config() == []
    store.set_broker_config(1, {"leader.replication.throttled.rate": "100"})
    store.set_broker_config("<default>", {"logger.levels": "kafka=WARN"})
    store.set_broker_config("1", {"leader.replication.throttled.rate": "200"})
    assert store.broker_config(1) == {"leader.replication.throttled.rate": "200"}
    assert store.brokers_with_config() == ["1", "<default>"]
    validate_znode("broker_config", zk.get("/config/brokers/1")[0])
    store.notify_config_change("<default>", "brokers")
    [name] = zk.get_children(azn.ConfigChangeZNode.PATH)
    data = zk.get(f"{azn.ConfigChangeZNode.PATH}/{name}")[0]
    validate_znode("config_change_notification", data)
    assert data == b'{"version":2,"entity_path":"brokers/<default>"}'
    assert store.live_broker_racks() == {}
