"""What Metadata answers about a partition with a replica on a dead broker, per version, as
Kafka 2.1's MetadataCache answers it: v0 lists live brokers only and flags the partition
REPLICA_NOT_AVAILABLE; v1 and later list every assigned replica and ISR member (dead ones
by id), so a client sees the replication factor and under-replication as they are."""
import pytest

from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.partition_states import to_wire

TP = TopicPartition("t", 0)


def cache(leader, isr, live=(1, 2)):
    c = MetadataCache(1)
    s = PartitionStateInfo(TP, 1, leader, 4, tuple(isr), 0, (1, 2, 3))
    c.update({"controller_id": 1, "controller_epoch": 1, "partition_states": [to_wire(s)],
              "live_brokers": [{"id": b, "host": "127.0.0.1", "port": 9090 + b} for b in live]}, 0, 1)
    return c


def answer(c, version):
    partition = c.metadata_response(["t"], version)["topics"][0]["partitions"][0]
    return (partition["error_code"], partition["leader_id"], partition["replica_nodes"],
            partition["isr_nodes"], partition["offline_replicas"])


@pytest.mark.parametrize("version", [1, 5, 7])
def test_v1_and_later_list_every_replica_and_isr_member(version):
    assert answer(cache(1, (1, 2, 3)), version) == (ErrorCode.NONE, 1, [1, 2, 3], [1, 2, 3], [3])
    assert answer(cache(1, (1, 2)), version) == (ErrorCode.NONE, 1, [1, 2, 3], [1, 2], [3])


def test_v0_lists_live_replicas_only_and_says_one_is_missing():
    assert answer(cache(1, (1, 2, 3)), 0) == (ErrorCode.REPLICA_NOT_AVAILABLE, 1, [1, 2], [1, 2], [3])


@pytest.mark.parametrize("version, replicas", [(0, [1, 2]), (1, [1, 2, 3])])
def test_a_dead_leader_is_leader_not_available_with_no_isr(version, replicas):
    assert answer(cache(3, (3,)), version) == (ErrorCode.LEADER_NOT_AVAILABLE, -1, replicas, [], [3])


def test_all_live_is_the_same_at_every_version():
    c = cache(2, (1, 2, 3), live=(1, 2, 3))
    assert [answer(c, v) for v in (0, 1, 7)] == [(ErrorCode.NONE, 2, [1, 2, 3], [1, 2, 3], [])] * 3


def test_a_topics_answer_is_built_once_per_update_and_rebuilt_after_the_next():
    # During a failover every client asks for the metadata of every partition again and
    # again; building 10k partitions' answer per request took seconds of a broker's loop.
    c = cache(1, (1, 2, 3), live=(1, 2, 3))
    first = c.metadata_response(["t"], 7)["topics"][0]
    assert c.metadata_response(None, 7)["topics"][0] is first
    assert c.metadata_response(["t"], 0)["topics"][0] is not first     # v0 lists live replicas only
    s = PartitionStateInfo(TP, 1, 2, 5, (2, 3), 0, (1, 2, 3))
    c.update({"controller_id": 1, "controller_epoch": 1, "partition_states": [to_wire(s)],
              "live_brokers": [{"id": b, "host": "127.0.0.1", "port": 9090 + b} for b in (2, 3)]}, 0, 2)
    assert answer(c, 7) == (ErrorCode.NONE, 2, [1, 2, 3], [2, 3], [1])


def test_the_whole_answer_is_encoded_once_per_update_for_each_version_and_topic_list():
    # After a failover every client asks again every second; encoding a 10k-partition
    # answer took about 40 ms of the loop per request.
    from kafka_ha.protocol.api import ApiKey
    from kafka_ha.protocol.framing import EncodedOnce, encode_response
    c = cache(1, (1, 2, 3), live=(1, 2, 3))
    c.cluster_id = "abc"
    first = c.encoded_response(["t"], 7)
    assert isinstance(first, EncodedOnce) and c.encoded_response(["t"], 7) is first
    assert c.encoded_response(["t"], 1) is not first and c.encoded_response(None, 7) is not first
    assert encode_response(5, ApiKey.METADATA, 7, first) == encode_response(
        5, ApiKey.METADATA, 7, {**c.metadata_response(["t"], 7), "cluster_id": "abc", "throttle_time_ms": 0})
    s = PartitionStateInfo(TP, 1, 2, 5, (2, 3), 0, (1, 2, 3))
    c.update({"controller_id": 1, "controller_epoch": 1, "partition_states": [to_wire(s)],
              "live_brokers": [{"id": b, "host": "127.0.0.1", "port": 9090 + b} for b in (2, 3)]}, 0, 2)
    again = c.encoded_response(["t"], 7)
    assert again is not first and again["topics"][0]["partitions"][0]["leader_id"] == 2
