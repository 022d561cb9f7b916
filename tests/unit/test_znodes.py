"""Znode codecs against Kafka's bytes and the JSON Schemas: what we write.

(Paths and topic names: test_znode_paths.py; decoding what others write, tolerant
and malformed: test_znode_decode.py.)

Expected bytes are what Kafka writes (docs/design.md §5); every encode result is
also validated against ``zk_schemas/`` so a codec and its schema cannot drift.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.zk.admin_znodes import (ConfigChangeZNode, ConsumerOffsetZNode, DeleteTopicZNode,
                                      IsrChangeNotificationZNode, PreferredReplicaElectionZNode,
                                      ReassignPartitionsZNode, TopicConfigZNode, BrokerConfigZNode)
from kafka_ha.zk.producer_id_znodes import ProducerIdBlock, ProducerIdBlockZNode
from kafka_ha.zk.schemas import FAMILIES, SCHEMA_DIR, load_schema, validate_znode
from kafka_ha.zk.znodes import (BrokerIdZNode, ClusterIdZNode, ControllerEpochZNode,
                                ControllerZNode, PartitionStateZNode, TopicPartitionStateZNode,
                                TopicZNode)

TP = TopicPartition
STATE_PATH = "/brokers/topics/t/partitions/0/state"
BROKER_PATH = "/brokers/ids/1"
TOPIC_PATH = "/brokers/topics/t"
CLUSTER_ID = "Zx9Yq3-_aBcDeFgHiJkLmN"

CODECS = [
    BrokerIdZNode, TopicZNode, TopicPartitionStateZNode, ControllerZNode, ControllerEpochZNode,
    ClusterIdZNode, ReassignPartitionsZNode, PreferredReplicaElectionZNode, DeleteTopicZNode,
    TopicConfigZNode, ConfigChangeZNode, IsrChangeNotificationZNode, ConsumerOffsetZNode,
    ProducerIdBlockZNode, BrokerConfigZNode,
]

BROKER = BrokerInfo(1, "h1", 9092, jmx_port=-1, timestamp_ms=1420000000000,
                    endpoints=("PLAINTEXT://h1:9092",), epoch=-1)


# --- Schemas ---------------------------------------------------------------------


def test_every_family_has_exactly_one_schema_file_and_one_codec() -> None:
    assert sorted(p.stem for p in SCHEMA_DIR.glob("*.json")) == sorted(FAMILIES)
    assert sorted(codec.SCHEMA for codec in CODECS) == sorted(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_schema_is_valid_draft_2020_12_with_title_and_path(family: str) -> None:
    schema = load_schema(family)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"]
    assert schema["description"].startswith("/")  # it names the znode path first


def test_load_schema_rejects_unknown_and_path_like_names() -> None:
    for name in ("nope", "../setup", "controller.json"):
        with pytest.raises(ValueError, match="unknown znode family"):
            load_schema(name)


# --- Encode: exact bytes, schema, round trip --------------------------------------

# (family, encode() thunk, decode(bytes) function, the value decode must give back)
ROUND_TRIPS: list[Any] = [
    pytest.param("broker_registration", lambda: BrokerIdZNode.encode(BROKER),
                 lambda d: BrokerIdZNode.decode(d, BROKER_PATH), BROKER, id="broker"),
    pytest.param("broker_registration",
                 lambda: BrokerIdZNode.encode(BrokerInfo(2, "::1", 9093, 9999, 5, rack="r1")),
                 lambda d: BrokerIdZNode.decode(d, "/brokers/ids/2", czxid=77),
                 BrokerInfo(2, "::1", 9093, 9999, 5, ("PLAINTEXT://[::1]:9093",), "r1", 77),
                 id="broker-ipv6-rack"),
    pytest.param("topic_assignment",
                 lambda: TopicZNode.encode(TopicAssignment("t", {0: (1, 2, 3), 1: (2, 3, 1)})),
                 lambda d: TopicZNode.decode(d, TOPIC_PATH, zk_version=3),
                 TopicAssignment("t", {0: (1, 2, 3), 1: (2, 3, 1)}, 3), id="topic"),
    pytest.param("partition_state",
                 lambda: PartitionStateZNode.encode(LeaderAndIsr(-1, 4, (), 2)),
                 lambda d: PartitionStateZNode.decode(d, STATE_PATH, zk_version=9),
                 LeaderAndIsr(-1, 4, (), 2, 9), id="state-no-leader"),
    pytest.param("controller", lambda: ControllerZNode.encode(3, 1420000000000),
                 ControllerZNode.decode, 3, id="controller"),
    pytest.param("controller_epoch", lambda: ControllerEpochZNode.encode(0),
                 ControllerEpochZNode.decode, 0, id="controller-epoch"),
    pytest.param("cluster_id", lambda: ClusterIdZNode.encode(CLUSTER_ID),
                 ClusterIdZNode.decode, CLUSTER_ID, id="cluster-id"),
    pytest.param("reassign_partitions",
                 lambda: ReassignPartitionsZNode.encode({TP("b", 1): [3, 1], TP("a", 0): [2]}),
                 ReassignPartitionsZNode.decode, {TP("b", 1): (3, 1), TP("a", 0): (2,)},
                 id="reassign"),
    pytest.param("preferred_replica_election",
                 lambda: PreferredReplicaElectionZNode.encode([TP("b", 1), TP("a", 0)]),
                 PreferredReplicaElectionZNode.decode, [TP("b", 1), TP("a", 0)],
                 id="preferred-election"),
    pytest.param("delete_topic_marker", DeleteTopicZNode.encode,
                 lambda d: DeleteTopicZNode.decode(d, DeleteTopicZNode.path("t")), None,
                 id="delete-marker"),
    pytest.param("isr_change_notification",
                 lambda: IsrChangeNotificationZNode.encode([TP("t", 1), TP("u", 0)]),
                 lambda d: IsrChangeNotificationZNode.decode(d, IsrChangeNotificationZNode.path(7)),
                 [TP("t", 1), TP("u", 0)], id="isr-change"),
    pytest.param("topic_config",
                 lambda: TopicConfigZNode.encode({"retention.ms": "1000", "cleanup.policy": "é"}),
                 lambda d: TopicConfigZNode.decode(d, "/config/topics/t"),
                 {"retention.ms": "1000", "cleanup.policy": "é"}, id="topic-config"),
    pytest.param("broker_config",
                 lambda: BrokerConfigZNode.encode({"leader.replication.throttled.rate": "1000"}),
                 lambda d: BrokerConfigZNode.decode(d, BrokerConfigZNode.path(1)),
                 {"leader.replication.throttled.rate": "1000"}, id="broker-config"),
    pytest.param("config_change_notification", lambda: ConfigChangeZNode.encode("1", "brokers"),
                 lambda d: ConfigChangeZNode.decode_entity(d, ConfigChangeZNode.path(0)),
                 ("brokers", "1"), id="config-change-broker"),
    pytest.param("config_change_notification", lambda: ConfigChangeZNode.encode("my.topic"),
                 lambda d: ConfigChangeZNode.decode(d, ConfigChangeZNode.path(0)), "my.topic",
                 id="config-change"),
    pytest.param("consumer_offset", lambda: ConsumerOffsetZNode.encode(42),
                 lambda d: ConsumerOffsetZNode.decode(d, "/consumers/g/offsets/t/0"), 42,
                 id="consumer-offset"),
    pytest.param("producer_id_block",
                 lambda: ProducerIdBlockZNode.encode(ProducerIdBlock(2, 1000, 1999)),
                 ProducerIdBlockZNode.decode, ProducerIdBlock(2, 1000, 1999), id="producer-id-block"),
]


@pytest.mark.parametrize("family, encode, decode, value", ROUND_TRIPS)
def test_encode_validates_against_schema_and_round_trips(
        family: str, encode: Callable[[], bytes], decode: Callable[[bytes], Any],
        value: Any) -> None:
    data = encode()
    assert isinstance(data, bytes)
    validate_znode(family, data)
    assert b" " not in data and b"\\/" not in data  # compact, slashes unescaped
    assert decode(data) == value


KAFKA_BYTES = [
    pytest.param(lambda: PartitionStateZNode.encode(LeaderAndIsr(1, 0, (1, 2, 3), 1)),
                 b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}',
                 id="partition-state"),
    pytest.param(lambda: BrokerIdZNode.encode(BrokerInfo(1, "h1", 9092,
                                                         timestamp_ms=1420000000000)),
                 b'{"jmx_port":-1,"timestamp":"1420000000000","endpoints":["PLAINTEXT://h1:9092"],'
                 b'"host":"h1","version":2,"port":9092}', id="broker-v2"),
    pytest.param(lambda: TopicZNode.encode(TopicAssignment("t", {1: (2, 3, 1), 0: (1, 2, 3)})),
                 b'{"version":1,"partitions":{"0":[1,2,3],"1":[2,3,1]}}', id="topic"),
    pytest.param(lambda: ControllerZNode.encode(1, 1420000000000),
                 b'{"version":1,"brokerid":1,"timestamp":"1420000000000"}', id="controller"),
    pytest.param(lambda: ControllerEpochZNode.encode(5), b"5", id="controller-epoch"),
    pytest.param(lambda: ReassignPartitionsZNode.encode({TP("t", 0): (4, 5, 6)}),
                 b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,5,6]}]}',
                 id="reassign"),
    pytest.param(lambda: PreferredReplicaElectionZNode.encode([TP("t", 0)]),
                 b'{"version":1,"partitions":[{"topic":"t","partition":0}]}', id="preferred"),
    pytest.param(lambda: IsrChangeNotificationZNode.encode([TP("t", 0)]),
                 b'{"version":1,"partitions":[{"topic":"t","partition":0}]}', id="isr-change"),
    pytest.param(lambda: TopicConfigZNode.encode({"retention.ms": "1000"}),
                 b'{"version":1,"config":{"retention.ms":"1000"}}', id="topic-config"),
    pytest.param(lambda: ConfigChangeZNode.encode("t"),
                 b'{"version":2,"entity_path":"topics/t"}', id="config-change"),
    pytest.param(DeleteTopicZNode.encode, b"", id="delete-marker"),
    pytest.param(lambda: ConsumerOffsetZNode.encode(42), b"42", id="consumer-offset"),
    pytest.param(lambda: ClusterIdZNode.encode(CLUSTER_ID),
                 b'{"version":"1","id":"' + CLUSTER_ID.encode() + b'"}', id="cluster-id"),
]


@pytest.mark.parametrize("encode, expected", KAFKA_BYTES)
def test_encode_gives_kafkas_bytes(encode: Callable[[], bytes], expected: bytes) -> None:
    assert encode() == expected


def test_broker_with_rack_is_written_as_v3() -> None:
    data = json.loads(BrokerIdZNode.encode(BrokerInfo(1, "h1", 9092, rack="dc1")))
    assert (data["version"], data["rack"], data["host"], data["port"]) == (3, "dc1", "h1", 9092)


def test_generated_cluster_id_has_kafkas_shape() -> None:
    cluster_id = ClusterIdZNode.generate()
    validate_znode("cluster_id", ClusterIdZNode.encode(cluster_id))
    assert cluster_id != ClusterIdZNode.generate()


# --- Encode refuses values its own decoder (or Kafka) would reject ------------------


@pytest.mark.parametrize("encode", [
    lambda: PartitionStateZNode.encode(LeaderAndIsr(-2, 0, (1,), 1)),
    lambda: PartitionStateZNode.encode(LeaderAndIsr(1, -1, (1,), 1)),
    lambda: PartitionStateZNode.encode(LeaderAndIsr(1, 0, (1, 1), 1)),
    lambda: PartitionStateZNode.encode(LeaderAndIsr(True, 0, (1,), 1)),
    lambda: TopicZNode.encode(TopicAssignment("t", {0: ()})),
    lambda: TopicZNode.encode(TopicAssignment("t", {})),
    lambda: TopicZNode.encode(TopicAssignment("t", {-1: (1,)})),
    lambda: BrokerIdZNode.encode(BrokerInfo(1, "", 9092)),
    lambda: BrokerIdZNode.encode(BrokerInfo(1, "h", 70000)),
    lambda: BrokerIdZNode.encode(BrokerInfo(1, "h", 1, endpoints=("h:1",))),
    lambda: ControllerZNode.encode(-1, 0),
    lambda: ControllerEpochZNode.encode(-1),
    lambda: ClusterIdZNode.encode("short"),
    lambda: ReassignPartitionsZNode.encode({}),
    lambda: ReassignPartitionsZNode.encode({TP("t", 0): [1, 1]}),
    lambda: PreferredReplicaElectionZNode.encode([]),
    lambda: IsrChangeNotificationZNode.encode([]),
    lambda: TopicConfigZNode.encode({"retention.ms": 1000}),
    lambda: ConfigChangeZNode.encode("a/b"),
    lambda: ConsumerOffsetZNode.encode(-2),
])
def test_encode_rejects_invalid_values(encode: Callable[[], bytes]) -> None:
    with pytest.raises(ValueError):
        encode()


# --- The schemas are strict about what Kafka writes --------------------------------


@pytest.mark.parametrize("family, data", [
    ("partition_state", b'{"controller_epoch":1,"leader":"1","version":1,"leader_epoch":0,'
                        b'"isr":[1]}'),
    ("partition_state", b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,'
                        b'"isr":[1],"x":1}'),
    ("partition_state", b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,'
                        b'"isr":[1,1]}'),
    ("broker_registration", b'{"jmx_port":-1,"timestamp":1,"host":"h1","version":1,"port":9092}'),
    ("broker_registration", b'{"jmx_port":-1,"timestamp":"1","host":"h1","version":1,"port":9092,'
                            b'"endpoints":["PLAINTEXT://h1:9092"]}'),
    ("broker_registration", b'{"jmx_port":-1,"timestamp":"1","host":"h1","version":2,"port":9092}'),
    ("broker_registration", b'{"jmx_port":-1,"timestamp":"1","host":"h1","version":2,"port":9092,'
                            b'"endpoints":[],"owner":"x"}'),
    ("topic_assignment", b'{"version":1,"partitions":{"0":[1,2],"x":[1]}}'),
    ("controller", b'{"version":1,"brokerid":1,"timestamp":1420000000000}'),
    ("controller_epoch", b"-1"),
    ("reassign_partitions", b'{"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}'),
    ("topic_config", b'{"version":1,"config":{"retention.ms":1000}}'),
    ("cluster_id", b'{"version":1,"id":"Zx9Yq3-_aBcDeFgHiJkLmN"}'),
    ("delete_topic_marker", b"{}"),
])
def test_schema_rejects_what_kafka_would_not_write(family: str, data: bytes) -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate_znode(family, data)
