"""ControllerStore and PartitionStateMachine against the real ensemble (no broker processes).

Deterministic versions of the races the system tests provoke with signals: a
zombie controller's write after a takeover, and a writer that changes a state
znode between the controller's read and its write.
"""

import uuid

import pytest
from kazoo.client import KazooClient

from kafka_ha.controller import election
from kafka_ha.controller.context import ControllerContext
from kafka_ha.controller.partition_state_machine import PartitionStateMachine
from kafka_ha.controller.request_batch import RequestBatch
from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicPartition
from kafka_ha.zk import znodes as zn
from kafka_ha.zk.controller_store import ControllerMoved, ControllerStore
from kafka_ha.zk.schemas import validate_znode

TP = TopicPartition("t", 0)


@pytest.fixture
def zk_factory(zk_ensemble):
    chroot = f"/store-{uuid.uuid4().hex[:10]}"
    clients = []

    def make():
        client = KazooClient(hosts=zk_ensemble.connect_string + chroot, timeout=10)
        client.start(timeout=30)
        client.ensure_path("/")
        for t in ("t",) + tuple(f"t{i}" for i in range(7)):
            client.ensure_path(f"/brokers/topics/{t}")  # state znodes live under their topic
        clients.append(client)
        return client

    root = KazooClient(hosts=zk_ensemble.connect_string, timeout=10)
    root.start(timeout=30)
    root.ensure_path(chroot)
    root.stop()
    yield make
    for c in clients:
        c.stop()
        c.close()


def test_election_bumps_epoch_and_writes_kafka_json(zk_factory):
    zk = zk_factory()
    store = ControllerStore(zk, 1)
    won = store.try_elect()
    assert (won.won, won.epoch) == (True, 1)
    assert zk.get("/controller_epoch")[0] == b"1"
    validate_znode("controller", zk.get("/controller")[0])
    assert zn.ControllerZNode.decode(zk.get("/controller")[0]) == 1
    other = ControllerStore(zk_factory(), 2).try_elect()
    assert (other.won, other.controller_id) == (False, 1)


def test_zombie_write_is_fenced_after_takeover(zk_factory):
    zk_a, zk_b = zk_factory(), zk_factory()
    a, b = ControllerStore(zk_a, 1), ControllerStore(zk_b, 2)
    assert a.try_elect().won
    created = a.create_states({TP: LeaderAndIsr(1, 0, (1, 2), 1)})
    assert TP in created.written
    # A loses /controller (as on session expiry) and B takes over at epoch 2.
    zk_a.delete("/controller")
    assert b.try_elect().epoch == 2
    stale = created.written[TP]
    with pytest.raises(ControllerMoved):
        a.update_states({TP: LeaderAndIsr(2, 1, (2,), 1, stale.zk_version)})
    data, stat = zk_a.get(zn.TopicPartitionStateZNode.path(*TP))
    assert stat.version == stale.zk_version, "the zombie's write must not land"
    assert b.update_states({TP: LeaderAndIsr(2, 1, (2,), 2, stale.zk_version)}).written


def test_conflicting_write_between_read_and_write_is_redecided(zk_factory):
    zk, intruder = zk_factory(), zk_factory()
    store = ControllerStore(zk, 1)
    epoch = store.try_elect().epoch
    ctx = ControllerContext()
    ctx.epoch = epoch
    ctx.set_assignment(TP, (1, 2, 3))
    ctx.live_brokers = {b: BrokerInfo(b, "h", 1) for b in (2, 3)}
    created = store.create_states({TP: LeaderAndIsr(1, 0, (1, 2, 3), epoch)})
    ctx.states[TP] = created.written[TP]
    psm = PartitionStateMachine(ctx, store, 1)
    path = zn.TopicPartitionStateZNode.path(*TP)
    calls = []

    def decide(tp, current):
        calls.append(current)
        if len(calls) == 1:
            # Between the controller's read and its write, the leader drops 2 from the ISR.
            intruder.set(path, zn.TopicPartitionStateZNode.encode(LeaderAndIsr(1, 0, (1, 3), epoch)))
        return election.on_brokers_changed(current, ctx.assignments[tp], {2, 3}, False, epoch)

    batch = RequestBatch(1, epoch, {})
    changed = psm.change([TP], decide, batch)
    assert len(calls) == 2, "the conflict must be re-read and decided again"
    assert calls[1].isr == (1, 3)
    final = zn.TopicPartitionStateZNode.decode(zk.get(path)[0], path)
    assert (final.leader, final.isr, final.leader_epoch) == (3, (3,), 1)
    assert changed[TP].same_content(final)
    assert psm.zk_writes == 2


def test_lost_reply_with_identical_data_counts_as_written(zk_factory):
    """KAFKA-1382: a BadVersion whose stored data equals ours means our write went through."""
    zk, intruder = zk_factory(), zk_factory()
    store = ControllerStore(zk, 1)
    epoch = store.try_elect().epoch
    ctx = ControllerContext()
    ctx.epoch = epoch
    ctx.set_assignment(TP, (1, 2))
    ctx.live_brokers = {2: BrokerInfo(2, "h", 1)}
    ctx.states[TP] = store.create_states({TP: LeaderAndIsr(1, 0, (1, 2), epoch)}).written[TP]
    psm = PartitionStateMachine(ctx, store, 1)
    path = zn.TopicPartitionStateZNode.path(*TP)
    outcome = election.on_brokers_changed(ctx.states[TP], (1, 2), {2}, False, epoch)
    intruder.set(path, zn.TopicPartitionStateZNode.encode(outcome.decision))

    changed = psm.change([TP], lambda tp, cur: outcome, RequestBatch(1, epoch, {}))
    assert changed[TP].same_content(outcome.decision)
    assert ctx.states[TP].zk_version == zk.get(path)[1].version


def test_batches_larger_than_one_multi(zk_factory):
    zk = zk_factory()
    store = ControllerStore(zk, 1)
    epoch = store.try_elect().epoch
    creates = {TopicPartition(f"t{i % 7}", i): LeaderAndIsr(1, 0, (1, 2), epoch) for i in range(2500)}
    result = store.create_states(creates)
    assert len(result.written) == 2500 and not result.conflicts and not result.failed
    # One partition changed underneath: only it conflicts, the rest of its multi is retried.
    victim = TopicPartition("t3", 3)
    zk.set(zn.TopicPartitionStateZNode.path(*victim), zn.TopicPartitionStateZNode.encode(creates[victim]))
    updates = {tp: LeaderAndIsr(2, 1, (2,), epoch, 0) for tp in creates}
    result = store.update_states(updates)
    assert result.conflicts == [victim]
    assert len(result.written) == 2499
    loaded = store.partition_states(list(creates) + [TopicPartition("missing", 0)])
    assert loaded[TopicPartition("missing", 0)] is None
    assert loaded[victim].leader == 1 and loaded[TopicPartition("t0", 0)].leader == 2
