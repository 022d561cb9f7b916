"""Partition reassignment (kafka_ha/controller/reassignment.py) driven through
``/admin/reassign_partitions`` against the fake store."""

import logging

from gevent.event import AsyncResult

from kafka_ha.controller import events as ev
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from tests.harness.controller_driver import new_cluster, states
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
