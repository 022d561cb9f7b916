"""Partition reassignment (kafka_ha/controller/reassignment.py) driven through
``/admin/reassign_partitions`` against the fake store."""

import logging

from gevent.event import AsyncResult

from kafka_ha.controller import events as ev
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from tests.harness.controller_driver import ControllerUnderTest, new_cluster, states
from tests.harness.fake_controller_store import change_isr

TP = TopicPartition("t", 0)
PATH = azn.ReassignPartitionsZNode.PATH


def request_reassignment(zk, plan):
    zk.client().create(PATH, azn.ReassignPartitionsZNode.encode(plan))


def assignment(zk, topic="t"):
    path = zn.TopicZNode.path(topic)
    return zn.TopicZNode.decode(zk.client().get(path)[0], path).partitions


def controlled_shutdown(controller, broker_id):
    reply = AsyncResult()
    controller.handle(ev.ControlledShutdownRequest(broker_id, reply))
    return reply.get(block=False)


def test_a_reassignment_waits_while_none_of_the_new_replicas_can_lead(caplog):
    """Defect 7: with every new replica shutting down, finishing would leave the partition
    led by a broker outside its new replicas, and delete the old ones."""
    zk, brokers, controller = new_cluster((1, 2, 3, 4, 5), {"t": {0: (1, 2, 3)}})
    controlled_shutdown(controller, 4)
    controlled_shutdown(controller, 5)
    request_reassignment(zk, {TP: (4, 5)})
    controller.run_pending()
    assert assignment(zk) == {0: (1, 2, 3, 4, 5)}, "the reassignment starts: AR = OAR + RAR"
    with caplog.at_level(logging.INFO, logger="kafka_ha.controller"):
        change_isr(zk.client(), TP, (1, 2, 3, 4, 5))  # the new replicas caught up
        controller.run_pending()
    state = states(zk, "t", [0])[0]
    assert assignment(zk) == {0: (1, 2, 3, 4, 5)}, "must not finish yet"
    assert state.leader == 1 and state.isr == (1, 2, 3, 4, 5)
    assert not controller.channel.sent(ApiKey.STOP_REPLICA), "the old replicas must stay"
    assert TP in azn.ReassignPartitionsZNode.decode(zk.client().get(PATH)[0])
    assert "none of the new replicas [4, 5] can lead" in caplog.text
    # Broker 4 restarts (no longer shutting down) and catches up: now it finishes.
    brokers.kill(4)
    controller.run_pending()
    brokers.start(4)
    controller.run_pending()
    change_isr(zk.client(), TP, (1, 2, 3, 5, 4))
    controller.run_pending()
    state = states(zk, "t", [0])[0]
    assert assignment(zk) == {0: (4, 5)}
    assert state.leader == 4 and set(state.isr) == {4, 5}
    assert zk.client().exists(PATH) is None
    assert {r.broker_id for r in controller.channel.sent(ApiKey.STOP_REPLICA)} == {1, 2, 3}


def test_a_reassignment_moves_a_partition_to_its_new_replicas():
    zk, brokers, controller = new_cluster((1, 2, 3, 4), {"t": {0: (1, 2, 3), 1: (1, 2)}})
    request_reassignment(zk, {TP: (4, 2, 3)})
    controller.run_pending()
    assert assignment(zk) == {0: (1, 2, 3, 4), 1: (1, 2)}
    started = states(zk, "t", [0])[0]
    assert (started.leader, started.leader_epoch) == (1, 1)
    assert controller.channel.leader_and_isr(4)[TP].replicas == (1, 2, 3, 4)
    change_isr(zk.client(), TP, (1, 2, 3, 4))  # the new replica caught up
    controller.run_pending()
    done = states(zk, "t", [0])[0]
    assert assignment(zk) == {0: (4, 2, 3), 1: (1, 2)}
    assert done.leader == 4 and set(done.isr) == {2, 3, 4}
    stops = controller.channel.sent(ApiKey.STOP_REPLICA)
    assert [(r.broker_id, r.body["delete_partitions"]) for r in stops] == [(1, True)]
    assert zk.client().exists(PATH) is None
    assert TP not in controller.ctx.reassignments


def test_only_the_finished_partitions_leave_the_request():
    zk, _, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2), 1: (1, 2)}})
    request_reassignment(zk, {TP: (3, 2), TopicPartition("t", 1): (3, 1)})
    controller.run_pending()
    change_isr(zk.client(), TP, (1, 2, 3))
    controller.run_pending()
    assert azn.ReassignPartitionsZNode.decode(zk.client().get(PATH)[0]) == {
        TopicPartition("t", 1): (3, 1)}


def test_bad_reassignments_are_rejected_and_removed(caplog):
    zk, _, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    with caplog.at_level(logging.ERROR, logger="kafka_ha.controller"):
        request_reassignment(zk, {TopicPartition("nope", 0): (1,), TopicPartition("t", 5): (1,),
                                  TP: (1, 2)})
        controller.run_pending()
    assert zk.client().exists(PATH) is None
    assert "topic nope doesn't exist" in caplog.text
    assert "the partition doesn't exist" in caplog.text
    assert "it equals the current assignment" in caplog.text
    assert controller.ctx.reassignments == {}


def test_a_malformed_reassignment_request_is_removed():
    zk, _, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    zk.client().create(PATH, b'{"partitions": [{"topic": "t"}]}')
    controller.run_pending()
    assert zk.client().exists(PATH) is None


def test_a_reassignment_waits_for_its_new_brokers_to_register():
    zk, brokers, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    request_reassignment(zk, {TP: (2, 5)})
    controller.run_pending()
    assert assignment(zk) == {0: (1, 2)}, "not started before broker 5 registers"
    brokers.start(5)
    controller.run_pending()
    assert assignment(zk) == {0: (1, 2, 5)}


def test_a_new_controller_resumes_a_reassignment_in_progress():
    zk, brokers, first = new_cluster((1, 2, 3), {"t": {0: (1, 2)}})
    request_reassignment(zk, {TP: (3, 2)})
    first.run_pending()
    assert assignment(zk) == {0: (1, 2, 3)}
    first.shutdown()
    second = ControllerUnderTest(zk, 2)
    brokers.kill(2)  # broker 2 restarts with its controller
    second.start()
    second.run_pending()
    assert second.controller.active and TP in second.ctx.reassignments
    change_isr(zk.client(), TP, (1, 3, 2))
    second.run_pending()
    assert assignment(zk) == {0: (3, 2)}


def test_deletion_of_a_topic_waits_for_its_reassignment():
    zk, _, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2)}})
    request_reassignment(zk, {TP: (3, 2)})
    controller.run_pending()
    zk.client().create(azn.DeleteTopicZNode.path("t"), b"")
    controller.run_pending()
    assert not controller.channel.sent(ApiKey.STOP_REPLICA)
    change_isr(zk.client(), TP, (1, 2, 3))
    controller.run_pending()
    assert {r.broker_id for r in controller.channel.sent(ApiKey.STOP_REPLICA)} == {1, 2, 3}
    controller.channel.answer_stop_replicas()
    controller.run_pending()
    assert zk.client().exists("/brokers/topics/t") is None


def test_a_cancel_reverts_a_started_reassignment_to_its_origin():
    """KIP-455's cancel: the target becomes the replicas from before the move; the added
    replica is stopped and deleted and the partition is back where it was."""
    zk, _, controller = new_cluster((1, 2, 3, 4), {"t": {0: (1, 2, 3)}})
    request_reassignment(zk, {TP: (4, 2, 3)})
    controller.run_pending()
    assert assignment(zk) == {0: (1, 2, 3, 4)}, "started: AR = OAR + RAR"
    zk.client().set(PATH, azn.ReassignPartitionsZNode.encode({TP: (1, 2, 3)}))   # the cancel
    controller.handle(ev.PartitionReassignment())
    controller.run_pending()
    state = states(zk, "t", [0])[0]
    assert assignment(zk) == {0: (1, 2, 3)}
    assert state.leader == 1 and set(state.isr) <= {1, 2, 3}
    stops = controller.channel.sent(ApiKey.STOP_REPLICA)
    assert [(r.broker_id, r.body["delete_partitions"]) for r in stops] == [(4, True)]
    assert zk.client().exists(PATH) is None
    assert TP not in controller.ctx.reassignments


def test_a_cancel_before_the_move_started_drops_it():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2)}})
    request_reassignment(zk, {TP: (3, 9)})      # broker 9 is not registered: it waits
    controller.run_pending()
    assert TP in controller.ctx.reassignments and assignment(zk) == {0: (1, 2)}
    zk.client().set(PATH, azn.ReassignPartitionsZNode.encode({TP: (1, 2)}))
    controller.handle(ev.PartitionReassignment())
    controller.run_pending()
    assert TP not in controller.ctx.reassignments
    assert zk.client().exists(PATH) is None
    assert assignment(zk) == {0: (1, 2)}
