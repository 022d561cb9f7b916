"""The controller store's contract, run twice: against the in-memory fake
(tests/harness/fake_controller_store.py) and against ControllerStore on the real ensemble.

Whatever the controller's unit tests learn from the fake holds for the real
store only as far as these tests say the two agree.  Each test gets a fresh
namespace (a new FakeZooKeeper, or a new chroot of the session's ensemble).
"""

import uuid
from dataclasses import dataclass
from typing import Callable

import pytest
from kazoo.client import KazooClient

from kafka_ha.controller import election
from kafka_ha.controller.context import ControllerContext
from kafka_ha.controller.partition_state_machine import PartitionStateMachine
from kafka_ha.controller.request_batch import RequestBatch
from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.controller_store import ControllerStore, Election
from kafka_ha.zk.errors import MalformedZnode, ZkNoNode
from kafka_ha.zk.schemas import validate_znode
from kafka_ha.zk.state_writes import ControllerMoved
from tests.harness.cluster import wait_until
from tests.harness.fake_controller_store import (FakeControllerStore, deregister_broker,
                                                 prepare_namespace, read_state, register_broker,
                                                 take_over, write_state, write_topic)
from tests.harness.fake_zookeeper import FakeZooKeeper

TP = TopicPartition("t", 0)
STATE_PATH = zn.TopicPartitionStateZNode.path(*TP)


@dataclass
class Backend:
    """``client()`` opens a session on the test's namespace; ``store(broker_id)`` returns a
    store of that broker on a session of its own, with that session's raw client."""

    name: str
    client: Callable[[], object]
    make_store: Callable[[object, int], object]

    def store(self, broker_id: int = 1):
        zk = self.client()
        return self.make_store(zk, broker_id), zk


@pytest.fixture(params=["fake", "zookeeper"])
def backend(request):
    if request.param == "fake":
        fake = FakeZooKeeper()
        backend = Backend("fake", fake.client, FakeControllerStore)
        prepare_namespace(backend.client())
        write_topic(backend.client(), "t", {0: (1, 2, 3)})
        yield backend
        return
    ensemble = request.getfixturevalue("zk_ensemble")
    chroot = f"/store-{uuid.uuid4().hex[:10]}"
    # Every session of a test talks to the same server: a server answers reads from its
    # own copy, so a session on another server could read a write before it arrived there.
    server = ensemble.connect_string.split(",")[0]
    clients = []

    def client():
        zk = KazooClient(hosts=server + chroot, timeout=10)
        zk.start(timeout=30)
        clients.append(zk)
        return zk

    root = KazooClient(hosts=ensemble.connect_string, timeout=10)
    root.start(timeout=30)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    backend = Backend("zookeeper", client, ControllerStore)
    prepare_namespace(backend.client())
    write_topic(backend.client(), "t", {0: (1, 2, 3)})
    yield backend
    for zk in clients:
        zk.stop()
        zk.close()


def elected(backend, broker_id=1):
    store, zk = backend.store(broker_id)
    assert store.try_elect().won
    return store, zk


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
    first, zk = elected(backend, 1)
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
    elected(backend, 1)  # the previous process, killed: its session has not expired yet
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
    a, zk_a = elected(backend, 1)
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
    store, zk = elected(backend, 1)
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
    a, _ = elected(backend, 1)
    assert take_over(backend.client(), 3) == 2
    with pytest.raises(ControllerMoved):
        a.create_states({TP: LeaderAndIsr(1, 0, (1,), 1)})
    assert a.controller_id() == 3


# ---- partition states --------------------------------------------------------------------

def test_create_states_makes_the_parents_and_reports_an_existing_state_as_a_conflict(backend):
    store, zk = elected(backend, 1)
    write_topic(zk, "u", {0: (1,), 1: (1,)})
    result = store.create_states({TP: LeaderAndIsr(1, 0, (1, 2), 1),
                                  TopicPartition("u", 1): LeaderAndIsr(1, 0, (1,), 1)})
    assert result.written == {TP: LeaderAndIsr(1, 0, (1, 2), 1, 0),
                              TopicPartition("u", 1): LeaderAndIsr(1, 0, (1,), 1, 0)}
    validate_znode("partition_state", zk.get(STATE_PATH)[0])
    assert zk.get_children("/brokers/topics/u/partitions") == ["1"]
    again = store.create_states({TP: LeaderAndIsr(2, 0, (2,), 1),
                                 TopicPartition("u", 0): LeaderAndIsr(1, 0, (1,), 1)})
    assert again.conflicts == [TP] and not again.failed
    assert again.written == {TopicPartition("u", 0): LeaderAndIsr(1, 0, (1,), 1, 0)}
    assert read_state(zk, TP).leader == 1, "an existing state is left as it is"


def test_a_state_of_a_topic_that_is_gone_is_a_conflict(backend):
    store, _ = elected(backend, 1)
    result = store.create_states({TopicPartition("gone", 0): LeaderAndIsr(1, 0, (1,), 1)})
    assert result.conflicts == [TopicPartition("gone", 0)] and not result.written


def test_conditional_updates_and_checks(backend):
    store, zk = elected(backend, 1)
    written = store.create_states({TP: LeaderAndIsr(1, 0, (1, 2, 3), 1)}).written[TP]
    tp1 = TopicPartition("t", 1)
    write_topic_partitions(zk, "t", {0: (1, 2, 3), 1: (1, 2)})
    other = store.create_states({tp1: LeaderAndIsr(1, 0, (1, 2), 1)}).written[tp1]
    # A passing check reports the partition as written at the version it checked.
    ok = store.collect([store.submit_updates({}, checks={TP: written})])
    assert ok.written == {TP: written} and not ok.conflicts
    write_state(zk, TP, LeaderAndIsr(1, 0, (1, 2), 1))  # a leader shrinks the ISR
    result = store.collect([store.submit_updates({tp1: LeaderAndIsr(2, 1, (2,), 1, other.zk_version)},
                                                 checks={TP: written})])
    assert result.conflicts == [TP], "a stale check is a conflict"
    assert result.written == {tp1: LeaderAndIsr(2, 1, (2,), 1, other.zk_version + 1)}
    stale = store.update_states({tp1: LeaderAndIsr(1, 2, (1,), 1, other.zk_version)})
    assert stale.conflicts == [tp1] and not stale.written
    missing = store.update_states({TopicPartition("t", 9): LeaderAndIsr(1, 1, (1,), 1, 0)})
    assert missing.conflicts == [TopicPartition("t", 9)]
    states = store.partition_states([TP, tp1, TopicPartition("t", 9)])
    assert states[TP] == LeaderAndIsr(1, 0, (1, 2), 1, written.zk_version + 1)
    assert states[tp1].leader == 2 and states[TopicPartition("t", 9)] is None


def write_topic_partitions(zk, topic, partitions):
    zk.set(zn.TopicZNode.path(topic), zn.TopicZNode.encode(TopicAssignment(topic, partitions)))


def test_a_malformed_state_is_returned_as_the_error(backend):
    store, zk = elected(backend, 1)
    store.create_states({TP: LeaderAndIsr(1, 0, (1,), 1)})
    zk.set(STATE_PATH, b'{"leader": "one"}')
    got = store.partition_states([TP])[TP]
    assert isinstance(got, MalformedZnode) and got.path == STATE_PATH


def test_batches_larger_than_one_multi(backend):
    store, zk = elected(backend, 1)
    for i in range(7):
        write_topic(zk, f"t{i}", {0: (1,)})
    epoch = 1
    creates = {TopicPartition(f"t{i % 7}", i): LeaderAndIsr(1, 0, (1, 2), epoch) for i in range(2500)}
    result = store.create_states(creates)
    assert len(result.written) == 2500 and not result.conflicts and not result.failed
    # One partition changed underneath: only it conflicts, the rest of its multi is retried.
    victim = TopicPartition("t3", 3)
    write_state(zk, victim, creates[victim])
    updates = {tp: LeaderAndIsr(2, 1, (2,), epoch, 0) for tp in creates}
    result = store.update_states(updates)
    assert result.conflicts == [victim]
    assert len(result.written) == 2499
    loaded = store.partition_states(list(creates) + [TopicPartition("missing", 0)])
    assert loaded[TopicPartition("missing", 0)] is None
    assert loaded[victim].leader == 1 and loaded[TopicPartition("t0", 0)].leader == 2


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


def test_admin_znodes(backend):
    store, zk = elected(backend, 1)
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
    store, zk = elected(backend, 1)
    store.write_assignment("t", {0: (4, 5), 1: (5, 4)})
    data = zk.get("/brokers/topics/t")[0]
    validate_znode("topic_assignment", data)
    assert zn.TopicZNode.decode(data, "/brokers/topics/t").partitions == {0: (4, 5), 1: (5, 4)}


# ---- topic deletion (defect 12: fenced) ----------------------------------------------------

def test_delete_topic_znodes_removes_assignment_states_config_and_marker(backend):
    store, zk = elected(backend, 1)
    store.create_states({TP: LeaderAndIsr(1, 0, (1,), 1)})
    zk.create("/config/topics/t", azn.TopicConfigZNode.encode({}))
    zk.create("/admin/delete_topics/t", b"")
    store.delete_topic_znodes("t")
    for path in ("/brokers/topics/t", "/config/topics/t", "/admin/delete_topics/t"):
        assert zk.exists(path) is None, path
    store.delete_topic_znodes("t")  # already gone: nothing to do, no error


def test_deleting_a_topic_larger_than_one_multi(backend):
    store, zk = elected(backend, 1)
    partitions = {p: (1,) for p in range(600)}  # 1,201 znodes under the topic
    write_topic(zk, "wide", partitions)
    created = store.create_states({TopicPartition("wide", p): LeaderAndIsr(1, 0, (1,), 1)
                                   for p in partitions})
    assert len(created.written) == 600
    store.delete_topic_znodes("wide")
    assert zk.exists("/brokers/topics/wide") is None


def test_a_deposed_store_deletes_no_topic_znode(backend):
    store, zk = elected(backend, 1)
    store.create_states({TP: LeaderAndIsr(1, 0, (1,), 1)})
    zk.create("/config/topics/t", azn.TopicConfigZNode.encode({}))
    zk.create("/admin/delete_topics/t", b"")
    take_over(backend.client(), 2)
    with pytest.raises(ControllerMoved):
        store.delete_topic_znodes("t")
    for path in (STATE_PATH, "/brokers/topics/t", "/config/topics/t", "/admin/delete_topics/t"):
        assert zk.exists(path) is not None, f"a deposed controller deleted {path}"


# ---- the partition state machine on each store ---------------------------------------------

def machine(store, epoch, live):
    ctx = ControllerContext()
    ctx.set_assignment(TP, (1, 2, 3))
    ctx.live_brokers = {b: BrokerInfo(b, "h", 1) for b in live}
    return ctx, PartitionStateMachine(ctx, store, 1, epoch)


def test_conflicting_write_between_read_and_write_is_redecided(backend):
    store, _ = elected(backend, 1)
    intruder = backend.client()
    epoch = 1
    ctx, psm = machine(store, epoch, (2, 3))
    ctx.states[TP] = store.create_states({TP: LeaderAndIsr(1, 0, (1, 2, 3), epoch)}).written[TP]
    calls = []

    def decide(tp, current):
        calls.append(current)
        if len(calls) == 1:
            # Between the controller's read and its write, the leader drops 2 from the ISR.
            write_state(intruder, TP, LeaderAndIsr(1, 0, (1, 3), epoch))
        return election.on_brokers_changed(current, ctx.assignments[tp], {2, 3}, False, epoch)

    changed = psm.change([TP], decide, RequestBatch(1, epoch, {}))
    assert len(calls) == 2, "the conflict must be re-read and decided again"
    assert calls[1].isr == (1, 3)
    final = read_state(intruder, TP)
    assert (final.leader, final.isr, final.leader_epoch) == (3, (3,), 1)
    assert changed[TP].same_content(final)
    assert psm.zk_writes == 2


def test_lost_reply_with_identical_data_counts_as_written(backend):
    """KAFKA-1382: a BadVersion whose stored data equals ours means our write went through."""
    store, _ = elected(backend, 1)
    intruder = backend.client()
    epoch = 1
    ctx, psm = machine(store, epoch, (2,))
    ctx.set_assignment(TP, (1, 2))
    ctx.states[TP] = store.create_states({TP: LeaderAndIsr(1, 0, (1, 2), epoch)}).written[TP]
    outcome = election.on_brokers_changed(ctx.states[TP], (1, 2), {2}, False, epoch)
    write_state(intruder, TP, outcome.decision)

    changed = psm.change([TP], lambda tp, cur: outcome, RequestBatch(1, epoch, {}))
    assert changed[TP].same_content(outcome.decision)
    assert ctx.states[TP].zk_version == read_state(intruder, TP).zk_version
