"""Topic changes, ISR notifications, preferred elections and topic deletion
(kafka_ha/controller/controller.py, leader_balancing.py, topic_deletion.py) on the fake store."""

from kafka_ha.controller import events as ev
from kafka_ha.model import LEADER_DURING_DELETE, LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from tests.harness.controller_driver import new_cluster, states
from tests.harness.fake_controller_store import change_isr, read_state, take_over, write_topic

TP = TopicPartition("t", 0)


def test_a_new_topic_comes_online_and_its_brokers_learn_their_roles():
    zk, _, controller = new_cluster((1, 2, 3))
    controller.channel.clear()
    write_topic(zk.client(), "new", {0: (3, 2), 1: (2, 1)})
    controller.run_pending()
    assert states(zk, "new", [0, 1]) == {0: LeaderAndIsr(3, 0, (3, 2), 1, 0),
                                         1: LeaderAndIsr(2, 0, (2, 1), 1, 0)}
    assert set(controller.channel.leader_and_isr(2)) == {TopicPartition("new", 0),
                                                         TopicPartition("new", 1)}
    assert controller.ctx.topics == {"new"}


def test_a_topic_with_a_state_left_by_an_earlier_controller_keeps_it():
    zk, _, controller = new_cluster((1, 2))
    admin = zk.client()
    old = LeaderAndIsr(2, 7, (2, 1), 1)
    admin.create(zn.TopicPartitionStateZNode.path("old", 0),
                 zn.TopicPartitionStateZNode.encode(old), makepath=True)
    write_topic_over(admin, "old", {0: (1, 2)})
    controller.run_pending()
    assert states(zk, "old", [0])[0].same_content(old)
    assert controller.channel.leader_and_isr(1)[TopicPartition("old", 0)].leader_epoch == 7


def write_topic_over(zk, topic, partitions):
    """Rewrite an existing topic's assignment (its znode exists: a state was made under it)."""
    zk.set(zn.TopicZNode.path(topic), zn.TopicZNode.encode(TopicAssignment(topic, partitions)))


def test_added_partitions_come_online_and_a_deleted_topic_is_forgotten():
    zk, _, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    write_topic_over(zk.client(), "t", {0: (1, 2), 1: (2, 1)})
    controller.run_pending()
    assert states(zk, "t", [1])[1] == LeaderAndIsr(2, 0, (2, 1), 1, 0)
    zk.client().delete("/brokers/topics/t", recursive=True)
    controller.run_pending()
    assert controller.ctx.topics == set() and controller.ctx.states == {}


def test_isr_changes_reach_every_broker_and_their_notifications_are_removed():
    zk, _, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2, 3)}})
    controller.channel.clear()
    change_isr(zk.client(), TP, (1, 2))
    controller.run_pending()
    assert controller.ctx.states[TP].isr == (1, 2)
    for broker in (1, 2, 3):
        sent = [s for r in controller.channel.sent(ApiKey.UPDATE_METADATA, broker)
                for s in r.body["partition_states"]]
        assert [(s["partition"], s["isr"]) for s in sent] == [(0, [1, 2])]
    assert zk.client().get_children("/isr_change_notification") == []


def test_a_preferred_election_request_moves_leaders_back_and_is_removed():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3), 1: (3, 1, 2)}})
    brokers.kill(2)
    controller.run_pending()
    brokers.start(2)
    controller.run_pending()
    change_isr(zk.client(), TP, (1, 3, 2))
    controller.run_pending()
    admin = zk.client()
    admin.create(azn.PreferredReplicaElectionZNode.PATH, azn.PreferredReplicaElectionZNode.encode(
        [TP, TopicPartition("t", 1), TopicPartition("nope", 0)]))
    controller.run_pending()
    assert states(zk, "t", [0, 1]) == {0: LeaderAndIsr(2, 2, (1, 3, 2), 1, 3),
                                       1: LeaderAndIsr(3, 1, (3, 1), 1, 1)}
    assert admin.exists(azn.PreferredReplicaElectionZNode.PATH) is None


def test_a_malformed_admin_request_is_removed():
    zk, _, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    zk.client().create(azn.PreferredReplicaElectionZNode.PATH, b"{not json")
    controller.run_pending()
    assert zk.client().exists(azn.PreferredReplicaElectionZNode.PATH) is None
    assert controller.controller.active


def test_auto_rebalance_moves_leadership_of_an_imbalanced_broker():
    zk, brokers, controller = new_cluster((1, 2), {"t": {0: (2, 1), 1: (1, 2)}})
    brokers.kill(2)
    controller.run_pending()
    brokers.start(2)
    controller.run_pending()
    change_isr(zk.client(), TP, (1, 2))
    controller.run_pending()
    assert states(zk, "t", [0])[0].leader == 1
    controller.handle(ev.AutoRebalance())
    assert states(zk, "t", [0])[0].leader == 2


# ---- topic deletion -------------------------------------------------------------------

def mark_for_deletion(zk, topic):
    zk.client().create(azn.DeleteTopicZNode.path(topic), b"")


def test_a_marked_topic_is_deleted_once_every_replica_confirms():
    zk, _, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2), 1: (2, 3)}, "keep": {0: (1,)}})
    controller.channel.clear()
    mark_for_deletion(zk, "t")
    controller.run_pending()
    metadata = controller.channel.sent(ApiKey.UPDATE_METADATA, 3)[0].body["partition_states"]
    assert {s["leader"] for s in metadata} == {LEADER_DURING_DELETE}
    assert {r.broker_id for r in controller.channel.sent(ApiKey.STOP_REPLICA)} == {1, 2, 3}
    assert all(r.body["delete_partitions"] for r in controller.channel.sent(ApiKey.STOP_REPLICA))
    assert zk.client().exists("/brokers/topics/t") is not None, "waits for the answers"
    controller.channel.answer_stop_replicas()
    controller.run_pending()
    admin = zk.client()
    assert admin.exists("/brokers/topics/t") is None
    assert admin.exists(azn.DeleteTopicZNode.path("t")) is None
    assert controller.ctx.topics == {"keep"} and controller.ctx.deleting_topics == set()


def test_a_failed_stop_replica_is_sent_again_when_deletion_resumes():
    zk, brokers, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    mark_for_deletion(zk, "t")
    controller.run_pending()
    controller.channel.answer_stop_replicas(ErrorCode.UNKNOWN_SERVER_ERROR)
    controller.run_pending()
    assert zk.client().exists("/brokers/topics/t") is not None
    controller.channel.clear()
    brokers.start(3)  # any broker start-up resumes deletions
    controller.run_pending()
    assert controller.channel.answer_stop_replicas() == 2
    controller.run_pending()
    assert zk.client().exists("/brokers/topics/t") is None


def test_deletion_waits_for_a_dead_replica_to_return():
    zk, brokers, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    brokers.kill(2)
    controller.run_pending()
    controller.channel.clear()
    mark_for_deletion(zk, "t")
    controller.run_pending()
    assert not controller.channel.sent(ApiKey.STOP_REPLICA)
    brokers.start(2)
    controller.run_pending()
    controller.channel.answer_stop_replicas()
    controller.run_pending()
    assert zk.client().exists("/brokers/topics/t") is None


def test_a_broker_dying_mid_deletion_restarts_it_on_its_return():
    zk, brokers, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    mark_for_deletion(zk, "t")
    controller.run_pending()
    brokers.kill(2)
    controller.run_pending()
    controller.channel.answer_stop_replicas()  # broker 1's answer alone is not enough
    controller.run_pending()
    assert zk.client().exists("/brokers/topics/t") is not None
    brokers.start(2)
    controller.run_pending()
    controller.channel.answer_stop_replicas()
    controller.run_pending()
    assert zk.client().exists("/brokers/topics/t") is None


def test_markers_of_unknown_topics_and_with_deletion_disabled_are_removed():
    zk, _, controller = new_cluster((1,), {"t": {0: (1,)}},
                                    config={"delete.topic.enable": False})
    mark_for_deletion(zk, "unknown")
    mark_for_deletion(zk, "t")
    controller.run_pending()
    assert zk.client().get_children("/admin/delete_topics") == []
    assert zk.client().exists("/brokers/topics/t") is not None


def test_a_deposed_controller_deletes_nothing_of_a_topic_and_resigns():
    zk, _, controller = new_cluster((1, 2), {"t": {0: (1, 2)}})
    mark_for_deletion(zk, "t")
    controller.run_pending()
    take_over(zk.client(), 2)
    controller.channel.answer_stop_replicas()
    controller.run_pending()
    assert read_state(zk.client(), TP) is not None
    assert zk.client().exists(azn.DeleteTopicZNode.path("t")) is not None
    assert not controller.controller.active
