"""A controller term (kafka_ha/controller/term.py): what one election starts ends with the
resignation, and the next term starts from ZooKeeper, with the real controller on the fake
store (tests/harness/controller_driver.py)."""

import gevent

from kafka_ha.controller.term import ControllerTerm
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.zk import admin_znodes as azn
from kafka_ha.zk.controller_store import Election
from tests.harness.controller_driver import RecordingChannel, new_cluster
from tests.harness.fake_controller_store import change_isr

TP = TopicPartition("t", 0)


def reelect(zk, controller):
    """An operator deletes ``/controller``: the controller resigns and wins the next election."""
    zk.client().delete("/controller")
    controller.run_pending()
    assert controller.controller.active and len(controller.channels) == 2


def test_a_deletion_left_unanswered_by_one_term_starts_again_in_the_next():
    """The first term's StopReplica requests died with its channel: unless the next term
    sends its own, no answer ever comes and the topic is never deleted."""
    zk, _, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2, 3)}})
    zk.client().create(azn.DeleteTopicZNode.path("t"), b"")
    controller.run_pending()
    assert {r.broker_id for r in controller.channel.sent(ApiKey.STOP_REPLICA)} == {1, 2, 3}
    reelect(zk, controller)
    assert {r.broker_id for r in controller.channel.sent(ApiKey.STOP_REPLICA)} == {1, 2, 3}
    controller.channel.answer_stop_replicas()
    controller.run_pending()
    assert zk.client().exists("/brokers/topics/t") is None


def test_a_reassignment_started_in_one_term_is_started_again_in_the_next():
    """The next term cannot know whether the first one's LeaderAndIsr reached the new
    replicas: it starts the reassignment again, and finishes it as usual."""
    zk, _, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2)}})
    zk.client().create(azn.ReassignPartitionsZNode.PATH, azn.ReassignPartitionsZNode.encode({TP: (3, 2)}))
    controller.run_pending()
    reelect(zk, controller)
    assert controller.channel.leader_and_isr(3)[TP].replicas == (1, 2, 3)
    change_isr(zk.client(), TP, (1, 2, 3))
    controller.run_pending()
    assert {r.broker_id for r in controller.channel.sent(ApiKey.STOP_REPLICA)} == {1}
    assert controller.ctx.reassignments == {}


def test_a_terms_timers_and_channel_stop_when_it_ends():
    """The rebalance timer of a term that ended would queue events for the next one."""
    channel = RecordingChannel()
    term = ControllerTerm(1, Election(True, 1, 3), store=None, channel=channel)
    ticks = []
    term.every(0, 0.001, lambda: ticks.append(term.epoch))
    with gevent.Timeout(10):
        while len(ticks) < 3:
            gevent.sleep(0.001)
    term.end()
    ended_at = len(ticks)
    gevent.sleep(0.05)
    assert len(ticks) == ended_at and channel.stopped
