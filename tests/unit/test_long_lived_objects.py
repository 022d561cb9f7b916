"""What a broker keeps for its lifetime is frozen out of the garbage collector's generations
(kafka_ha/broker/long_lived.py): after start-up's log loading (test_log_loading) and after a
LeaderAndIsr that created many partitions."""
from __future__ import annotations

import gc

import pytest

from kafka_ha.broker.long_lived import FREEZE_AFTER_CREATED, tune_collector
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol.partition_states import to_wire

ME = 1


@pytest.fixture
def manager(tmp_path):
    gc.unfreeze()
    config = BrokerConfig({"broker.id": ME, "zookeeper.connect": "127.0.0.1:2181"})
    yield ReplicaManager(config, LogManager([str(tmp_path)], LogConfig()), None, lambda t: 1,
                         lambda t: LogConfig(), lambda b: None)
    gc.unfreeze()


def leader_and_isr(manager, topic, partitions):
    states = [to_wire(PartitionStateInfo(TopicPartition(topic, p), 3, ME, 1, (ME, 2), 0, (ME, 2)))
              for p in range(partitions)]
    manager.leader_and_isr({"controller_id": 2, "controller_epoch": 3, "partition_states": states,
                            "live_leaders": []}, 7)


def test_a_leader_and_isr_that_creates_many_partitions_freezes_them(manager):
    """Each full collection walked the 10,000 partitions (and their logs) a topic's creation
    had made: in a failover, the survivors' LeaderAndIsr came 0.4-0.6 s later."""
    leader_and_isr(manager, "small", 10)
    assert gc.get_freeze_count() == 0
    leader_and_isr(manager, "big", FREEZE_AFTER_CREATED)
    assert gc.get_freeze_count() > 0


def test_a_leader_and_isr_of_partitions_it_has_freezes_nothing(manager):
    leader_and_isr(manager, "big", FREEZE_AFTER_CREATED)
    gc.unfreeze()
    leader_and_isr(manager, "big", FREEZE_AFTER_CREATED)      # the same epoch again: nothing new
    assert gc.get_freeze_count() == 0


def test_a_burst_of_request_objects_is_not_collected_while_it_lives():
    """A failover's requests make objects that live across a few switches of the loop.
    With CPython's default thresholds, 40,000 of them alive at once cost some fifty young
    collections, and their promotion brought a full collection (200-500 ms at 10,000
    partitions) every second or so; the broker's thresholds let them be."""
    saved = gc.get_threshold()
    runs = [0, 0, 0]

    def count(phase, info):
        if phase == "stop":
            runs[info["generation"]] += 1
    try:
        tune_collector()
        gc.collect()
        gc.callbacks.append(count)
        try:
            burst = [{"partition": i, "records": [i]} for i in range(20_000)]
        finally:
            gc.callbacks.remove(count)
        assert len(burst) == 20_000 and runs == [0, 0, 0]
    finally:
        gc.set_threshold(*saved)
