"""The controller's handling of brokers coming, going, bouncing and shutting down, run on the
fake store (tests/harness/controller_driver.py)."""

import re

from gevent.event import AsyncResult

from kafka_ha.controller import events as ev
from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import EncodedOnce, encode_request
from kafka_ha.protocol.partition_states import from_wire
from kafka_ha.zk import admin_znodes as azn
from tests.harness.controller_driver import new_cluster, states
from tests.harness.fake_controller_store import change_isr

TP = TopicPartition("t", 0)


def controlled_shutdown(controller, broker_id, broker_epoch=-1):
    reply = AsyncResult()
    controller.handle(ev.ControlledShutdownRequest(broker_id, reply, broker_epoch))
    return reply.get(block=False)


def request_preferred_election(zk, *tps):
    zk.client().create(azn.PreferredReplicaElectionZNode.PATH,
                       azn.PreferredReplicaElectionZNode.encode(tps))


def test_a_broker_that_bounces_after_its_controlled_shutdown_can_lead_again():
    """Defect 3: the new incarnation of a broker is not shutting down."""
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3)}})
    assert states(zk, "t", [0])[0].leader == 2
    assert controlled_shutdown(controller, 2) == {"error_code": ErrorCode.NONE,
                                                  "remaining_partitions": []}
    moved = states(zk, "t", [0])[0]
    assert moved.leader == 1 and 2 not in moved.isr
    brokers.bounce(2)  # restarted before the controller looked at /brokers/ids again
    controller.run_pending()
    change_isr(zk.client(), TP, (1, 3, 2))  # the restarted broker caught up
    controller.run_pending()
    request_preferred_election(zk, TP)
    controller.run_pending()
    assert states(zk, "t", [0])[0].leader == 2, "the restarted broker must be able to lead"
    assert controller.ctx.shutting_down == set()


def test_a_dead_leader_is_replaced_from_the_isr_and_a_dead_follower_leaves_it():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3), 1: (1, 2)}})
    controller.channel.clear()
    brokers.kill(2)
    controller.run_pending()
    assert states(zk, "t", [0, 1]) == {0: LeaderAndIsr(1, 1, (1, 3), 1, 1),
                                       1: LeaderAndIsr(1, 1, (1,), 1, 1)}
    assert controller.channel.leader_and_isr(3)[TP].leader == 1
    assert not controller.channel.sent(ApiKey.LEADER_AND_ISR, 2), "nothing goes to a dead broker"
    metadata = controller.channel.sent(ApiKey.UPDATE_METADATA, 3)[-1].body
    assert sorted(b["id"] for b in metadata["live_brokers"]) == [1, 3]


def test_brokers_learn_a_broker_died_before_its_partitions_are_re_elected():
    """A client asking for metadata while the controller writes new leaders sees the dead
    broker gone and its partitions without a leader, not a dead leader that it keeps
    dialling (librdkafka drops such a broker and its partitions' new leaders in one step,
    and loses a 1 s metadata round to that race)."""
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3)}})
    controller.channel.clear()
    seen = []
    send = controller.channel.send

    def recording_send(broker_id, api_key, version, body, callback=None):
        seen.append((broker_id, api_key, body, states(zk, "t", [0])[0].leader))
        return send(broker_id, api_key, version, body, callback)
    controller.channel.send = recording_send
    brokers.kill(2)
    controller.run_pending()
    to_3 = [(key, body, leader) for b, key, body, leader in seen if b == 3]
    key, body, leader_in_zk = to_3[0]
    assert key == ApiKey.UPDATE_METADATA and leader_in_zk == 2, "sent before the election"
    assert sorted(b["id"] for b in body["live_brokers"]) == [1, 3]
    assert list(body["partition_states"]) == []
    assert any(key == ApiKey.LEADER_AND_ISR for key, _, _ in to_3[1:])
    assert controller.channel.leader_and_isr(3)[TP].leader == 1


def test_new_leaders_go_out_before_the_dead_broker_leaves_the_isrs_of_live_leaders():
    """Kafka's order (onReplicasBecomeOffline): elect leaders for what the dead broker led
    and send them, then drop it from the ISRs of partitions whose leader lives.  Written in
    one pass, the new leaders waited for every state the broker was in: at 10k partitions
    a third of the writes are elections, and the LeaderAndIsr came 1.4 s later."""
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3), 1: (1, 2, 3)}})
    controller.channel.clear()
    seen = []
    send = controller.channel.send

    def recording_send(broker_id, api_key, version, body, callback=None):
        if api_key == ApiKey.LEADER_AND_ISR:
            sent = {from_wire(entry).tp for entry in body["partition_states"]}
            seen.append((sent, states(zk, "t", [1])[1].isr))
        return send(broker_id, api_key, version, body, callback)
    controller.channel.send = recording_send
    brokers.kill(2)
    controller.run_pending()
    isr_of_1_when_0_went = next(isr for sent, isr in seen if TP in sent)
    assert 2 in isr_of_1_when_0_went, "the election's LeaderAndIsr waited for the ISR shrink"
    assert states(zk, "t", [0, 1]) == {0: LeaderAndIsr(1, 1, (1, 3), 1, 1),
                                       1: LeaderAndIsr(1, 1, (1, 3), 1, 1)}
    assert controller.channel.leader_and_isr(3)[TopicPartition("t", 1)].isr == (1, 3)


def test_brokers_announce_new_leaders_without_waiting_for_the_leader_and_isr_to_be_applied():
    """Each broker's channel sends its next request only once the last one is answered.  With
    LeaderAndIsr first (Kafka's order) the UpdateMetadata waited for the LeaderAndIsr to be
    applied, 0.6 s at 10k partitions, and clients learned the new leaders that much later;
    the kill -9 window at 10k grew by about 1 s (design.md, §3 step 7).  So each broker gets
    the UpdateMetadata with the new states first; a client that reaches a leader still
    applying its LeaderAndIsr is told NOT_LEADER_FOR_PARTITION and retries."""
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3)}})
    controller.channel.clear()
    brokers.kill(2)
    controller.run_pending()
    to_1 = [r.api_key for r in controller.channel.requests if r.broker_id == 1
            and (r.api_key == ApiKey.LEADER_AND_ISR or r.body.get("partition_states"))]
    assert to_1.index(ApiKey.UPDATE_METADATA) < to_1.index(ApiKey.LEADER_AND_ISR), to_1


def test_a_partition_without_a_live_isr_member_goes_offline_and_returns_with_it():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 3)}})
    brokers.kill(3)
    controller.run_pending()
    brokers.kill(2)
    controller.run_pending()
    assert states(zk, "t", [0])[0] == LeaderAndIsr(-1, 2, (2,), 1, 2), "keeps its last ISR member"
    brokers.start(3)
    controller.run_pending()
    assert states(zk, "t", [0])[0].leader == -1, "3 is not in the ISR: no unclean election"
    brokers.start(2)
    controller.run_pending()
    assert states(zk, "t", [0])[0] == LeaderAndIsr(2, 3, (2,), 1, 3)
    assert controller.channel.leader_and_isr(2)[TP].leader == 2


def test_enabling_unclean_election_brings_an_offline_partition_back_at_once():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 3)}})
    brokers.kill(3)
    controller.run_pending()
    brokers.kill(2)
    controller.run_pending()
    brokers.start(3)
    controller.run_pending()
    zk.client().create(azn.TopicConfigZNode.path("t"),
                       azn.TopicConfigZNode.encode({"unclean.leader.election.enable": "true"}))
    controller.handle(ev.TopicConfigChange("t"))
    assert states(zk, "t", [0])[0].leader == 3
    controller.handle(ev.TopicConfigChange("unknown"))  # ignored


def test_a_restarted_broker_learns_the_metadata_and_its_roles():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2, 3), 1: (3, 1)}})
    brokers.kill(2)
    controller.run_pending()
    controller.channel.clear()
    brokers.start(2)
    controller.run_pending()
    metadata = controller.channel.sent(ApiKey.UPDATE_METADATA, 2)[0].body
    assert {(s["topic"], s["partition"]) for s in metadata["partition_states"]} == {
        ("t", 0), ("t", 1)}
    assert set(controller.channel.leader_and_isr(2)) == {TP}, "only the partitions it replicates"
    assert controller.channel.brokers.keys() == {1, 2, 3}


def test_a_bounced_broker_is_handled_as_a_failure_and_a_start():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3)}})
    brokers.bounce(2)
    controller.run_pending()
    state = states(zk, "t", [0])[0]
    assert (state.leader, state.isr) == (1, (1, 3)), "its old incarnation's leadership ends"
    assert TP in controller.channel.leader_and_isr(2)


def test_controlled_shutdown_moves_leadership_and_reports_what_it_still_leads():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 3), 1: (2,), 2: (3, 2)}})
    change_isr(zk.client(), TopicPartition("t", 2), (3,))  # 2 fell out of that ISR
    controller.run_pending()
    reply = controlled_shutdown(controller, 2)
    assert reply == {"error_code": ErrorCode.NONE, "remaining_partitions": []}
    assert states(zk, "t", [0])[0] == LeaderAndIsr(3, 1, (3,), 1, 1)
    assert states(zk, "t", [1])[1].leader == 2, "a single replica is not moved"
    stopped = controller.channel.sent(ApiKey.STOP_REPLICA, 2)
    assert [r.body["delete_partitions"] for r in stopped] == [False]
    assert controller.ctx.shutting_down == {2}
    brokers.kill(2)  # it exits
    controller.run_pending()
    assert controller.ctx.shutting_down == set()


def test_a_controlled_shutdown_from_a_previous_incarnation_is_refused():
    """KIP-380: a ControlledShutdown that a broker's previous process sent, handled after the
    broker restarted and registered again, would move the new process's leaderships away and
    mark it shutting down.  v2 names the sender's broker epoch; an older one than the
    registration the controller knows is refused with STALE_BROKER_EPOCH, and changes nothing."""
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3)}})
    old_epoch = controller.ctx.live_brokers[2].epoch
    brokers.bounce(2)
    controller.run_pending()
    current = controller.ctx.live_brokers[2].epoch
    assert current > old_epoch
    before = states(zk, "t", [0])
    assert controlled_shutdown(controller, 2, old_epoch) == {
        "error_code": ErrorCode.STALE_BROKER_EPOCH, "remaining_partitions": []}
    assert states(zk, "t", [0]) == before and controller.ctx.shutting_down == set()
    # The current epoch is served, as is a request that names none (v0 and v1).
    assert controlled_shutdown(controller, 2, current)["error_code"] == ErrorCode.NONE
    assert controller.ctx.shutting_down == {2}
    assert controlled_shutdown(controller, 2)["error_code"] == ErrorCode.NONE


def test_the_stopping_broker_hears_of_what_it_led_and_stops_what_it_followed():
    """Kafka's doControlledShutdown: the stopping broker gets LeaderAndIsr (become-follower)
    only for the partitions it led, and StopReplica only for those it followed; the ISR
    shrinks of the followed ones go to their other replicas.  At 10k partitions, sending it
    every changed state made it (and the controller) apply and encode three times as much."""
    zk, _, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3), 1: (1, 2, 3), 2: (3, 2, 1)}})
    controller.channel.clear()
    assert controlled_shutdown(controller, 2)["remaining_partitions"] == []
    led, followed = {TopicPartition("t", 0)}, {TopicPartition("t", 1), TopicPartition("t", 2)}
    told = controller.channel.leader_and_isr(2)
    assert set(told) == led and told[TP].leader == 1
    [stop] = controller.channel.sent(ApiKey.STOP_REPLICA, 2)
    assert {TopicPartition(p["topic"], p["partition"]) for p in stop.body["partitions"]} == followed
    for other in (1, 3):
        assert set(controller.channel.leader_and_isr(other)) == led | followed
    assert all(2 not in s.isr for s in states(zk, "t", [0, 1, 2]).values())
    # the stopping broker still gets the new states in UpdateMetadata, like every broker
    [metadata] = controller.channel.sent(ApiKey.UPDATE_METADATA, 2)
    assert {s["partition"] for s in metadata.body["partition_states"]} == {0, 1, 2}


def test_controlled_shutdown_of_the_last_isr_member_leaves_it_leading():
    zk, _, controller = new_cluster((1, 2, 3), {"t": {0: (2, 3)}})
    change_isr(zk.client(), TP, (2,))
    controller.run_pending()
    reply = controlled_shutdown(controller, 2)
    assert reply == {"error_code": ErrorCode.NONE,
                     "remaining_partitions": [{"topic": "t", "partition": 0}]}
    assert states(zk, "t", [0])[0].leader == 2


def test_controlled_shutdown_of_an_unknown_broker():
    _, _, controller = new_cluster((1, 2))
    assert controlled_shutdown(controller, 7)["error_code"] == ErrorCode.BROKER_NOT_AVAILABLE


def test_the_controlled_shutdown_line_says_where_the_time_went(caplog):
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3), 1: (2, 3, 1)}})
    with caplog.at_level("INFO", logger="kafka_ha.controller"):
        controlled_shutdown(controller, 2)
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Controlled shutdown of")]
    assert re.fullmatch(r"Controlled shutdown of broker 2: 2 partitions changed, 0 still led by it; "
                        r"\d+ ms in the event queue, states written in \d+ ms, requests queued "
                        r"\d+ ms later", line), line


def test_brokers_told_the_same_states_share_one_body_encoded_once():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3), 1: (2, 3, 1)}})
    controller.channel.clear()
    brokers.kill(2)
    controller.run_pending()
    first, second = (controller.channel.sent(ApiKey.UPDATE_METADATA, b)[-1].body for b in (1, 3))
    # each addressed to its broker's registration (KIP-380), one encoding shared by both
    assert isinstance(first.shared, EncodedOnce) and first.shared is second.shared
    assert (first["broker_epoch"], second["broker_epoch"]) == tuple(
        controller.ctx.live_brokers[b].epoch for b in (1, 3))
    for body in (first, second):
        plain = {**body.shared, "broker_epoch": body["broker_epoch"]}
        assert encode_request(ApiKey.UPDATE_METADATA, 5, 9, "c", body) == \
            encode_request(ApiKey.UPDATE_METADATA, 5, 9, "c", plain)
    assert {s["partition"] for s in first["partition_states"]} == {0, 1}
    # and the LeaderAndIsr of a broker carries the very entries of that body
    lai = controller.channel.sent(ApiKey.LEADER_AND_ISR, 1)[-1].body
    assert all(any(e is s for s in first["partition_states"]) for e in lai["partition_states"])
