"""The T1-T10 high-watermark timeline (docs/design.md §6.1), step by step, on the real leader.

A real Partition over a real on-disk Log, driven through the broker's
Produce/Fetch handlers (no network): the HW moves only when every ISR member
has confirmed, and consumers never see past it.
"""

import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.protocol.deferred import resolved
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.partition import Partition
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.records.reader import decode_records
from tests.harness.leader_setup import NoIsrChanges

TP = TopicPartition("p", 0)


@pytest.fixture
def leader(tmp_path):
    manager = LogManager([str(tmp_path)], LogConfig())
    log = manager.get_or_create_log(TP, LogConfig())
    partition = Partition(TP, 1, log, lambda: 1, NoIsrChanges())
    partition.make_leader(PartitionStateInfo(TP, 1, 1, 0, (1, 2, 3), 0, (1, 2, 3)))
    plane = DataApis(HostedPartitions({TP: partition}, lambda t: True), lambda t: 1000012)
    yield partition, plane
    manager.close()


def produce(plane, *values):
    batch = build_v2_batch([Record(None, v) for v in values])
    response = plane.produce({"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "p", "partition_data": [{"index": 0, "records": batch}]}]}, 2)
    entry = response["responses"][0]["partition_responses"][0]
    assert entry["error_code"] == 0
    return entry["base_offset"]


def fetch(plane, replica_id, offset):
    response = plane.fetch({"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0,
                            "max_bytes": 1 << 20, "topics": [{"topic": "p", "partitions": [
                                {"partition": 0, "fetch_offset": offset,
                                 "partition_max_bytes": 1 << 20}]}]}, 3)
    entry = response["responses"][0]["partitions"][0]
    assert entry["error_code"] == 0
    return [r.offset for r in decode_records(bytes(entry["records"] or b""), offset)], entry["high_watermark"]


def test_seed_001_timeline(leader):
    partition, plane = leader
    # T1: the producer writes 0,1,2 to the leader R1
    assert produce(plane, b"m0", b"m1", b"m2") == 0
    assert (partition.high_watermark, partition.log.log_end_offset) == (0, 3)
    # T2, T3: R2 and R3 fetch from 0 and get [0,1,2]; the leader has no confirmation yet
    assert fetch(plane, 2, 0) == ([0, 1, 2], 0)
    assert fetch(plane, 3, 0) == ([0, 1, 2], 0)
    # T4: a consumer sees nothing: the HW is 0
    assert fetch(plane, -1, 0) == ([], 0)
    # T5: R2 fetches from 3, confirming 0..2; R3 has not: the HW stays
    assert fetch(plane, 2, 3) == ([], 0)
    assert partition.high_watermark == 0
    # T6: R3 confirms too: every ISR member has LEO 3, so the HW moves to 3
    assert fetch(plane, 3, 3)[0] == []
    assert partition.high_watermark == 3
    # T7: two more messages
    assert produce(plane, b"m3", b"m4") == 3
    assert (partition.high_watermark, partition.log.log_end_offset) == (3, 5)
    # T8: R2 gets [3,4] but has not confirmed them
    assert fetch(plane, 2, 3) == ([3, 4], 3)
    # T9: R2 confirms 5; R3 is still at 3, so the HW does not move
    assert fetch(plane, 2, 5) == ([], 3)
    assert partition.high_watermark == 3
    # T10: a consumer reads only the committed log [0,1,2]
    assert fetch(plane, -1, 0) == ([0, 1, 2], 3)
    # and R3 catching up finally commits 3,4
    fetch(plane, 3, 5)
    assert partition.high_watermark == 5
    assert fetch(plane, -1, 3)[0] == [3, 4]


def test_hw_does_not_advance_while_isr_is_below_min_isr(tmp_path):
    manager = LogManager([str(tmp_path)], LogConfig())
    log = manager.get_or_create_log(TP, LogConfig())
    partition = Partition(TP, 1, log, lambda: 2, NoIsrChanges())
    partition.make_leader(PartitionStateInfo(TP, 1, 1, 0, (1,), 0, (1, 2, 3)))
    plane = DataApis(HostedPartitions({TP: partition}, lambda t: True), lambda t: 1000012)
    assert produce(plane, b"only-on-the-leader") == 0
    assert partition.high_watermark == 0, "a lone leader must not commit under min.insync.replicas=2"
    assert fetch(plane, -1, 0) == ([], 0)
    response = resolved(plane.produce({"acks": -1, "timeout_ms": 100, "topic_data": [
        {"name": "p", "partition_data": [{"index": 0, "records": build_v2_batch([Record(None, b"x")])}]}]}, 2))
    assert response["responses"][0]["partition_responses"][0]["error_code"] == 19  # NOT_ENOUGH_REPLICAS
    assert partition.log.log_end_offset == 1, "a refused acks=all append writes nothing"
    manager.close()
