"""The controller store's contract, run twice: against the in-memory fake
(tests/harness/fake_controller_store.py) and against ControllerStore on the real ensemble
(the ``backend`` fixture of tests/contract/conftest.py): election and fencing, and the
reads and watches the controller relies on.  The fenced writes are in
test_controller_state_writes.py.

Whatever the controller's unit tests learn from the fake holds for the real
store only as far as these tests say the two agree.  Each test gets a fresh
namespace (a new FakeZooKeeper, or a new chroot of the session's ensemble).
"""

import pytest

from kafka_ha.model import LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.controller_store import ControllerStore, Election
from kafka_ha.zk.errors import MalformedZnode, ZkNoNode
from kafka_ha.zk.schemas import validate_znode
from kafka_ha.zk.state_writes import ControllerMoved
from tests.harness.cluster import wait_until
from tests.harness.fake_controller_store import (deregister_broker, register_broker, take_over,
                                                 write_topic, write_topic_partitions)

TP = TopicPartition("t", 0)
STATE_PATH = zn.TopicPartitionStateZNode.path(*TP)


class Recorder:
    """A watch that records the paths of the events it is called with."""

    def __init__(self):
        self.events = []

    def __call__(self, event):
        self.events.append((event.type, event.path))

    def wait(self, count):
        return wait_until(lambda: len(self.events) >= count, timeout=10,
                          message=f"expected {count} watch events, got {self.events}")


# ---- election and fencing ------------------------------------------------------------------

def test_election_bumps_epoch_and_writes_kafka_json(backend):
    store, zk = backend.store(1)
    won = store.try_elect()
    assert (won.won, won.epoch, won.controller_id) == (True, 1, 1)
    assert zk.get("/controller_epoch")[0] == b"1"
    assert won.epoch_zk_version == zk.get("/controller_epoch")[1].version == store.epoch_zk_version
    validate_znode("controller", zk.get("/controller")[0])
    assert zk.get("/controller")[1].ephemeralOwner != 0
    other, _ = backend.store(2)
    assert other.try_elect() == election_lost_to(1)
    assert other.controller_id() == store.controller_id() == 1


def election_lost_to(owner):
    return Election(False, owner)


def test_the_next_election_after_a_resignation_bumps_the_epoch_again(backend):
    first, zk = backend.elected(1)
    first.resign(delete_znode=False)
    assert zk.exists("/controller") is not None, "left to expire with the session"
    first.resign(delete_znode=True)
    assert zk.exists("/controller") is None
    first.resign(delete_znode=True)  # already gone
    second, _ = backend.store(2)
    assert second.try_elect().epoch == 2
    first.resign(delete_znode=True)  # not its znode any more: left alone
    assert second.controller_id() == 2


def test_the_controller_znode_of_this_brokers_previous_process_is_deleted(backend):
    """A broker killed and started again at once: its previous process's session still
    holds /controller; once the new process has registered, that znode is its to delete."""
    backend.elected(1)  # the previous process, killed: its session has not expired yet
    other, _ = backend.store(2)
    restarted, zk = backend.store(1)
    assert restarted.delete_controller_of_previous_process() is False, "not registered yet"
    register_broker(zk, 1)
    assert other.delete_controller_of_previous_process() is False, "it names broker 1"
    assert restarted.delete_controller_of_previous_process() is True
    assert zk.exists("/controller") is None
    assert restarted.try_elect().won
    assert restarted.delete_controller_of_previous_process() is False, "its own session's"


def test_controller_id_reports_missing_and_malformed_and_its_watch_fires_on_create(backend):
    store, zk = backend.store(1)
    watch = Recorder()
    assert store.controller_id(watch=watch) is None
    zk.create("/controller", b"not json", ephemeral=True)
    watch.wait(1)
    assert watch.events == [("CREATED", "/controller")]
    assert store.controller_id() == -1
    assert store.try_elect() == election_lost_to(-1)
    zk.set("/controller", b"7")  # the pre-JSON form
    assert store.controller_id() == 7
    assert store.try_elect() == election_lost_to(7)


def test_every_write_of_a_deposed_controller_is_fenced_and_lands_nowhere(backend):
    a, zk_a = backend.elected(1)
    created = a.create_states({TP: LeaderAndIsr(1, 0, (1, 2), 1)})
    zk_a.create("/admin/reassign_partitions", azn.ReassignPartitionsZNode.encode({TP: (1, 2)}))
    # A loses /controller (as on session expiry) and B takes over at epoch 2.
    zk_a.delete("/controller")
    b, _ = backend.store(2)
    assert b.try_elect().epoch == 2
    stale = created.written[TP]
    before = {path: zk_a.get(path) for path in (STATE_PATH, "/brokers/topics/t",
                                                "/admin/reassign_partitions")}
    with pytest.raises(ControllerMoved):
        a.update_states({TP: LeaderAndIsr(2, 1, (2,), 1, stale.zk_version)})
    with pytest.raises(ControllerMoved):
        a.create_states({TopicPartition("t", 1): LeaderAndIsr(1, 0, (1,), 1)})
    with pytest.raises(ControllerMoved):
        a.write_assignment("t", {0: (1, 2)})
    with pytest.raises(ControllerMoved):
        a.fenced_set("/admin/reassign_partitions", b"{}")
    with pytest.raises(ControllerMoved):
        a.fenced_delete("/admin/reassign_partitions")
    assert {path: zk_a.get(path) for path in before} == before, "no zombie write may land"
    assert zk_a.exists(zn.TopicPartitionZNode.path("t", 1)) is None
    assert b.update_states({TP: LeaderAndIsr(2, 1, (2,), 2, stale.zk_version)}).written


def test_a_store_that_resigned_writes_nothing_until_it_wins_again(backend):
    """The fence belongs to the term: with nobody elected since, the epoch's version is
    unchanged, and a write the resigned store let through would land."""
    store, zk = backend.elected(1)
    store.resign(delete_znode=True)
    with pytest.raises(ControllerMoved):
        store.create_states({TP: LeaderAndIsr(1, 0, (1,), 1)})
    with pytest.raises(ControllerMoved):
        store.fenced_set("/brokers/topics/t", zn.TopicZNode.encode(TopicAssignment("t", {0: (1,)})))
    assert zk.exists(STATE_PATH) is None
    assert zn.TopicZNode.decode(zk.get("/brokers/topics/t")[0], "/brokers/topics/t").partitions == {
        0: (1, 2, 3)}
    assert store.try_elect().epoch == 2
    assert store.create_states({TP: LeaderAndIsr(1, 0, (1,), 2)}).written


def test_another_controller_taking_over_deposes_the_store(backend):
    a, _ = backend.elected(1)
    assert take_over(backend.client(), 3) == 2
    with pytest.raises(ControllerMoved):
        a.create_states({TP: LeaderAndIsr(1, 0, (1,), 1)})
    assert a.controller_id() == 3


# ---- other reads ---------------------------------------------------------------------------

def test_live_brokers_skip_malformed_registrations_and_a_bounce_changes_the_epoch(backend):
    store, _ = backend.store(1)
    broker_2, broker_3 = backend.client(), backend.client()
    watch = Recorder()
    assert store.live_brokers(watch=watch) == {}
    register_broker(broker_2, 2)
    watch.wait(1)
    assert watch.events == [("CHILD", "/brokers/ids")]
    broker_3.create("/brokers/ids/3", b'{"version": 4}', ephemeral=True)
    broker_3.create("/brokers/ids/not-a-broker", b"", ephemeral=True)
    live = store.live_brokers()
    assert list(live) == [2] and (live[2].host, live[2].port) == ("127.0.0.1", 9002)
    deregister_broker(broker_2, 2)
    register_broker(broker_2, 2)
    assert store.live_brokers()[2].epoch > live[2].epoch, "a new registration has a new czxid"


def test_topics_and_assignments(backend):
    store, zk = backend.store(1)
    write_topic(zk, "u", {1: (2, 3), 0: (1, 2)})
    zk.create("/brokers/topics/bad", b'{"partitions": {}}')
    assert sorted(store.topics()) == ["bad", "t", "u"]
    watched = []
    got = store.topic_assignments(["u", "bad", "gone"], watch_for=lambda t: watched.append(t) or Recorder())
    assert got["u"].partitions == {0: (1, 2), 1: (2, 3)}
    assert got["u"].zk_version == zk.get("/brokers/topics/u")[1].version
    assert got["bad"] is None and got["gone"] is None
    assert sorted(watched) == ["bad", "gone", "u"]


def test_an_assignment_watch_fires_once_on_change(backend):
    store, zk = backend.store(1)
    first, second = Recorder(), Recorder()
    store.topic_assignments(["t"], watch_for=lambda t: first)
    write_topic_partitions(zk, "t", {0: (1, 2)})
    first.wait(1)
    write_topic_partitions(zk, "t", {0: (1, 2, 3)})  # the first watch is spent: no event
    store.topic_assignments(["t"], watch_for=lambda t: second)
    zk.delete("/brokers/topics/t", recursive=True)
    second.wait(1)  # events come in order, so a second one for the first watch came before
    assert first.events == [("CHANGED", "/brokers/topics/t")]
    assert second.events == [("DELETED", "/brokers/topics/t")]


def test_topic_configs_missing_and_malformed_read_as_no_overrides(backend):
    store, zk = backend.store(1)
    zk.create("/config/topics/t", azn.TopicConfigZNode.encode({"retention.ms": "1"}))
    zk.create("/config/topics/bad", b'{"config": {"retention.ms": 1}}')
    assert store.topic_configs(["t", "bad", "gone"]) == {
        "t": {"retention.ms": "1"}, "bad": {}, "gone": {}}


def test_isr_change_notifications_oldest_first(backend):
    store, zk = backend.store(1)
    watch = Recorder()
    assert store.isr_change_notifications(watch=watch) == []
    prefix = azn.IsrChangeNotificationZNode.PREFIX
    first = zk.create(prefix, azn.IsrChangeNotificationZNode.encode([TP]), sequence=True)
    watch.wait(1)
    second = zk.create(prefix, b"garbage", sequence=True)
    third = zk.create(prefix, azn.IsrChangeNotificationZNode.encode([TopicPartition("t", 1)]),
                      sequence=True)
    zk.create("/isr_change_notification/other", b"")
    paths = store.isr_change_notifications()
    assert paths == [first, second, third]
    assert store.read_isr_change_notifications(paths + [prefix + "9999999999"]) == {
        TP, TopicPartition("t", 1)}


def test_many_znodes_are_deleted_fenced_in_few_round_trips(backend):
    # The controller deletes every ISR change notification it read, and all of a deleted
    # topic's znodes: a round trip each would hold its event queue that many round trips.
    store, zk = backend.elected(1)
    prefix = azn.IsrChangeNotificationZNode.PREFIX
    paths = [zk.create(prefix, azn.IsrChangeNotificationZNode.encode([TP]), sequence=True)
             for _ in range(1200)]
    zk.delete(paths[500])                              # gone already: skipped, not an error
    transactions = []
    if isinstance(store, ControllerStore):             # the fake has no round trips to count
        real = store.zk.transaction
        store.zk.transaction = lambda: transactions.append(1) or real()
    assert store.fenced_delete_all(paths) == 1199
    assert len(transactions) <= 3, "two multis, and the first again without the missing znode"
    assert store.isr_change_notifications() == []
    assert store.fenced_delete_all([]) == 0
    zk.delete("/controller")
    other, _ = backend.store(2)
    assert other.try_elect().epoch == 2
    left = zk.create(prefix, b"", sequence=True)
    with pytest.raises(ControllerMoved):
        store.fenced_delete_all([left])
    assert zk.exists(left) is not None


def test_admin_znodes(backend):
    store, zk = backend.elected(1)
    path = azn.ReassignPartitionsZNode.PATH
    decode = azn.ReassignPartitionsZNode.decode
    watch = Recorder()
    assert store.read_admin_znode(path, decode, watch=watch) == (None, -1)
    zk.create(path, azn.ReassignPartitionsZNode.encode({TP: (2, 3)}))
    watch.wait(1)
    assert watch.events == [("CREATED", path)]
    assert store.read_admin_znode(path, decode) == ({TP: (2, 3)}, 0)
    store.fenced_set(path, b"[]")
    with pytest.raises(MalformedZnode):
        store.read_admin_znode(path, decode)
    assert store.fenced_delete(path) is True
    assert store.fenced_delete(path) is False, "already gone"
    with pytest.raises(ZkNoNode):
        store.fenced_set(path, b"{}")
    zk.create("/admin/delete_topics/t", b"")
    assert store.deletion_markers() == ["t"]


def test_write_assignment_rewrites_the_topic(backend):
    store, zk = backend.elected(1)
    store.write_assignment("t", {0: (4, 5), 1: (5, 4)})
    data = zk.get("/brokers/topics/t")[0]
    validate_znode("topic_assignment", data)
    assert zn.TopicZNode.decode(data, "/brokers/topics/t").partitions == {0: (4, 5), 1: (5, 4)}
