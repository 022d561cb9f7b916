"""The Kafka protocol layer's codecs: schemas, framing, primitives, byte layouts."""
from __future__ import annotations

import struct

import pytest

from kafka_ha.protocol.api import (
    ADVERTISED_VERSIONS, REQUEST_SCHEMAS, RESPONSE_SCHEMAS, SUPPORTED_VERSIONS, ApiKey,
    request_header_version)
from kafka_ha.protocol.errors import ErrorCode, KafkaProtocolError, UnsupportedVersion
from kafka_ha.protocol.framing import (
    RequestHeader, decode_request, decode_request_body, decode_response,
    encode_request, encode_response)
from kafka_ha.protocol.primitives import ProtocolError, Reader, Writer
from kafka_ha.protocol.schema import INT32, STRING, Array, MissingFieldError, Struct
from tests.harness.protocol_samples import (RECORDS, REQUESTS, RESPONSES, i16, i32, i64, plain,
                                            s)


K = ApiKey


# -- schemas and framing ---------------------------------------------------------

def test_every_schema_has_a_sample_and_versions_table_matches():
    assert set(REQUESTS) == set(REQUEST_SCHEMAS) == set(RESPONSES) == set(RESPONSE_SCHEMAS)
    assert SUPPORTED_VERSIONS[K.PRODUCE] == (0, 7)
    assert SUPPORTED_VERSIONS[K.INIT_PRODUCER_ID] == (0, 1)
    assert SUPPORTED_VERSIONS[K.METADATA] == (0, 7)
    assert SUPPORTED_VERSIONS[K.FETCH] == (0, 10)
    assert SUPPORTED_VERSIONS[K.OFFSETS_FOR_LEADER_EPOCH] == (0, 2)
    # nothing is hidden from clients any more (the ranges: test_api_version_table.py)
    assert ADVERTISED_VERSIONS == SUPPORTED_VERSIONS
    assert SUPPORTED_VERSIONS[K.API_VERSIONS] == (0, 3)
    assert SUPPORTED_VERSIONS[K.UPDATE_METADATA] == (0, 5)
    assert SUPPORTED_VERSIONS[K.LEADER_AND_ISR] == (0, 2)
    assert SUPPORTED_VERSIONS[K.STOP_REPLICA] == (0, 1)
    assert SUPPORTED_VERSIONS[K.DELETE_GROUPS] == (0, 1)
    assert SUPPORTED_VERSIONS[K.DESCRIBE_CONFIGS] == (0, 2)
    assert SUPPORTED_VERSIONS[K.INCREMENTAL_ALTER_CONFIGS] == (0, 0)
    assert len(SUPPORTED_VERSIONS) == 32
    # Kafka 2.1's topic admin versions
    assert SUPPORTED_VERSIONS[K.CREATE_TOPICS] == SUPPORTED_VERSIONS[K.DELETE_TOPICS] == (0, 3)
    assert SUPPORTED_VERSIONS[K.CREATE_PARTITIONS] == (0, 1)


@pytest.mark.parametrize("key_version", sorted(REQUESTS), ids=lambda kv: f"{kv[0].name}-v{kv[1]}")
def test_request_round_trip(key_version):
    key, version = key_version
    frame = encode_request(key, version, 123456, "client-1", REQUESTS[key_version])
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    header, reader = decode_request(frame[4:])
    expected_client = None if (key, version) == (K.CONTROLLED_SHUTDOWN, 0) else "client-1"
    assert header == RequestHeader(key, version, 123456, expected_client)
    assert plain(decode_request_body(header, reader)) == REQUESTS[key_version]


@pytest.mark.parametrize("key_version", sorted(RESPONSES), ids=lambda kv: f"{kv[0].name}-v{kv[1]}")
def test_response_round_trip(key_version):
    key, version = key_version
    frame = encode_response(-7, key, version, RESPONSES[key_version])
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    correlation_id, body = decode_response(key, version, frame[4:])
    assert correlation_id == -7
    assert plain(body) == RESPONSES[key_version]


def test_records_decode_as_zero_copy_memoryview():
    frame = encode_response(1, K.FETCH, 3, RESPONSES[(K.FETCH, 3)])
    _, body = decode_response(K.FETCH, 3, frame[4:])
    records = body["responses"][0]["partitions"][0]["records"]
    assert isinstance(records, memoryview) and records.obj is not None
    assert bytes(records) == RECORDS


def test_leader_and_isr_v0_request_bytes():
    body = {"controller_id": 1, "controller_epoch": 5,
            "partition_states": [{"topic": "t", "partition": 0, "controller_epoch": 5,
                                  "leader": 2, "leader_epoch": 7, "isr": [2, 3],
                                  "zk_version": 11, "replicas": [2, 3, 1]}],
            "live_leaders": [{"id": 2, "host": "h2", "port": 9092}]}
    expected_body = (
        i32(1, 5)
        + i32(1) + s("t") + i32(0, 5, 2, 7) + i32(2, 2, 3) + i32(11) + i32(3, 2, 3, 1)
        + i32(1) + i32(2) + s("h2") + i32(9092))
    expected_header = i16(4, 0) + i32(99) + s("ctrl")
    frame = encode_request(K.LEADER_AND_ISR, 0, 99, "ctrl", body)
    assert frame == i32(len(expected_header) + len(expected_body)) + expected_header + expected_body


def test_update_metadata_v1_puts_port_before_host():
    body = {"controller_id": 1, "controller_epoch": 2, "partition_states": [],
            "live_brokers": [{"id": 7, "endpoints": [
                {"port": 9093, "host": "b7", "security_protocol": 0}]}]}
    expected = i32(1, 2) + i32(0) + i32(1) + i32(7) + i32(1) + i32(9093) + s("b7") + i16(0)
    assert REQUEST_SCHEMAS[(K.UPDATE_METADATA, 1)].to_bytes(body) == expected


def test_api_versions_v0_response_bytes():
    body = {"error_code": 0, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 2},
        {"api_key": 3, "min_version": 0, "max_version": 1}]}
    payload = i32(3) + i16(0) + i32(2) + i16(18, 0, 2) + i16(3, 0, 1)
    assert encode_response(3, K.API_VERSIONS, 0, body) == i32(len(payload)) + payload


# Round trips cannot catch a field in the wrong place, so pin the layouts that
# differ subtly between versions (Fetch v1-v7 above all) to hand-built bytes.
LAYOUT_CASES = [
    # KIP-98: the nullable transactional_id comes first, before acks.
    ("produce-v3-request-transactional-id", REQUEST_SCHEMAS[(K.PRODUCE, 3)],
     {"transactional_id": None, "acks": -1, "timeout_ms": 100,
      "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"xy"}]}]},
     i16(-1) + i16(-1) + i32(100) + i32(1) + s("t") + i32(1) + i32(0) + i32(2) + b"xy"),
    # v5: log_start_offset after log_append_time_ms; throttle_time_ms last.
    ("produce-v5-response-log-start", RESPONSE_SCHEMAS[(K.PRODUCE, 5)],
     {"responses": [{"name": "t", "partition_responses": [
         {"index": 0, "error_code": 45, "base_offset": -1, "log_append_time_ms": -1,
          "log_start_offset": 3}]}], "throttle_time_ms": 0},
     i32(1) + s("t") + i32(1) + i32(0) + i16(45) + i64(-1, -1, 3) + i32(0)),
    ("init-producer-id-v0", RESPONSE_SCHEMAS[(K.INIT_PRODUCER_ID, 0)],
     {"throttle_time_ms": 0, "error_code": 0, "producer_id": 1000, "producer_epoch": 0},
     i32(0) + i16(0) + i64(1000) + i16(0)),
    # v3: throttle_time_ms first; the cluster id (v2+) between brokers and controller_id.
    ("metadata-v3-response", RESPONSE_SCHEMAS[(K.METADATA, 3)],
     {"throttle_time_ms": 0, "brokers": [], "cluster_id": "c", "controller_id": 2, "topics": []},
     i32(0) + i32(0) + s("c") + i32(2) + i32(0)),
    ("metadata-v4-request-auto-create", REQUEST_SCHEMAS[(K.METADATA, 4)],
     {"topics": None, "allow_auto_topic_creation": True}, i32(-1) + b"\x01"),
    ("fetch-v1-response-throttle-first", RESPONSE_SCHEMAS[(K.FETCH, 1)],
     {"throttle_time_ms": 5, "responses": [{"topic": "t", "partitions": [
         {"partition_index": 0, "error_code": 0, "high_watermark": 9, "records": b"xy"}]}]},
     i32(5) + i32(1) + s("t") + i32(1) + i32(0) + i16(0) + i64(9) + i32(2) + b"xy"),
    ("fetch-v3-request-max-bytes", REQUEST_SCHEMAS[(K.FETCH, 3)],
     {"replica_id": 2, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1024,
      "topics": [{"topic": "t", "partitions": [
          {"partition": 0, "fetch_offset": 7, "partition_max_bytes": 512}]}]},
     i32(2, 500, 1, 1024) + i32(1) + s("t") + i32(1) + i32(0) + i64(7) + i32(512)),
    ("fetch-v4-request-isolation-level", REQUEST_SCHEMAS[(K.FETCH, 4)],
     {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1024, "isolation_level": 1,
      "topics": [{"topic": "t", "partitions": [
          {"partition": 0, "fetch_offset": 7, "partition_max_bytes": 512}]}]},
     i32(-1, 500, 1, 1024) + b"\x01" + i32(1) + s("t") + i32(1) + i32(0) + i64(7) + i32(512)),
    # KIP-98 fields sit between high_watermark and records; aborted_transactions is nullable.
    ("fetch-v4-response-lso-aborted", RESPONSE_SCHEMAS[(K.FETCH, 4)],
     {"throttle_time_ms": 0, "responses": [{"topic": "t", "partitions": [
         {"partition_index": 0, "error_code": 0, "high_watermark": 9, "last_stable_offset": 9,
          "aborted_transactions": [{"producer_id": 3, "first_offset": 4}], "records": b"xy"},
         {"partition_index": 1, "error_code": 6, "high_watermark": -1, "last_stable_offset": -1,
          "aborted_transactions": None, "records": None}]}]},
     i32(0) + i32(1) + s("t") + i32(2)
     + i32(0) + i16(0) + i64(9, 9) + i32(1) + i64(3, 4) + i32(2) + b"xy"
     + i32(1) + i16(6) + i64(-1, -1) + i32(-1) + i32(-1)),
    # KIP-227: the session fields follow isolation_level; log_start_offset sits
    # between fetch_offset and partition_max_bytes; forgotten topics come last.
    ("fetch-v7-request-session", REQUEST_SCHEMAS[(K.FETCH, 7)],
     {"replica_id": 2, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1024, "isolation_level": 0,
      "session_id": 77, "session_epoch": 3,
      "topics": [{"topic": "t", "partitions": [
          {"partition": 0, "fetch_offset": 7, "log_start_offset": 2, "partition_max_bytes": 512}]}],
      "forgotten_topics_data": [{"topic": "u", "partitions": [1]}]},
     i32(2, 500, 1, 1024) + b"\x00" + i32(77, 3) + i32(1) + s("t") + i32(1) + i32(0) + i64(7, 2)
     + i32(512) + i32(1) + s("u") + i32(1, 1)),
    # The v7 response: error_code and session_id after the throttle time;
    # log_start_offset after last_stable_offset.
    ("fetch-v7-response-session", RESPONSE_SCHEMAS[(K.FETCH, 7)],
     {"throttle_time_ms": 0, "error_code": 0, "session_id": 77, "responses": [{"topic": "t", "partitions": [
         {"partition_index": 0, "error_code": 0, "high_watermark": 9, "last_stable_offset": 9,
          "log_start_offset": 4, "aborted_transactions": None, "records": b"xy"}]}]},
     i32(0) + i16(0) + i32(77) + i32(1) + s("t") + i32(1)
     + i32(0) + i16(0) + i64(9, 9, 4) + i32(-1) + i32(2) + b"xy"),
    ("produce-v2-response", RESPONSE_SCHEMAS[(K.PRODUCE, 2)],
     {"responses": [{"name": "t", "partition_responses": [
         {"index": 0, "error_code": 0, "base_offset": 100, "log_append_time_ms": -1}]}],
      "throttle_time_ms": 0},
     i32(1) + s("t") + i32(1) + i32(0) + i16(0) + i64(100, -1) + i32(0)),
    ("metadata-v1-response", RESPONSE_SCHEMAS[(K.METADATA, 1)],
     {"brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
      "controller_id": 1,
      "topics": [{"error_code": 0, "name": "t", "is_internal": False, "partitions": [
          {"error_code": 0, "partition_index": 0, "leader_id": 1,
           "replica_nodes": [1], "isr_nodes": [1]}]}]},
     i32(1, 1) + s("h") + i32(9092) + i16(-1) + i32(1)
     + i32(1) + i16(0) + s("t") + b"\x00" + i32(1) + i16(0) + i32(0, 1) + i32(1, 1) + i32(1, 1)),
    ("offset-commit-v1-request", REQUEST_SCHEMAS[(K.OFFSET_COMMIT, 1)],
     {"group_id": "g", "generation_id": -1, "member_id": "", "topics": [
         {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                       "commit_timestamp": -1, "committed_metadata": None}]}]},
     s("g") + i32(-1) + s("") + i32(1) + s("t") + i32(1) + i32(0) + i64(5, -1) + i16(-1)),
    ("offset-commit-v2-request", REQUEST_SCHEMAS[(K.OFFSET_COMMIT, 2)],
     {"group_id": "g", "generation_id": 3, "member_id": "m", "retention_time_ms": -1,
      "topics": [{"name": "t", "partitions": [
          {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]}]},
     s("g") + i32(3) + s("m") + i64(-1) + i32(1) + s("t") + i32(1) + i32(0) + i64(5) + s("")),
    ("offset-fetch-v1-response", RESPONSE_SCHEMAS[(K.OFFSET_FETCH, 1)],
     {"topics": [{"name": "t", "partitions": [
         {"partition_index": 0, "committed_offset": -1, "metadata": None, "error_code": 0}]}]},
     i32(1) + s("t") + i32(1) + i32(0) + i64(-1) + i16(-1) + i16(0)),
    ("list-offsets-v0-response", RESPONSE_SCHEMAS[(K.LIST_OFFSETS, 0)],
     {"topics": [{"name": "t", "partitions": [
         {"partition_index": 0, "error_code": 0, "old_style_offsets": [9, 0]}]}]},
     i32(1) + s("t") + i32(1) + i32(0) + i16(0) + i32(2) + i64(9, 0)),
    ("offsets-for-leader-epoch-v0-response", RESPONSE_SCHEMAS[(K.OFFSETS_FOR_LEADER_EPOCH, 0)],
     {"topics": [{"topic": "t", "partitions": [
         {"error_code": 0, "partition": 2, "end_offset": 50}]}]},
     i32(1) + s("t") + i32(1) + i16(0) + i32(2) + i64(50)),
    ("stop-replica-v0-request", REQUEST_SCHEMAS[(K.STOP_REPLICA, 0)],
     {"controller_id": 1, "controller_epoch": 2, "delete_partitions": True,
      "partitions": [{"topic": "t", "partition": 4}]},
     i32(1, 2) + b"\x01" + i32(1) + s("t") + i32(4)),
]


@pytest.mark.parametrize("schema, body, expected",
                         [case[1:] for case in LAYOUT_CASES], ids=[c[0] for c in LAYOUT_CASES])
def test_layout_bytes(schema, body, expected):
    assert schema.to_bytes(body) == expected
    assert plain(schema.from_bytes(expected)) == body


def test_controlled_shutdown_v0_uses_header_v0():
    assert request_header_version(K.CONTROLLED_SHUTDOWN, 0) == 0
    assert request_header_version(K.CONTROLLED_SHUTDOWN, 1) == 1
    frame = encode_request(K.CONTROLLED_SHUTDOWN, 0, 5, "ignored", {"broker_id": 3})
    assert frame == i32(12) + i16(7, 0) + i32(5) + i32(3)


@pytest.mark.parametrize("key_version", [(K.LEADER_AND_ISR, 0), (K.METADATA, 1),
                                         (K.FETCH, 3), (K.OFFSET_COMMIT, 1)])
def test_every_truncation_raises_protocol_error(key_version):
    for samples, schemas in ((REQUESTS, REQUEST_SCHEMAS), (RESPONSES, RESPONSE_SCHEMAS)):
        schema = schemas[key_version]
        data = schema.to_bytes(samples[key_version])
        for cut in range(len(data)):
            with pytest.raises(ProtocolError):
                schema.decode(Reader(data[:cut]))


def test_truncated_request_header_and_trailing_bytes():
    with pytest.raises(ProtocolError, match="truncated"):
        decode_request(i16(3, 0) + i16(0))
    frame = encode_request(K.FIND_COORDINATOR, 0, 1, "c", {"key": "g"})
    header, reader = decode_request(frame[4:] + b"\x00")
    with pytest.raises(ProtocolError, match="trailing"):
        decode_request_body(header, reader)


@pytest.mark.parametrize("schema, data, message", [
    (Struct(("name", STRING)), i16(-2), "invalid string length -2"),
    (Struct(("name", STRING)), i16(-1), "invalid string length -1"),  # not nullable
    (Struct(("items", Array(STRING))), i32(-5), "invalid array count -5"),
    (Struct(("items", Array(STRING))), i32(0x7FFFFFFF) + s("x"),
     "invalid array count 2147483647"),
    (Struct(("ids", Array(INT32))), i32(0x7FFFFFFF) + i32(1), "truncated"),
])
def test_bad_lengths_are_rejected(schema, data, message):
    with pytest.raises(ProtocolError, match=message):
        schema.decode(Reader(data))


def test_null_for_non_nullable_array_and_error_paths():
    with pytest.raises(ProtocolError, match="non-nullable array"):
        REQUEST_SCHEMAS[(K.METADATA, 0)].from_bytes(i32(-1))
    assert REQUEST_SCHEMAS[(K.METADATA, 1)].from_bytes(i32(-1)) == {"topics": None}
    produce = {"acks": 1, "timeout_ms": 1000,
               "topic_data": [{"name": "t", "partition_data": [{"index": 0}]}]}
    with pytest.raises(MissingFieldError) as missing:
        REQUEST_SCHEMAS[(K.PRODUCE, 0)].to_bytes(produce)
    assert isinstance(missing.value, KeyError)
    assert missing.value.path == ("topic_data", "partition_data", "records")
    with pytest.raises(ProtocolError, match=r"^acks: cannot encode 40000 as int16"):
        REQUEST_SCHEMAS[(K.PRODUCE, 0)].to_bytes({**produce, "acks": 40000})
    with pytest.raises(ProtocolError, match="truncated"):
        Struct(("a", Array(INT32))).from_bytes(i32(3) + i32(1, 2))


def test_unsupported_version_error():
    # v4 is above what we serve; its header is still v2 (client id, then tags).
    header, reader = decode_request(i16(18, 4) + i32(1) + s("x") + b"\x00" + b"\x00")
    assert header == RequestHeader(K.API_VERSIONS, 4, 1, "x")
    with pytest.raises(UnsupportedVersion) as err:
        decode_request_body(header, reader)
    assert err.value.code is ErrorCode.UNSUPPORTED_VERSION
    assert isinstance(err.value, KafkaProtocolError)
    with pytest.raises(UnsupportedVersion):
        encode_request(K.PRODUCE, 8, 1, "c", {})


def test_error_codes():
    assert ErrorCode.NONE == 0 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode(11).name == "STALE_CONTROLLER_EPOCH"
    assert ErrorCode(41).name == "NOT_CONTROLLER"
    assert ErrorCode(6).name == "NOT_LEADER_FOR_PARTITION"
    assert ErrorCode(77).name == "STALE_BROKER_EPOCH"


def test_writer_reader_primitives():
    w = Writer()
    w.int8(-1); w.int64(-2); w.uint32(0xFFFFFFFF); w.boolean(True)
    w.nullable_bytes(None); w.bytes_(b"ab"); w.array(None, Writer.int32); w.string("é")
    r = Reader(w.getvalue())
    assert (r.int8(), r.int64(), r.uint32(), r.boolean()) == (-1, -2, 0xFFFFFFFF, True)
    assert (r.nullable_bytes(), r.bytes_(), r.array(Reader.int32), r.string()) == \
        (None, b"ab", None, "é")
    assert r.remaining() == 0
    with pytest.raises(ProtocolError, match="UTF-8"):
        Reader(i16(1) + b"\xff").string()


def test_a_body_encoded_once_is_reused_by_every_frame():
    from kafka_ha.protocol.framing import EncodedOnce
    states = [{"topic": "t", "partition": p, "controller_epoch": 1, "leader": 1, "leader_epoch": 2,
               "isr": [1, 2], "zk_version": 3, "replicas": [1, 2]} for p in range(3)]
    plain_body = {"controller_id": 1, "controller_epoch": 1, "partition_states": states, "live_leaders": []}
    body = EncodedOnce(plain_body)
    first = encode_request(K.LEADER_AND_ISR, 0, 7, "c", body)
    assert first == encode_request(K.LEADER_AND_ISR, 0, 7, "c", plain_body)
    body["partition_states"] = []                 # not allowed once sent: shows the bytes are kept
    second = encode_request(K.LEADER_AND_ISR, 0, 8, "c", body)
    assert second == encode_request(K.LEADER_AND_ISR, 0, 8, "c", plain_body)
    header, reader = decode_request(second[4:])
    assert header.correlation_id == 8 and plain(decode_request_body(header, reader)) == plain_body
