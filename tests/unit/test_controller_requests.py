"""Controller requests (LeaderAndIsr, UpdateMetadata, StopReplica) a broker must refuse whole."""
from __future__ import annotations

import pytest

from kafka_ha.broker.controller_requests import ControllerRequestGuard, request_problem
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import decode_request, decode_request_body, encode_request
from kafka_ha.protocol.partition_states import grouped_by_topic, ungrouped

LAI, UM, SR = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA


def state(topic="t", partition=0, leader=1, epoch=0, isr=(1, 2), replicas=(1, 2)):
    return {"topic": topic, "partition": partition, "controller_epoch": 1, "leader": leader,
            "leader_epoch": epoch, "isr": list(isr), "zk_version": 0, "replicas": list(replicas)}


def lai(*states, controller=1, epoch=1):
    return {"controller_id": controller, "controller_epoch": epoch, "partition_states": list(states),
            "live_leaders": [{"id": 1, "host": "h", "port": 9092}]}


def test_a_well_formed_request_has_no_problem():
    assert request_problem(LAI, 0, lai(state(), state(partition=1))) is None
    assert request_problem(SR, 0, {"controller_id": 1, "controller_epoch": 1, "delete_partitions": True,
                                   "partitions": [{"topic": "t", "partition": 0}]}) is None
    assert request_problem(UM, 1, {"controller_id": 1, "controller_epoch": 1,
                                   "partition_states": [state(leader=-2, isr=())],
                                   "live_brokers": [{"id": 1, "endpoints": [
                                       {"port": 9092, "host": "h", "security_protocol": 0}]}]}) is None


@pytest.mark.parametrize("bad, words", [
    (state(topic="../x"), "topic"),
    (state(topic=""), "topic"),
    (state(topic="a/b"), "topic"),
    (state(partition=-1), "partition"),
    (state(epoch=-5), "leader_epoch"),
    (state(leader=-7), "leader"),
    (state(replicas=()), "replicas"),
    (state(replicas=(1, 1)), "replicas"),
    (state(isr=(1, -3)), "isr"),
])
def test_one_bad_entry_condemns_the_whole_request(bad, words):
    problem = request_problem(LAI, 0, lai(state(partition=5), bad))
    assert problem is not None and words in problem


def test_duplicate_partitions_are_refused():
    assert "twice" in request_problem(LAI, 0, lai(state(), state()))


def test_bad_broker_addresses_are_refused():
    request = lai(state())
    request["live_leaders"] = [{"id": -1, "host": "h", "port": 1}]
    assert "broker" in request_problem(LAI, 0, request)
    request["live_leaders"] = [{"id": 1, "host": "h", "port": 70000}]
    assert "port" in request_problem(LAI, 0, request)


class Zk:
    """What ZooKeeper says: (controller id, controller epoch), and how often it was asked."""

    def __init__(self, controller, epoch):
        self.value, self.reads = (controller, epoch), 0

    def __call__(self):
        self.reads += 1
        return self.value


def test_a_forged_higher_epoch_is_refused_and_never_adopted():
    zk = Zk(1, 3)
    guard = ControllerRequestGuard(7, zk)
    assert guard.admit(LAI, lai(state(), controller=1, epoch=3), 1) == ErrorCode.NONE
    assert guard.admit(LAI, lai(state(), controller=4242, epoch=1003), 2) == ErrorCode.STALE_CONTROLLER_EPOCH
    assert guard.admit(UM, {**lai(state(), controller=1, epoch=4), "live_brokers": []}, 3) \
        == ErrorCode.STALE_CONTROLLER_EPOCH
    # the real controller is still obeyed
    assert guard.admit(LAI, lai(state(), controller=1, epoch=3), 4) == ErrorCode.NONE
    assert guard.verified == (1, 3)


def test_the_right_epoch_with_another_controller_id_is_refused():
    guard = ControllerRequestGuard(7, Zk(1, 3))
    assert guard.admit(SR, {"controller_id": 2, "controller_epoch": 3, "delete_partitions": False,
                            "partitions": []}, 1) == ErrorCode.STALE_CONTROLLER_EPOCH


def test_a_real_new_controller_costs_one_read_per_epoch():
    zk = Zk(1, 3)
    guard = ControllerRequestGuard(7, zk)
    for cid in range(5):
        assert guard.admit(LAI, lai(state(), controller=1, epoch=3), cid) == ErrorCode.NONE
    assert zk.reads == 1
    zk.value = (2, 4)
    for cid in range(5):
        assert guard.admit(LAI, lai(state(), controller=2, epoch=4), cid) == ErrorCode.NONE
    assert zk.reads == 2


def test_older_epochs_pass_to_the_stale_check_of_the_handler():
    """An old controller's request is not this guard's business: the replica manager and
    the metadata cache refuse it as stale, with Kafka's log line."""
    zk = Zk(2, 4)
    guard = ControllerRequestGuard(7, zk)
    assert guard.admit(LAI, lai(state(), controller=2, epoch=4), 1) == ErrorCode.NONE
    assert guard.admit(LAI, lai(state(), controller=1, epoch=3), 2) == ErrorCode.NONE
    assert zk.reads == 1


def test_zookeeper_unreachable_refuses_without_adopting():
    def down():
        raise ConnectionError("no quorum")

    guard = ControllerRequestGuard(7, down)
    assert guard.admit(LAI, lai(state(), epoch=3), 1) == ErrorCode.STALE_CONTROLLER_EPOCH
    assert guard.verified is None


def test_malformed_request_is_invalid_before_any_epoch_check():
    zk = Zk(1, 3)
    guard = ControllerRequestGuard(7, zk)
    assert guard.admit(LAI, lai(state(topic="../x"), epoch=3), 1) == ErrorCode.INVALID_REQUEST
    assert zk.reads == 0


def test_a_v1_broker_without_endpoints_is_refused_not_a_crash():
    """Found by the wire fuzzer: UpdateMetadata v1 with an empty endpoint list raised KeyError."""
    request = {"controller_id": 1, "controller_epoch": 1, "partition_states": [],
               "live_brokers": [{"id": 1, "endpoints": []}]}
    assert "no endpoint" in request_problem(UM, 1, request)


# ---- KIP-380: requests addressed to a previous process of this broker --------------------
#
# A broker killed and started again at once listens on the same port before the controller
# has seen its new registration; the controller's connection to the old process, reopened,
# reaches the new one with what was queued for the old.  Applied, such a LeaderAndIsr made
# the new process leader with an ISR older than ZooKeeper's, so it acknowledged writes that a
# lagging member of ZooKeeper's ISR, elected next, did not have (the replication simulation,
# seed 1406 of 2000: invariant 2, ISR agreement).  The controller names the broker epoch (the
# czxid of the registration it addresses); a broker refuses one older than its own.

def addressed(api_key, version, body):
    """``body`` as the broker's request layer sees it: encoded at ``version``, decoded, and
    put in the one layout its handlers take."""
    frame = encode_request(api_key, version, 5, "controller-1", body)
    header, reader = decode_request(memoryview(frame)[4:])
    return ungrouped(decode_request_body(header, reader))


def lai_v2(broker_epoch, *states):
    entries = [{**s, "is_new": False} for s in states]
    return {"controller_id": 1, "controller_epoch": 3, "broker_epoch": broker_epoch,
            "topic_states": grouped_by_topic(entries), "live_leaders": [{"id": 1, "host": "h", "port": 9092}]}


def test_a_request_for_an_older_registration_of_this_broker_is_refused():
    guard = ControllerRequestGuard(7, Zk(1, 3), own_epoch=lambda timeout_s: 20)
    old = addressed(LAI, 2, lai_v2(19, state(), state(partition=1)))
    assert [(e["topic"], e["partition"]) for e in old["partition_states"]] == [("t", 0), ("t", 1)]
    assert guard.admit(LAI, old, 1, 2) == ErrorCode.STALE_BROKER_EPOCH
    assert guard.admit(LAI, addressed(LAI, 2, lai_v2(20, state())), 2, 2) == ErrorCode.NONE
    stop = {"controller_id": 1, "controller_epoch": 3, "broker_epoch": 19, "delete_partitions": True,
            "topics": [{"topic": "t", "partition_indexes": [0, 1]}]}
    decoded = addressed(SR, 1, stop)
    assert decoded["partitions"] == [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]
    assert guard.admit(SR, decoded, 3, 1) == ErrorCode.STALE_BROKER_EPOCH
    # versions without a broker epoch (before v2, v5, v1) are not fenced, as in Kafka
    assert guard.admit(LAI, addressed(LAI, 1, lai({**state(), "is_new": False}, epoch=3)), 4, 1) \
        == ErrorCode.NONE


def test_before_it_has_registered_a_broker_refuses_a_request_that_names_a_broker_epoch():
    """The controller learns a broker epoch from the registration: one named while this
    process is still registering was meant for its predecessor."""
    waited = []

    def not_registered(timeout_s):
        waited.append(timeout_s)
        return None
    guard = ControllerRequestGuard(7, Zk(1, 3), own_epoch=not_registered)
    assert guard.admit(LAI, addressed(LAI, 2, lai_v2(19, state())), 1, 2) == ErrorCode.STALE_BROKER_EPOCH
    assert waited and waited[0] > 0, "it waits a while for its own registration first"
