"""Byte builders and one realistic sample body per protocol schema, shared by the protocol tests."""
from __future__ import annotations

import struct

from kafka_ha.protocol.api import ApiKey, api_versions_entries
from kafka_ha.protocol.errors import ErrorCode
from tests.harness.config_admin_samples import CONFIG_ADMIN_REQUESTS, CONFIG_ADMIN_RESPONSES
from tests.harness.group_samples import GROUP_REQUESTS, GROUP_RESPONSES
from tests.harness.topic_admin_samples import TOPIC_ADMIN_REQUESTS, TOPIC_ADMIN_RESPONSES

K = ApiKey


# -- byte builders for hand-made expectations -----------------------------------

def i16(*values: int) -> bytes:
    return struct.pack(f">{len(values)}h", *values)


def i32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


def i64(*values: int) -> bytes:
    return struct.pack(f">{len(values)}q", *values)


def s(text: str) -> bytes:
    data = text.encode()
    return i16(len(data)) + data


# -- realistic sample bodies, one per schema --------------------------------------

RECORDS = bytes(range(70))  # opaque here; a stand-in for a message set
PARTITION_STATE = {
    "topic": "orders", "partition": 3, "controller_epoch": 5, "leader": 2,
    "leader_epoch": 7, "isr": [2, 1], "zk_version": 11, "replicas": [2, 1, 3]}
PARTITION_ERRORS = {"error_code": 0, "partition_errors": [
    {"topic": "orders", "partition": 3, "error_code": 0},
    {"topic": "orders", "partition": 4, "error_code": ErrorCode.STALE_CONTROLLER_EPOCH}]}


def produce_response(version: int) -> dict:
    partition = {"index": 0, "error_code": 0, "base_offset": 1234567890123}
    if version >= 2:
        partition["log_append_time_ms"] = -1
    if version >= 5:
        partition["log_start_offset"] = 17
    body = {"responses": [{"name": "orders", "partition_responses": [partition]}]}
    if version >= 1:
        body["throttle_time_ms"] = 0
    return body


def _metadata_response(version: int) -> dict:
    partitions = [
        {"error_code": 0, "partition_index": 0, "leader_id": 1,
         "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2]},
        {"error_code": 5, "partition_index": 1, "leader_id": -1,
         "replica_nodes": [2], "isr_nodes": []}]
    broker = {"node_id": 1, "host": "broker1.example", "port": 9092}
    topic = {"error_code": 0, "name": "orders", "partitions": partitions}
    if version == 0:
        return {"brokers": [broker], "topics": [topic]}
    body = {"brokers": [{**broker, "rack": None}, {**broker, "node_id": 2, "rack": "r1"}],
            "controller_id": 1, "topics": [{**topic, "is_internal": False}]}
    if version >= 2:
        body["cluster_id"] = None if version == 2 else "Zx9Yq3-_aBcDeFgHiJkLmN"
    if version >= 3:
        body["throttle_time_ms"] = 0
    for partition in body["topics"][0]["partitions"]:
        if version >= 5:
            partition["offline_replicas"] = [] if partition["leader_id"] >= 0 else [1]
        if version >= 7:
            partition["leader_epoch"] = 4 if partition["leader_id"] >= 0 else -1
    return body


def _fetch_request(version: int) -> dict:
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1,
            "topics": [{"topic": "orders", "partitions": [
                {"partition": 0, "fetch_offset": 42, "partition_max_bytes": 1048576},
                {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1048576}]}]}
    if version >= 3:
        body["max_bytes"] = 52428800
    if version >= 4:
        body["isolation_level"] = 1
    if version >= 5:
        for partition in body["topics"][0]["partitions"]:
            partition["log_start_offset"] = 3
    if version >= 7:
        body.update(session_id=123, session_epoch=4,
                    forgotten_topics_data=[{"topic": "refunds", "partitions": [2, 5]}])
    if version >= 9:
        for partition in body["topics"][0]["partitions"]:
            partition["current_leader_epoch"] = 6
    return body


def _fetch_response(version: int) -> dict:
    body = {"responses": [{"topic": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 100, "records": RECORDS},
        {"partition_index": 1, "error_code": 1, "high_watermark": -1, "records": None}]}]}
    if version >= 1:
        body["throttle_time_ms"] = 0
    if version >= 4:
        first, second = body["responses"][0]["partitions"]
        first.update(last_stable_offset=100, aborted_transactions=[
            {"producer_id": 7, "first_offset": 90}])
        second.update(last_stable_offset=-1, aborted_transactions=None)
    if version >= 5:
        first.update(log_start_offset=10)
        second.update(log_start_offset=-1)
    if version >= 7:
        body.update(error_code=0, session_id=123)
    return body


def _offset_commit_request(version: int) -> dict:
    partition = {"partition_index": 0, "committed_offset": 77, "committed_metadata": None}
    if version == 1:
        partition["commit_timestamp"] = -1
    body = {"group_id": "g1", "topics": [{"name": "orders", "partitions": [
        partition, {**partition, "partition_index": 1, "committed_metadata": "meta"}]}]}
    if version >= 1:
        body.update(generation_id=-1, member_id="")
    if 2 <= version <= 4:
        body["retention_time_ms"] = -1
    if version >= 6:
        for partition in body["topics"][0]["partitions"]:
            partition["committed_leader_epoch"] = 5
    return body


def api_versions_response(version: int) -> dict:
    body = {"error_code": 0, "api_keys": api_versions_entries()}
    if version >= 1:
        body["throttle_time_ms"] = 0
    return body


def _elect_leaders_request(version: int) -> dict:
    body = {"topic_partitions": [{"topic": "orders", "partitions": [0, 2]}] if version != 1 else None,
            "timeout_ms": 30000}
    if version >= 1:
        body["election_type"] = 0
    return body


def _elect_leaders_response(version: int) -> dict:
    body = {"throttle_time_ms": 0, "replica_election_results": [{"topic": "orders", "partition_result": [
        {"partition_id": 0, "error_code": 0, "error_message": None},
        {"partition_id": 2, "error_code": 84, "error_message": "already led by its preferred replica"}]}]}
    if version >= 1:
        body["error_code"] = 0
    return body


# Flexible (KIP-482) samples: compact strings/arrays, null arrays, non-ASCII text.
ADMIN_ELECTION_REQUESTS = {
    **{(K.ELECT_LEADERS, v): _elect_leaders_request(v) for v in range(3)},
    (K.ALTER_PARTITION_REASSIGNMENTS, 0): {"timeout_ms": 60000, "topics": [
        {"name": "orders", "partitions": [{"partition_index": 0, "replicas": [3, 1, 2]},
                                          {"partition_index": 1, "replicas": None}]}]},
    (K.LIST_PARTITION_REASSIGNMENTS, 0): {"timeout_ms": 60000, "topics": [
        {"name": "zamówienia", "partition_indexes": [0, 1]}]},
}
ADMIN_ELECTION_RESPONSES = {
    **{(K.ELECT_LEADERS, v): _elect_leaders_response(v) for v in range(3)},
    (K.ALTER_PARTITION_REASSIGNMENTS, 0): {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
            {"name": "orders", "partitions": [
                {"partition_index": 0, "error_code": 0, "error_message": None},
                {"partition_index": 1, "error_code": 85, "error_message": "no reassignment"}]}]},
    (K.LIST_PARTITION_REASSIGNMENTS, 0): {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "replicas": [3, 1, 2],
                                               "adding_replicas": [3], "removing_replicas": [2]}]}]},
}


REQUESTS = {
    (K.API_VERSIONS, 0): {}, (K.API_VERSIONS, 1): {}, (K.API_VERSIONS, 2): {},
    (K.API_VERSIONS, 3): {"client_software_name": "kafka-ha-tests", "client_software_version": "1.0"},
    **ADMIN_ELECTION_REQUESTS,
    (K.METADATA, 0): {"topics": ["orders", "payments"]},
    (K.METADATA, 1): {"topics": None},
    (K.METADATA, 2): {"topics": ["orders"]},
    (K.METADATA, 3): {"topics": []},
    **{(K.METADATA, v): {"topics": ["orders"], "allow_auto_topic_creation": v % 2 == 0}
       for v in range(4, 8)},
    (K.LEADER_AND_ISR, 0): {
        "controller_id": 1, "controller_epoch": 5, "partition_states": [PARTITION_STATE],
        "live_leaders": [{"id": 2, "host": "broker2", "port": 9092}]},
    (K.LEADER_AND_ISR, 1): {
        "controller_id": 1, "controller_epoch": 5,
        "partition_states": [{**PARTITION_STATE, "is_new": True}],
        "live_leaders": [{"id": 2, "host": "broker2", "port": 9092}]},
    **{(K.UPDATE_METADATA, v): {
        "controller_id": 1, "controller_epoch": 5,
        "partition_states": [{**PARTITION_STATE, "offline_replicas": [3]} if v >= 4
                             else PARTITION_STATE],
        "live_brokers": [{"id": 1, "rack": "r1" if v % 2 else None, "endpoints": [
            {"port": 9092, "host": "broker1", "security_protocol": 0,
             **({"listener": "PLAINTEXT"} if v >= 3 else {})}]}]} for v in range(2, 5)},
    (K.STOP_REPLICA, 0): {
        "controller_id": 1, "controller_epoch": 5, "delete_partitions": True,
        "partitions": [{"topic": "orders", "partition": 3}]},
    (K.UPDATE_METADATA, 0): {
        "controller_id": 1, "controller_epoch": 5, "partition_states": [PARTITION_STATE],
        "live_brokers": [{"id": 1, "host": "broker1", "port": 9092}]},
    (K.UPDATE_METADATA, 1): {
        "controller_id": 1, "controller_epoch": 5, "partition_states": [PARTITION_STATE],
        "live_brokers": [{"id": 1, "endpoints": [
            {"port": 9092, "host": "broker1", "security_protocol": 0}]}]},
    # KIP-380 (Kafka 2.2): the broker epoch, and partitions grouped by topic
    (K.LEADER_AND_ISR, 2): {
        "controller_id": 1, "controller_epoch": 5, "broker_epoch": 0x1234,
        "topic_states": [{"topic": "orders", "partition_states": [
            {k: v for k, v in PARTITION_STATE.items() if k != "topic"} | {"is_new": False}]}],
        "live_leaders": [{"id": 2, "host": "broker2", "port": 9092}]},
    (K.UPDATE_METADATA, 5): {
        "controller_id": 1, "controller_epoch": 5, "broker_epoch": 0x1234,
        "topic_states": [{"topic": "orders", "partition_states": [
            {k: v for k, v in PARTITION_STATE.items() if k != "topic"} | {"offline_replicas": [3]}]}],
        "live_brokers": [{"id": 1, "rack": "r1", "endpoints": [
            {"port": 9092, "host": "broker1", "listener": "PLAINTEXT", "security_protocol": 0}]}]},
    (K.STOP_REPLICA, 1): {
        "controller_id": 1, "controller_epoch": 5, "broker_epoch": 0x1234, "delete_partitions": True,
        "topics": [{"topic": "orders", "partition_indexes": [3]}]},
    (K.CONTROLLED_SHUTDOWN, 0): {"broker_id": 3},
    (K.CONTROLLED_SHUTDOWN, 1): {"broker_id": 3},
    (K.CONTROLLED_SHUTDOWN, 2): {"broker_id": 3, "broker_epoch": 0x1234},
    **{(K.OFFSETS_FOR_LEADER_EPOCH, v): {"topics": [
        {"topic": "orders", "partitions": [{"partition": 3, "leader_epoch": 6}]}]} for v in range(2)},
    (K.OFFSETS_FOR_LEADER_EPOCH, 2): {"topics": [{"topic": "orders", "partitions": [
        {"partition": 3, "current_leader_epoch": 7, "leader_epoch": 6}]}]},
    **{(K.PRODUCE, v): {**({"transactional_id": None} if v >= 3 else {}),
                        "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "orders", "partition_data": [{"index": 0, "records": RECORDS},
                                              {"index": 1, "records": None}]}]}
       for v in range(8)},
    **{(K.INIT_PRODUCER_ID, v): {"transactional_id": None, "transaction_timeout_ms": 60000}
       for v in range(2)},
    **{(K.FETCH, v): _fetch_request(v) for v in range(11)},
    (K.LIST_OFFSETS, 0): {"replica_id": -1, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}]}]},
    (K.LIST_OFFSETS, 1): {"replica_id": -1, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "timestamp": -2}]}]},
    **{(K.LIST_OFFSETS, v): {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": "orders", "partitions": [{"partition_index": 0, "timestamp": 1_600_000_000_000}]}]}
       for v in (2, 3)},
    (K.LIST_OFFSETS, 4): {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "current_leader_epoch": 5, "timestamp": -1}]}]},
    (K.FIND_COORDINATOR, 0): {"key": "my-group"},
    **{(K.OFFSET_COMMIT, v): _offset_commit_request(v) for v in range(3)},
    **{(K.OFFSET_FETCH, v): {"group_id": "g1", "topics": [
        {"name": "orders", "partition_indexes": [0, 1, 2]}]} for v in range(2)},
    **GROUP_REQUESTS,
    **CONFIG_ADMIN_REQUESTS,
    **TOPIC_ADMIN_REQUESTS,
}

RESPONSES = {
    **{(K.API_VERSIONS, v): api_versions_response(v) for v in range(4)},
    **ADMIN_ELECTION_RESPONSES,
    **{(K.METADATA, v): _metadata_response(v) for v in range(8)},
    **{(K.LEADER_AND_ISR, v): PARTITION_ERRORS for v in range(3)},
    **{(K.STOP_REPLICA, v): PARTITION_ERRORS for v in range(2)},
    (K.UPDATE_METADATA, 0): {"error_code": 0},
    **{(K.UPDATE_METADATA, v): {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH} for v in range(1, 6)},
    **{(K.CONTROLLED_SHUTDOWN, v): {"error_code": 0, "remaining_partitions": [
        {"topic": "orders", "partition": 3}]} for v in range(3)},
    (K.OFFSETS_FOR_LEADER_EPOCH, 0): {"topics": [{"topic": "orders", "partitions": [
        {"error_code": 0, "partition": 3, "end_offset": 120},
        {"error_code": 6, "partition": 4, "end_offset": -1}]}]},
    (K.OFFSETS_FOR_LEADER_EPOCH, 1): {"topics": [{"topic": "orders", "partitions": [
        {"error_code": 0, "partition": 3, "leader_epoch": 5, "end_offset": 120}]}]},
    (K.OFFSETS_FOR_LEADER_EPOCH, 2): {"throttle_time_ms": 0, "topics": [{"topic": "orders", "partitions": [
        {"error_code": ErrorCode.FENCED_LEADER_EPOCH, "partition": 3, "leader_epoch": -1,
         "end_offset": -1}]}]},
    **{(K.PRODUCE, v): produce_response(v) for v in range(8)},
    **{(K.INIT_PRODUCER_ID, v): {"throttle_time_ms": 0, "error_code": 0, "producer_id": 4000,
                                 "producer_epoch": 0} for v in range(2)},
    **{(K.FETCH, v): _fetch_response(v) for v in range(11)},
    (K.LIST_OFFSETS, 0): {"topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0, "old_style_offsets": [1000]}]}]},
    (K.LIST_OFFSETS, 1): {"topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 1000}]}]},
    **{(K.LIST_OFFSETS, v): {"throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0, "timestamp": 1_600_000_000_007, "offset": 1000}]}]}
       for v in (2, 3)},
    (K.LIST_OFFSETS, 4): {"throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 1000, "leader_epoch": 5}]}]},
    (K.FIND_COORDINATOR, 0): {"error_code": 0, "node_id": 1, "host": "broker1", "port": 9092},
    **{(K.OFFSET_COMMIT, v): {"topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0},
        {"partition_index": 1, "error_code": 12}]}]} for v in range(3)},
    **{(K.OFFSET_FETCH, v): {"topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "committed_offset": 77, "metadata": "", "error_code": 0},
        {"partition_index": 1, "committed_offset": -1, "metadata": None, "error_code": 0}]}]}
       for v in range(2)},
    **GROUP_RESPONSES,
    **CONFIG_ADMIN_RESPONSES,
    **TOPIC_ADMIN_RESPONSES,
}


def plain(value):
    """Decoded values hold memoryviews for records; compare them as bytes."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
