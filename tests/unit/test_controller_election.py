"""Controller election, failover and resignation (kafka_ha/controller/controller.py), with the
real controller code on the fake store (tests/harness/controller_driver.py)."""

from gevent.event import AsyncResult

from kafka_ha.controller import events as ev
from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.errors import ZkSessionExpired
from kafka_ha.zk.mapped_client import SessionState
from tests.harness.controller_driver import ControllerUnderTest, FakeBrokers, new_cluster, states
from tests.harness.fake_controller_store import (prepare_namespace, read_state, take_over,
                                                 write_state, write_topic)
from tests.harness.fake_zookeeper import FakeZooKeeper

TP = TopicPartition("t", 0)


def test_the_first_controller_registers_its_broker_and_brings_new_partitions_online():
    zk, _, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3), 1: (3, 2)}})
    assert controller.controller.active and controller.term.epoch == 1
    assert zk.client().get_children("/brokers/ids") == ["1", "2", "3"]
    assert states(zk, "t", [0, 1]) == {0: LeaderAndIsr(2, 0, (2, 1, 3), 1, 0),
                                       1: LeaderAndIsr(3, 0, (3, 2), 1, 0)}
    kinds = [r.api_key for r in controller.channel.requests]
    assert kinds.index(ApiKey.LEADER_AND_ISR) > kinds.index(ApiKey.UPDATE_METADATA), (
        "brokers learn the live set before their roles")
    assert set(controller.channel.leader_and_isr(2)) == {TP, TopicPartition("t", 1)}
    assert set(controller.channel.leader_and_isr(1)) == {TP}


def test_a_partition_without_a_live_replica_stays_new_until_one_registers():
    zk, brokers, controller = new_cluster((1,), {"t": {0: (5,)}})
    assert states(zk, "t", [0]) == {0: None}
    brokers.start(5)
    controller.run_pending()
    assert states(zk, "t", [0])[0] == LeaderAndIsr(5, 0, (5,), 1, 0)


def test_a_second_broker_loses_the_election_and_takes_over_when_the_first_resigns():
    zk, _, first = new_cluster((1,), {"t": {0: (1, 2)}})
    second = ControllerUnderTest(zk, 2).start()  # broker 2 starts
    assert not second.controller.active
    first.shutdown()
    assert not first.controller.active and first.channel.stopped
    second.run_pending()  # its watch on /controller fired
    assert second.controller.active and second.term.epoch == 2
    assert second.ctx.states[TP] == read_state(zk.client(), TP)


def test_a_deposed_controller_resigns_at_its_next_write_and_writes_nothing():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3)}})
    take_over(zk.client(), 3)
    before = read_state(zk.client(), TP)
    brokers.kill(2)
    controller.run_pending()
    assert read_state(zk.client(), TP) == before, "the fenced write must not land"
    assert not controller.controller.active
    assert controller.channel.stopped


def test_a_controller_whose_znode_is_deleted_resigns_and_is_elected_again():
    zk, _, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    first_channel = controller.channel
    zk.client().delete("/controller")
    controller.run_pending()
    assert controller.controller.active and controller.term.epoch == 2
    assert first_channel.stopped and controller.channel is not first_channel


def test_session_expiry_resigns_and_the_new_session_registers_and_elects_again():
    zk, _, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    controller.handle(ev.SessionExpired())
    assert not controller.controller.active
    controller.session.close()  # ZooKeeper removes the old session's ephemerals
    controller.handle(ev.NewSession())
    assert controller.controller.active and controller.term.epoch == 2
    assert "1" in zk.client().get_children("/brokers/ids")


def test_failover_repairs_partitions_whose_brokers_died_without_a_controller():
    zk = FakeZooKeeper()
    admin = zk.client()
    prepare_namespace(admin)
    write_topic(admin, "t", {0: (2, 3, 1)})
    admin.create(zn.TopicPartitionStateZNode.path(*TP),
                 zn.TopicPartitionStateZNode.encode(LeaderAndIsr(2, 4, (2, 3, 1), 1)),
                 makepath=True)
    FakeBrokers(zk).start(3)  # 2 is gone
    controller = ControllerUnderTest(zk, 1).start()
    state = read_state(admin, TP)
    assert (state.leader, state.leader_epoch, state.isr) == (3, 5, (3, 1))
    assert controller.channel.leader_and_isr(3)[TP].leader == 3


def test_failover_sends_update_metadata_before_it_elects_anything():
    """Kafka 2.x's onControllerFailover: every live broker gets UpdateMetadata with the
    states as loaded (the new controller id, the live set) first; the elections for
    brokers that died meanwhile follow.  With 100k partitions the elections take
    seconds, and brokers should not wait that long to learn who the controller is."""
    zk = FakeZooKeeper()
    admin = zk.client()
    prepare_namespace(admin)
    write_topic(admin, "t", {0: (2, 3, 1), 1: (3, 1, 2)})
    admin.create(zn.TopicPartitionStateZNode.path(*TP),
                 zn.TopicPartitionStateZNode.encode(LeaderAndIsr(2, 4, (2, 3, 1), 1)),
                 makepath=True)
    admin.create(zn.TopicPartitionStateZNode.path("t", 1),
                 zn.TopicPartitionStateZNode.encode(LeaderAndIsr(3, 0, (3, 1, 2), 1)),
                 makepath=True)
    FakeBrokers(zk).start(3)  # 2 is gone
    controller = ControllerUnderTest(zk, 1).start()
    first = controller.channel.requests[0]
    assert first.api_key == ApiKey.UPDATE_METADATA
    announced = {(s["topic"], s["partition"]): s["leader"] for s in first.body["partition_states"]}
    assert announced == {("t", 0): 2, ("t", 1): 3}, "the states as loaded, before any election"
    assert controller.channel.leader_and_isr(3)[TP].leader == 3
    later = [r for r in controller.channel.sent(ApiKey.UPDATE_METADATA) if r is not first
             and r.broker_id == first.broker_id]
    assert any(s["leader"] == 3 and (s["topic"], s["partition"]) == ("t", 0)
               for r in later for s in r.body["partition_states"]), "then the elected leader"


def test_failover_skips_a_malformed_state_until_it_is_fixed():
    zk = FakeZooKeeper()
    admin = zk.client()
    prepare_namespace(admin)
    write_topic(admin, "t", {0: (1, 2), 1: (1, 2)})
    admin.create(zn.TopicPartitionStateZNode.path(*TP), b'{"leader": "one"}', makepath=True)
    brokers = FakeBrokers(zk)
    brokers.start(2)
    controller = ControllerUnderTest(zk, 1).start()
    assert controller.ctx.unusable == {TP}
    assert TopicPartition("t", 1) in controller.ctx.states
    write_state(admin, TP, LeaderAndIsr(1, 0, (1, 2), 1))  # an operator repairs it
    brokers.kill(2)
    controller.run_pending()
    assert controller.ctx.unusable == set()
    assert read_state(admin, TP).isr == (1,)


def test_failover_drops_stale_isr_notifications_and_resumes_admin_requests():
    zk = FakeZooKeeper()
    admin = zk.client()
    prepare_namespace(admin)
    write_topic(admin, "t", {0: (1, 2)})
    admin.create(zn.TopicPartitionStateZNode.path(*TP),
                 zn.TopicPartitionStateZNode.encode(LeaderAndIsr(2, 3, (2, 1), 1)), makepath=True)
    admin.create(azn.IsrChangeNotificationZNode.PREFIX, azn.IsrChangeNotificationZNode.encode([TP]),
                 sequence=True)
    admin.create(azn.PreferredReplicaElectionZNode.PATH,
                 azn.PreferredReplicaElectionZNode.encode([TP, TopicPartition("gone", 0)]))
    FakeBrokers(zk).start(2)
    ControllerUnderTest(zk, 1).start()
    assert admin.get_children("/isr_change_notification") == []
    assert read_state(admin, TP).leader == 1, "the pending preferred election was carried out"
    assert admin.exists(azn.PreferredReplicaElectionZNode.PATH) is None


def test_controlled_shutdown_asked_of_a_broker_that_is_not_the_controller():
    zk, _, _ = new_cluster((1,))
    other = ControllerUnderTest(zk, 2).start()
    reply = AsyncResult()
    other.handle(ev.ControlledShutdownRequest(2, reply))
    assert reply.get(block=False)["error_code"] == ErrorCode.NOT_CONTROLLER


def test_a_new_session_handler_cut_short_without_a_further_loss_runs_again():
    """Seen in a 10k-partition failover bench on an overloaded machine: the broker's
    NewSession handling failed with kazoo's "Connection has been closed" (a session
    error) while its new session lived on, so no further NewSession came and the
    broker stayed unregistered for minutes.  The handler must run again then."""
    zk, _, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    controller.controller._session_listener(SessionState.LOST)
    controller.run_pending()
    controller.session.close()  # ZooKeeper removes the old session's ephemerals
    register = controller.controller._register_broker
    failures = []

    def cut_short():
        if not failures:
            failures.append(1)
            raise ZkSessionExpired("Connection has been closed")
        register()
    controller.controller._register_broker = cut_short
    controller.controller._session_listener(SessionState.CONNECTED)
    controller.run_pending()
    assert failures and "1" in zk.client().get_children("/brokers/ids")
