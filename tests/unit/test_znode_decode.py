"""Decoding what other writers leave in ZooKeeper: the forms Kafka and its tools
write (older versions, any key order, extra keys), and malformed data, which must
raise an error naming the path rather than crash a broker or the controller.

(Our own encodings, the schemas and Kafka's exact bytes: test_znodes.py.)
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicPartition
from kafka_ha.zk.admin_znodes import (ConfigChangeZNode, ConsumerOffsetZNode, DeleteTopicZNode,
                                      IsrChangeNotificationZNode, PreferredReplicaElectionZNode,
                                      ReassignPartitionsZNode, TopicConfigZNode)
from kafka_ha.zk.errors import DuplicatePartitions, MalformedZnode
from kafka_ha.zk.schemas import validate_znode
from kafka_ha.zk.znodes import (BrokerIdZNode, ClusterIdZNode, ControllerEpochZNode,
                                ControllerZNode, TopicPartitionStateZNode, TopicZNode)

TP = TopicPartition
STATE_PATH = "/brokers/topics/t/partitions/0/state"
BROKER_PATH = "/brokers/ids/1"
TOPIC_PATH = "/brokers/topics/t"


# --- Decode: the tolerant forms ----------------------------------------------------

V1_BROKER = b'{"jmx_port":-1,"timestamp":"1420000000000","host":"h1","version":1,"port":9092}'
V4_BROKER = (b'{"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
             b'"endpoints":["CLIENT://h1:9093","REPLICATION://h1:9092"],"rack":"dc1",'
             b'"jmx_port":9999,"host":"h1","timestamp":"1","port":9092,"version":4}')


@pytest.mark.parametrize("data", [V1_BROKER, V4_BROKER], ids=["v1", "v4"])
def test_kafka_broker_registrations_match_schema(data: bytes) -> None:
    validate_znode("broker_registration", data)


def test_decode_broker_v1_uses_top_level_host_and_port() -> None:
    info = BrokerIdZNode.decode(V1_BROKER, "/brokers/ids/7", czxid=0x16)
    assert info == BrokerInfo(7, "h1", 9092, -1, 1420000000000, ("PLAINTEXT://h1:9092",),
                              None, 0x16)


def test_decode_broker_v4_keeps_endpoints_rack_and_jmx_port() -> None:
    info = BrokerIdZNode.decode(V4_BROKER, BROKER_PATH)
    assert (info.host, info.port, info.jmx_port, info.rack) == ("h1", 9092, 9999, "dc1")
    assert info.endpoints == ("CLIENT://h1:9093", "REPLICATION://h1:9092")


@pytest.mark.parametrize("extra", [
    b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},"version":4',
    b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
    b'"features":{},"version":5',
], ids=["v4", "v5"])
def test_decode_broker_with_null_host_takes_first_plaintext_endpoint(extra: bytes) -> None:
    data = (b'{"host":null,"port":-1,"jmx_port":-1,"timestamp":"1",'
            b'"endpoints":["CLIENT://ssl-host:9093","REPLICATION://[::1]:9094"],' + extra + b'}')
    validate_znode("broker_registration", data)
    info = BrokerIdZNode.decode(data, BROKER_PATH)
    assert (info.host, info.port) == ("::1", 9094)


def test_decode_partition_state_ignores_order_spaces_and_unknown_keys() -> None:
    data = b'{ "isr" : [2, 1], "leader_recovery_state": 0, "leader": 2,\n"version": 1, ' \
           b'"controller_epoch": 7, "leader_epoch": 3 }'
    assert TopicPartitionStateZNode.decode(data, STATE_PATH) == LeaderAndIsr(2, 3, (2, 1), 7)


def test_decode_topic_ignores_reassignment_keys_of_kafka_2_4() -> None:
    data = (b'{"version":2,"partitions":{"1":[2],"0":[1]},'
            b'"adding_replicas":{},"removing_replicas":{}}')
    assignment = TopicZNode.decode(data, TOPIC_PATH)
    assert assignment.partitions == {0: (1,), 1: (2,)}
    assert list(assignment.partitions) == [0, 1]


@pytest.mark.parametrize("data", [
    b'{"partitions": [{"partition": 0, "replicas": [2, 3, 4], "topic": "bar"}], "version": 1}',
    b'{"partitions":[{"topic":"bar","replicas":[2,3,4],"partition":0,"log_dirs":["any"]}]}',
], ids=["spaces-sorted-version-last", "no-version-extra-key"])
def test_decode_reassignment_written_by_other_tools(data: bytes) -> None:
    assert ReassignPartitionsZNode.decode(data) == {TP("bar", 0): (2, 3, 4)}


def test_decode_reassignment_keeps_replica_order_for_leader_only_moves() -> None:
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,1,3]}]}'
    assert ReassignPartitionsZNode.decode(data)[TP("t", 0)] == (2, 1, 3)


def test_decode_preferred_election_without_version_keeps_order() -> None:
    data = b'{"partitions": [{"topic": "b", "partition": 2}, {"topic": "a", "partition": 0}]}'
    assert PreferredReplicaElectionZNode.decode(data) == [TP("b", 2), TP("a", 0)]


@pytest.mark.parametrize("data", [b"1", b" 1\n", b'{"brokerid":1}',
                                  b'{"timestamp":"2","brokerid":1,"version":1}'])
def test_decode_controller_accepts_legacy_int_and_any_key_order(data: bytes) -> None:
    assert ControllerZNode.decode(data) == 1


@pytest.mark.parametrize("data", [None, b"", b"10.0.0.1"])
def test_decode_delete_marker_accepts_null_empty_and_foreign_bytes(data: bytes | None) -> None:
    assert DeleteTopicZNode.decode(data, DeleteTopicZNode.path("t")) is None
    validate_znode("delete_topic_marker", None)


@pytest.mark.parametrize("data, topic", [
    (b'"t"', "t"),
    (b'{"version":1,"entity_type":"topics","entity_name":"t"}', "t"),
    (b'{"version":2,"entity_path":"topics/t"}', "t"),
    (b'{"entity_path": "topics/t"}', "t"),
    (b'{"version":2,"entity_path":"clients/app"}', None),
    (b'{"version":1,"entity_type":"users","entity_name":"u"}', None),
], ids=["0.8.2", "0.9", "0.10.1", "no-version", "v2-client", "v1-user"])
def test_decode_config_change_all_three_forms(data: bytes, topic: str | None) -> None:
    assert ConfigChangeZNode.decode(data, ConfigChangeZNode.path(3)) == topic


@pytest.mark.parametrize("data", [b'"t"', b'{"version":1,"entity_type":"topics","entity_name":"t"}',
                                  b'{"version":2,"entity_path":"users/u/clients/c"}'])
def test_config_change_schema_accepts_the_older_forms(data: bytes) -> None:
    validate_znode("config_change_notification", data)


@pytest.mark.parametrize("data", [None, b""])
def test_decode_topic_config_without_data_means_no_overrides(data: bytes | None) -> None:
    assert TopicConfigZNode.decode(data, "/config/topics/t") == {}


def test_decode_isr_change_reads_each_partition_once() -> None:
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"partition":0,"topic":"t"}]}'
    assert IsrChangeNotificationZNode.decode(data, "/isr_change_notification/x") == [TP("t", 0)]


def test_decode_cluster_id_ignores_version_type() -> None:
    assert ClusterIdZNode.decode(b'{"id":"abc","version":1}') == "abc"


def test_decode_consumer_offset_sentinel() -> None:
    assert ConsumerOffsetZNode.decode(b"-1", "/consumers/g/offsets/t/0") == -1


# --- Decode: malformed input ---------------------------------------------------------

state = TopicPartitionStateZNode.decode
GOOD_STATE = {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1, 2]}


def _state(**changes: Any) -> bytes:
    obj = {**GOOD_STATE, **changes}
    return json.dumps({k: v for k, v in obj.items() if v is not ...}).encode()


MALFORMED: list[Any] = [
    # (decode function, path, data, words the reason must contain)
    pytest.param(state, STATE_PATH, b"{", "not valid JSON", id="not-json"),
    pytest.param(state, STATE_PATH, b"\xff", "not UTF-8", id="not-utf8"),
    pytest.param(state, STATE_PATH, None, "no data", id="null"),
    pytest.param(state, STATE_PATH, b"[1]", "JSON object", id="array"),
    pytest.param(state, STATE_PATH, b'{"leader":1,"leader":2}', "duplicate key", id="dup-key"),
    pytest.param(state, STATE_PATH, b'{"leader":NaN}', "NaN", id="nan"),
    pytest.param(state, STATE_PATH, _state(leader="1"), "leader must be an integer", id="str-int"),
    pytest.param(state, STATE_PATH, _state(leader=True), "got true", id="bool-leader"),
    pytest.param(state, STATE_PATH, _state(leader=1.0), "leader must be an integer", id="float"),
    pytest.param(state, STATE_PATH, _state(leader=-2), ">= -1, got -2", id="leader-minus-2"),
    pytest.param(state, STATE_PATH, _state(leader_epoch=-1), "leader_epoch", id="neg-epoch"),
    pytest.param(state, STATE_PATH, _state(controller_epoch=-1), "controller_epoch",
                 id="neg-controller-epoch"),
    pytest.param(state, STATE_PATH, _state(isr=[1, 2, 1]), "more than once", id="dup-isr"),
    pytest.param(state, STATE_PATH, _state(isr=[1, True]), "isr[1]", id="bool-in-isr"),
    pytest.param(state, STATE_PATH, _state(isr="1,2"), "list of broker ids", id="isr-string"),
    pytest.param(state, STATE_PATH, _state(isr=...), 'missing key "isr"', id="missing-isr"),
    pytest.param(state, STATE_PATH, _state(leader=...), 'missing key "leader"',
                 id="missing-leader"),
    pytest.param(state, STATE_PATH, _state(version=True), "version", id="bool-version"),
    pytest.param(TopicZNode.decode, TOPIC_PATH,
                 b'{"version":1,"partitions":{"0":[]}}', "must not be empty", id="empty-replicas"),
    pytest.param(TopicZNode.decode, TOPIC_PATH,
                 b'{"version":1,"partitions":{"x":[1]}}', 'partition id "x"', id="key-x"),
    pytest.param(TopicZNode.decode, TOPIC_PATH,
                 b'{"version":1,"partitions":{"-1":[1]}}', 'partition id "-1"', id="key-neg"),
    pytest.param(TopicZNode.decode, TOPIC_PATH,
                 b'{"version":1,"partitions":{"0":[1],"00":[2]}}', "more than once",
                 id="key-collision"),
    pytest.param(TopicZNode.decode, TOPIC_PATH,
                 b'{"version":1,"partitions":{"0":[1,1]}}', "more than once", id="dup-replicas"),
    pytest.param(TopicZNode.decode, TOPIC_PATH, b'{"version":1}',
                 'missing key "partitions"', id="topic-missing-partitions"),
    pytest.param(BrokerIdZNode.decode, BROKER_PATH,
                 b'{"version":2,"host":"h","port":1,"jmx_port":-1,"timestamp":"1"}',
                 'missing key "endpoints"', id="broker-v2-no-endpoints"),
    pytest.param(BrokerIdZNode.decode, BROKER_PATH,
                 b'{"version":1,"port":1,"jmx_port":-1,"timestamp":"1"}',
                 'missing key "host"', id="broker-v1-no-host"),
    pytest.param(BrokerIdZNode.decode, BROKER_PATH,
                 b'{"version":1,"host":"h","port":"9092","jmx_port":-1}', "port",
                 id="broker-port-string"),
    pytest.param(BrokerIdZNode.decode, BROKER_PATH,
                 b'{"version":1,"host":"h","port":9092,"timestamp":1}', "string of digits",
                 id="broker-timestamp-int"),
    pytest.param(BrokerIdZNode.decode, BROKER_PATH,
                 b'{"version":4,"host":null,"port":-1,"endpoints":["SSL://h:9093"]}',
                 "no PLAINTEXT endpoint", id="broker-no-plaintext"),
    pytest.param(BrokerIdZNode.decode, BROKER_PATH,
                 b'{"version":2,"host":"h","port":1,"endpoints":["h:1"]}', "endpoints[0]",
                 id="broker-bad-endpoint"),
    pytest.param(BrokerIdZNode.decode, "/brokers/ids/x", V1_BROKER,
                 "broker id", id="broker-path"),
    pytest.param(ControllerZNode.decode, "/controller", b"true",
                 "JSON object", id="controller-true"),
    pytest.param(ControllerZNode.decode, "/controller", b"-1",
                 "controller id", id="controller-negative"),
    pytest.param(ControllerZNode.decode, "/controller", b'{"version":1}',
                 'missing key "brokerid"', id="controller-missing"),
    pytest.param(ControllerEpochZNode.decode, "/controller_epoch", b"abc",
                 "decimal integer", id="epoch-text"),
    pytest.param(ControllerEpochZNode.decode, "/controller_epoch", b"+5",
                 "decimal integer", id="epoch-plus"),
    pytest.param(ControllerEpochZNode.decode, "/controller_epoch", b"-1",
                 ">= 0", id="epoch-negative"),
    pytest.param(ControllerEpochZNode.decode, "/controller_epoch", b"",
                 "decimal integer", id="epoch-empty"),
    pytest.param(ClusterIdZNode.decode, "/cluster/id", b'{"version":"1"}',
                 'missing key "id"', id="cluster-id-missing"),
    pytest.param(ReassignPartitionsZNode.decode, "/admin/reassign_partitions",
                 b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}',
                 "partitions[0].replicas must not be empty", id="reassign-empty-replicas"),
    pytest.param(ReassignPartitionsZNode.decode, "/admin/reassign_partitions",
                 b'{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
                 b'{"topic":"t","partition":0,"replicas":[2]}]}', "more than once",
                 id="reassign-dup-partition"),
    pytest.param(ReassignPartitionsZNode.decode, "/admin/reassign_partitions",
                 b'{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}',
                 "partitions[0].partition", id="reassign-partition-string"),
    pytest.param(ReassignPartitionsZNode.decode, "/admin/reassign_partitions",
                 b'{"partitions":[{"partition":0,"replicas":[1]}]}',
                 'missing key partitions[0]."topic"', id="reassign-missing-topic"),
    pytest.param(PreferredReplicaElectionZNode.decode,
                 "/admin/preferred_replica_election", b'{"version":1}',
                 'missing key "partitions"', id="preferred-missing"),
    pytest.param(TopicConfigZNode.decode, "/config/topics/t",
                 b'{"version":1,"config":{"retention.ms":1000}}', "must be a string",
                 id="config-int-value"),
    pytest.param(ConfigChangeZNode.decode, "/config/changes/config_change_1",
                 b'{"version":3,"entity_path":"topics/t"}', "unsupported", id="change-v3"),
    pytest.param(ConfigChangeZNode.decode, "/config/changes/config_change_1",
                 b'{"version":2,"entity_path":"topics"}', "<type>/<name>", id="change-no-name"),
    pytest.param(ConfigChangeZNode.decode, "/config/changes/config_change_1",
                 b"5", "object or a topic name", id="change-int"),
    pytest.param(IsrChangeNotificationZNode.decode, "/isr_change_notification/i",
                 b'{"version":1,"partitions":[{"topic":"t","partition":-1}]}',
                 "partitions[0].partition", id="isr-change-negative"),
    pytest.param(ConsumerOffsetZNode.decode, "/consumers/g/offsets/t/0",
                 b"4x", "decimal integer", id="offset-text"),
]


@pytest.mark.parametrize("decode, path, data, reason", MALFORMED)
def test_malformed_data_raises_naming_the_path(
        decode: Callable[[bytes | None, str], Any], path: str, data: bytes | None,
        reason: str) -> None:
    with pytest.raises(MalformedZnode) as caught:
        decode(data, path)
    assert isinstance(caught.value, ValueError)
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}: ")
    assert reason in caught.value.reason


def test_preferred_election_duplicates_have_their_own_error_and_kafkas_message() -> None:
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":1},' \
           b'{"topic":"t","partition":0}]}'
    with pytest.raises(DuplicatePartitions) as caught:
        PreferredReplicaElectionZNode.decode(data)
    assert caught.value.duplicates == (TP("t", 0),)
    assert str(caught.value) == ("/admin/preferred_replica_election: Preferred replica election "
                                 "data contains duplicate partitions: [t,0]")
    with pytest.raises(DuplicatePartitions):
        PreferredReplicaElectionZNode.encode([TP("t", 0), TP("t", 0)])
