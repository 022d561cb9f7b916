"""Flexible versions (KIP-482): compact types, tagged fields, header versions, ApiVersions v3.

Round trips of every flexible sample live in test_protocol.py (REQUESTS/RESPONSES);
here: exact bytes, the header choice, and bad input, in the codec and on a live server.
"""
from __future__ import annotations

import types

import pytest

from kafka_ha.broker.kafka_apis import KafkaApis
from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.protocol.api import ApiKey as K, request_header_version, response_header_version
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import (
    RequestHeader, decode_request, decode_request_body, decode_response, encode_request,
    encode_response)
from kafka_ha.protocol.primitives import ProtocolError, Reader, Writer
from kafka_ha.protocol.schema import (
    COMPACT_BYTES, COMPACT_NULLABLE_BYTES, COMPACT_NULLABLE_STRING, COMPACT_STRING, INT32,
    CompactArray, Struct, read_unsigned_varint, skip_tagged_fields, write_unsigned_varint)
from tests.harness.protocol_samples import i16, i32, s
from tests.harness.raw_socket import assert_closed_by_peer, raw_connect, recv_frame, serving


def encoded(typ, value) -> bytes:
    writer = Writer()
    typ.encode(writer, value)
    return writer.getvalue()


# -- primitives ---------------------------------------------------------------------

@pytest.mark.parametrize("value, data", [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (2**32 - 1, b"\xff\xff\xff\xff\x0f")])
def test_unsigned_varint_bytes(value, data):
    writer = Writer()
    write_unsigned_varint(writer, value)
    assert writer.getvalue() == data
    reader = Reader(data)
    assert read_unsigned_varint(reader) == value and reader.remaining() == 0


def test_unsigned_varint_bad_input():
    with pytest.raises(ProtocolError, match="longer than 5 bytes"):
        read_unsigned_varint(Reader(b"\xff" * 6))
    with pytest.raises(ProtocolError, match="truncated"):
        read_unsigned_varint(Reader(b"\x80\x80"))
    for bad in (-1, 2**32):
        with pytest.raises(ProtocolError):
            write_unsigned_varint(Writer(), bad)


def test_compact_strings_bytes_and_arrays():
    assert encoded(COMPACT_STRING, "abc") == b"\x04abc"
    assert encoded(COMPACT_STRING, "") == b"\x01"
    assert encoded(COMPACT_NULLABLE_STRING, None) == b"\x00"
    assert encoded(COMPACT_STRING, "ż") == b"\x03\xc5\xbc"
    assert encoded(COMPACT_BYTES, b"\x00\x01") == b"\x03\x00\x01"
    assert encoded(COMPACT_NULLABLE_BYTES, None) == b"\x00"
    assert encoded(CompactArray(INT32), [1, 2]) == b"\x03" + i32(1, 2)
    assert encoded(CompactArray(INT32, nullable=True), None) == b"\x00"
    assert encoded(CompactArray(INT32), []) == b"\x01"
    for typ, data, value in [(COMPACT_STRING, b"\x04abc", "abc"), (COMPACT_NULLABLE_STRING, b"\x00", None),
                             (COMPACT_BYTES, b"\x01", b""), (COMPACT_NULLABLE_BYTES, b"\x00", None),
                             (CompactArray(INT32), b"\x03" + i32(7, 8), [7, 8]),
                             (CompactArray(COMPACT_STRING, nullable=True), b"\x00", None)]:
        reader = Reader(data)
        assert typ.decode(reader) == value and reader.remaining() == 0


@pytest.mark.parametrize("typ, data, message", [
    (COMPACT_STRING, b"\x00", "null string"),
    (COMPACT_BYTES, b"\x00", "null bytes"),
    (CompactArray(INT32), b"\x00", "null array"),
    (COMPACT_STRING, b"\x05ab", "truncated"),
    (COMPACT_STRING, b"\x03\xff\xfe", "invalid UTF-8"),
    (CompactArray(INT32), b"\x7f" + i32(1), "count 126 exceeds"),
    (CompactArray(INT32), b"\x03" + i32(1), "truncated"),
])
def test_compact_bad_input(typ, data, message):
    with pytest.raises(ProtocolError, match=message):
        typ.decode(Reader(data))


def test_compact_encode_refuses_null_where_not_nullable():
    for typ in (COMPACT_STRING, COMPACT_BYTES, CompactArray(INT32)):
        with pytest.raises(ProtocolError, match="null is not allowed"):
            encoded(typ, None)
    with pytest.raises(ProtocolError, match="expected str"):
        encoded(COMPACT_STRING, 5)


# -- tagged fields ----------------------------------------------------------------------

TAGGED = Struct(("id", INT32), ("name", COMPACT_STRING), tagged=True)


def test_tagged_struct_writes_an_empty_section_and_skips_unknown_tags():
    assert TAGGED.to_bytes({"id": 1, "name": "a"}) == i32(1) + b"\x02a" + b"\x00"
    # Two unknown tags (0: 3 bytes, 5: 1 byte), then the next struct's bytes.
    data = i32(1) + b"\x02a" + b"\x02" + b"\x00\x03xyz" + b"\x05\x01q"
    assert TAGGED.from_bytes(data) == {"id": 1, "name": "a"}
    nested = Struct(("items", CompactArray(TAGGED)), tagged=True)
    assert nested.from_bytes(b"\x02" + data + b"\x00") == {"items": [{"id": 1, "name": "a"}]}


@pytest.mark.parametrize("section, message", [
    (b"", "truncated"),                                # no section at all
    (b"\x01\x00\x05ab", "truncated"),                  # a field shorter than its size
    (b"\x02\x03\x00\x03\x00", "out of order"),         # tag 3 then tag 3 again
    (b"\x02\x04\x00\x01\x00", "out of order"),         # tag 4 then tag 1
    (b"\x09\x00\x00", "count 9 exceeds"),              # more fields than bytes left
    (b"\x01\xff\xff\xff\xff\xff\xff", "longer than 5 bytes"),   # a garbled tag
])
def test_bad_tagged_sections_raise_protocol_errors(section, message):
    with pytest.raises(ProtocolError, match=message) as err:
        TAGGED.from_bytes(i32(1) + b"\x02a" + section)
    assert err.value.path[0] == "_tagged_fields"
    with pytest.raises(ProtocolError):
        skip_tagged_fields(Reader(section))


# -- headers -------------------------------------------------------------------------


def test_header_versions_per_api_and_version():
    assert [request_header_version(K.API_VERSIONS, v) for v in range(5)] == [1, 1, 1, 2, 2]
    assert [response_header_version(K.API_VERSIONS, v) for v in range(5)] == [0] * 5
    assert [request_header_version(K.ELECT_LEADERS, v) for v in range(3)] == [1, 1, 2]
    assert [response_header_version(K.ELECT_LEADERS, v) for v in range(3)] == [0, 0, 1]
    assert request_header_version(K.ALTER_PARTITION_REASSIGNMENTS, 0) == 2
    assert response_header_version(K.LIST_PARTITION_REASSIGNMENTS, 0) == 1
    assert request_header_version(K.PRODUCE, 3) == 1 and response_header_version(K.FETCH, 4) == 0
    assert request_header_version(K.CONTROLLED_SHUTDOWN, 0) == 0


def test_request_header_v2_keeps_a_plain_client_id_then_tags():
    body = {"client_software_name": "app", "client_software_version": "1.2"}
    frame = encode_request(K.API_VERSIONS, 3, 9, "cli", body)
    assert frame[4:] == i16(18, 3) + i32(9) + s("cli") + b"\x00" + b"\x04app\x041.2\x00"
    # A null client id stays the i16 -1 of header v1.
    assert encode_request(K.API_VERSIONS, 3, 9, None, body)[12:14] == b"\xff\xff"
    # Unknown tags in the header are skipped.
    header, reader = decode_request(i16(18, 3) + i32(9) + s("cli") + b"\x01\x07\x02hi"
                                    + b"\x04app\x041.2\x00")
    assert header == RequestHeader(K.API_VERSIONS, 3, 9, "cli")
    assert decode_request_body(header, reader) == body


def test_response_header_v1_except_for_api_versions():
    body = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []}
    frame = encode_response(5, K.LIST_PARTITION_REASSIGNMENTS, 0, body)
    assert frame[4:] == i32(5) + b"\x00" + i32(0) + i16(0) + b"\x00" + b"\x01" + b"\x00"
    assert decode_response(K.LIST_PARTITION_REASSIGNMENTS, 0, frame[4:]) == (5, body)
    versions = encode_response(5, K.API_VERSIONS, 3, {"error_code": 0, "api_keys": [
        {"api_key": 0, "min_version": 0, "max_version": 7}], "throttle_time_ms": 0})
    # Header v0 (no tags after the correlation id), then the flexible body.
    assert versions[4:] == i32(5) + i16(0) + b"\x02" + i16(0, 0, 7) + b"\x00" + i32(0) + b"\x00"


def test_truncated_header_tags_fail_as_protocol_errors():
    with pytest.raises(ProtocolError):
        decode_request(i16(45, 0) + i32(1) + s("c"))               # no tag section
    with pytest.raises(ProtocolError):
        decode_request(i16(45, 0) + i32(1) + s("c") + b"\x01\x00\x09x")


# -- ApiVersions v3 in the request layer ---------------------------------------------------

def request_layer() -> KafkaApis:
    replicas = types.SimpleNamespace(leader_and_isr=None, stop_replica=None)
    return KafkaApis(replicas, MetadataCache(1))


def api_versions(apis: KafkaApis, version: int, body: bytes) -> dict:
    header, reader = decode_request(i16(18, version) + i32(1) + s("c") + b"\x00" + body)
    response, answered_version = apis.handle(header, reader)
    assert answered_version == version
    return response


def test_api_versions_v3_answers_and_checks_the_software_name():
    apis = request_layer()
    ok = api_versions(apis, 3, b"\x0cconfluent-1\x061.2.3\x00")
    assert ok["error_code"] == ErrorCode.NONE
    assert {k["api_key"] for k in ok["api_keys"]} == {int(key) for key in apis.apis}
    # KIP-511: names and versions must match [a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?
    for name, version in ((b"\x05bad!", b"\x021"), (b"\x01", b"\x021"), (b"\x02a", b"\x031-")):
        refused = api_versions(apis, 3, name + version + b"\x00")
        assert refused["error_code"] == ErrorCode.INVALID_REQUEST and refused["api_keys"] == []


# -- on a live server ---------------------------------------------------------------------

def decoding_handler(header, reader):
    body = decode_request_body(header, reader)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "topics": [] if body["topics"] is None else []}, header.api_version


def test_live_server_answers_flexible_requests_and_closes_on_garbled_tags():
    with serving(decoding_handler) as srv:
        sock = raw_connect(srv)
        good = i16(46, 0) + i32(3) + s("c") + b"\x00" + i32(1000) + b"\x00" + b"\x00"
        sock.sendall(i32(len(good)) + good)
        assert decode_response(K.LIST_PARTITION_REASSIGNMENTS, 0, recv_frame(sock))[0] == 3
        # A tag whose size runs past the end of the frame: the connection is closed.
        bad = i16(46, 0) + i32(4) + s("c") + b"\x00" + i32(1000) + b"\x00" + b"\x01\x00\x40"
        sock.sendall(i32(len(bad)) + bad)
        assert_closed_by_peer(sock)
        sock.close()
        # The server goes on serving others.
        other = raw_connect(srv)
        other.sendall(i32(len(good)) + good)
        assert decode_response(K.LIST_PARTITION_REASSIGNMENTS, 0, recv_frame(other))[0] == 3
        other.close()


def test_api_versions_v3_over_raw_frames():
    apis = request_layer()
    with serving(apis.handle) as srv:
        sock = raw_connect(srv)
        payload = i16(18, 3) + i32(77) + s("rdkafka") + b"\x00" + b"\x0blibrdkafka\x062.3.0\x00"
        sock.sendall(i32(len(payload)) + payload)
        frame = recv_frame(sock)
        # Header v0: the error code follows the correlation id directly.
        assert frame[:6] == i32(77) + i16(0)
        correlation_id, body = decode_response(K.API_VERSIONS, 3, frame)
        assert correlation_id == 77 and body["error_code"] == ErrorCode.NONE
        assert {k["api_key"] for k in body["api_keys"]} == {int(key) for key in apis.apis}
        # The same request with its software version cut short: the connection closes.
        cut = payload[:-4]
        sock.sendall(i32(len(cut)) + cut)
        assert_closed_by_peer(sock)
        sock.close()
