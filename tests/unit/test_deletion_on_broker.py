"""The broker's side of topic deletion (issue 18, defect 6): no log comes back after StopReplica(delete).

The controller announces a topic being deleted with leader -2 in UpdateMetadata,
then sends StopReplica(delete).  A LeaderAndIsr for one of its partitions that
arrives after that (late, or from a controller that should not have sent it) must
not create the log again; a topic created anew under the same name, which the
controller publishes again first, must get its logs.
"""
from __future__ import annotations

from pathlib import Path

import gevent

from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import LEADER_DURING_DELETE, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.partition_states import to_wire

ME = 1
TP = TopicPartition("doomed", 0)
CONTROLLER = {"controller_id": 2, "controller_epoch": 3}


def state(leader: int, leader_epoch: int) -> PartitionStateInfo:
    return PartitionStateInfo(TP, 3, leader, leader_epoch, (ME, 2), 0, (ME, 2))


def update_metadata(s: PartitionStateInfo) -> dict:
    return {**CONTROLLER, "partition_states": [to_wire(s)],
            "live_brokers": [{"id": b, "host": "127.0.0.1", "port": 9090 + b} for b in (ME, 2)]}


def leader_and_isr(s: PartitionStateInfo) -> dict:
    return {**CONTROLLER, "partition_states": [to_wire(s)], "live_leaders": []}


def stop_replica_delete() -> dict:
    return {**CONTROLLER, "delete_partitions": True,
            "partitions": [{"topic": TP.topic, "partition": TP.partition}]}


def broker(tmp_path: Path) -> tuple[ReplicaManager, MetadataCache]:
    metadata = MetadataCache(ME)
    config = BrokerConfig({"broker.id": ME, "zookeeper.connect": "127.0.0.1:2181"})
    logs = LogManager([str(tmp_path)], LogConfig())
    manager = ReplicaManager(config, logs, None, lambda t: 1, lambda t: LogConfig(),
                             lambda b: None, being_deleted=metadata.being_deleted)
    return manager, metadata


def answer(response: dict) -> int:
    return response["partition_errors"][0]["error_code"]


def test_a_late_leader_and_isr_does_not_create_a_deleted_log_again(tmp_path):
    manager, metadata = broker(tmp_path)
    metadata.update(update_metadata(state(ME, 1)), 0, 1)
    assert answer(manager.leader_and_isr(leader_and_isr(state(ME, 1)), 2)) == ErrorCode.NONE
    manager.finish_deferred_writes()                  # the new log's directory comes after the answer
    assert (tmp_path / "doomed-0").is_dir()

    metadata.update(update_metadata(state(LEADER_DURING_DELETE, -1)), 0, 3)
    manager.stop_replica(stop_replica_delete(), 4)
    assert not (tmp_path / "doomed-0").exists()

    late = manager.leader_and_isr(leader_and_isr(state(2, 2)), 5)
    assert answer(late) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert TP not in manager.partitions
    assert not (tmp_path / "doomed-0").exists()


def test_a_topic_created_again_under_the_same_name_gets_its_log(tmp_path):
    manager, metadata = broker(tmp_path)
    metadata.update(update_metadata(state(LEADER_DURING_DELETE, -1)), 0, 1)
    manager.stop_replica(stop_replica_delete(), 2)

    metadata.update(update_metadata(state(ME, 0)), 0, 3)   # the new topic's first state
    assert answer(manager.leader_and_isr(leader_and_isr(state(ME, 0)), 4)) == ErrorCode.NONE
    assert manager.partitions[TP].is_leader
    manager.finish_deferred_writes()
    assert (tmp_path / "doomed-0").is_dir()


def test_stop_replica_waits_for_a_leader_and_isr_that_is_being_applied(tmp_path):
    """A LeaderAndIsr yields to the hub between partitions; a StopReplica(delete) that
    arrives meanwhile runs after it, so what it deletes stays deleted."""
    manager, metadata = broker(tmp_path)
    metadata.update(update_metadata(state(ME, 1)), 0, 1)
    order = []
    create = manager._create_partition

    def slow_create(tp, *rest):
        order.append("creating")
        gevent.sleep(0.01)          # as the yield between partitions does
        order.append("created")
        return create(tp, *rest)
    manager._create_partition = slow_create
    applying = gevent.spawn(manager.leader_and_isr, leader_and_isr(state(ME, 1)), 2)
    gevent.sleep(0)
    assert order == ["creating"]
    deleting = gevent.spawn(manager.stop_replica, stop_replica_delete(), 3)
    gevent.joinall([applying, deleting], raise_error=True)
    assert TP not in manager.partitions
    assert not (tmp_path / "doomed-0").exists()


def stop_replica_keep() -> dict:
    return {**CONTROLLER, "delete_partitions": False,
            "partitions": [{"topic": TP.topic, "partition": TP.partition}]}


def test_a_replica_stopped_without_delete_takes_the_same_epochs_leader_and_isr_again(tmp_path):
    """A broker bounced right after its controlled shutdown got the old incarnation's queued
    StopReplica(delete=false) and then, from the bounce, the current LeaderAndIsr at the same
    epoch: ignored as "not higher", the replica never fetched again (a system test caught it)."""
    manager, metadata = broker(tmp_path)
    metadata.update(update_metadata(state(2, 1)), 0, 1)
    assert answer(manager.leader_and_isr(leader_and_isr(state(2, 1)), 2)) == ErrorCode.NONE
    manager.stop_replica(stop_replica_keep(), 3)
    assert manager.partitions[TP].leader == -1
    again = manager.leader_and_isr(leader_and_isr(state(2, 1)), 4)
    assert answer(again) == ErrorCode.NONE
    assert manager.partitions[TP].leader == 2
    # an active replica still ignores a re-sent state of its own epoch
    assert answer(manager.leader_and_isr(leader_and_isr(state(2, 1)), 5)) == ErrorCode.STALE_CONTROLLER_EPOCH
