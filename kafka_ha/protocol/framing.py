"""Whole request/response frames: size prefix, headers, and body dispatch.

Encoders return the complete frame including the i32 size prefix.  Decoders
take the frame *without* that prefix -- the bytes a socket reader collected
after validating the size.

The request header is decoded without knowing whether the (key, version) is
supported: its first four fields are the same in header v1 and v2, so the
server can always learn the correlation id and answer or close properly.
Flexible versions (KIP-482) add a tagged-field section after the client id
(request header v2, whose client id stays a non-compact string) and after the
correlation id (response header v1); ``api.py`` chooses the header versions.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kafka_ha.protocol.api import (
    REQUEST_SCHEMAS, RESPONSE_SCHEMAS, ApiKey, request_header_version, response_header_version)
from kafka_ha.protocol.errors import UnsupportedVersion
from kafka_ha.protocol.file_region import FileRegions
from kafka_ha.protocol.primitives import Buffer, ProtocolError, Reader, Writer
from kafka_ha.protocol.schema import skip_tagged_fields

_KNOWN_KEYS = {int(key): key for key in ApiKey}


class RequestHeader(NamedTuple):
    api_key: int  # an ApiKey member when the key is known, else the raw int
    api_version: int
    correlation_id: int
    client_id: str | None


def _schema(table: dict, api_key: int, api_version: int):
    try:
        return table[(api_key, api_version)]
    except KeyError:
        raise UnsupportedVersion(api_key, api_version) from None


class EncodedOnce(dict):
    """A body sent unchanged in several frames (the controller's UpdateMetadata to every
    broker, 10k partition states each): encoded the first time, its bytes reused by the
    frames after.  It must not change once sent.

    >>> body = EncodedOnce(topics=None)
    >>> encode_request(ApiKey.METADATA, 1, 1, "c", body) == encode_request(ApiKey.METADATA, 1, 1, "c", {"topics": None})
    True
    """

    __slots__ = ("_encoded",)

    def __init__(self, *args: Any, **fields: Any) -> None:
        super().__init__(*args, **fields)
        self._encoded: dict[Any, bytes] = {}

    def encoded(self, schema: Any) -> bytes:
        data = self._encoded.get(schema)
        if data is None:
            data = self._encoded[schema] = schema.to_bytes(self)
        return data

    def encode_with(self, schema: Any, writer: Writer) -> None:
        writer.raw(self.encoded(schema))


class EncodedOnceFor(EncodedOnce):
    """An :class:`EncodedOnce` control request addressed to one broker (KIP-380): the
    shared bytes with this broker's epoch written over the INT64 that follows the
    controller id and epoch, so 10k partition states are still encoded once for all."""

    __slots__ = ("shared", "broker_epoch")
    EPOCH_AT = 8   # after controller_id (INT32) and controller_epoch (INT32)

    def __init__(self, shared: EncodedOnce, broker_epoch: int) -> None:
        super().__init__(shared, broker_epoch=broker_epoch)
        self.shared, self.broker_epoch = shared, broker_epoch

    def encode_with(self, schema: Any, writer: Writer) -> None:
        assert schema.names[:3] == ("controller_id", "controller_epoch", "broker_epoch"), schema.names
        data = self.shared.encoded(schema)
        at = self.EPOCH_AT
        writer.raw(b"".join((data[:at], _BROKER_EPOCH.pack(self.broker_epoch), data[at + 8:])))


_BROKER_EPOCH = struct.Struct(">q")


def _encode_body(schema: Any, writer: Writer, body: dict[str, Any]) -> None:
    if isinstance(body, EncodedOnce):
        body.encode_with(schema, writer)
    else:
        schema.encode(writer, body)


def _finish_frame(writer: Writer) -> bytes:
    # The size field was written as a placeholder at offset 0.
    writer.patch_int32(0, len(writer) - 4)
    return writer.getvalue()


def encode_request(api_key: int, api_version: int, correlation_id: int,
                   client_id: str | None, body: dict[str, Any]) -> bytes:
    """A complete, size-prefixed request frame.

    >>> encode_request(ApiKey.API_VERSIONS, 0, 7, "c", {}).hex()
    '0000000b0012000000000007000163'
    """
    schema = _schema(REQUEST_SCHEMAS, api_key, api_version)
    writer = Writer()
    writer.int32(0)
    writer.int16(api_key)
    writer.int16(api_version)
    writer.int32(correlation_id)
    header_version = request_header_version(api_key, api_version)
    if header_version >= 1:
        writer.nullable_string(client_id)
    if header_version >= 2:
        writer.raw(b"\x00")  # no tagged fields
    _encode_body(schema, writer, body)
    return _finish_frame(writer)


def decode_request(frame: Buffer) -> tuple[RequestHeader, Reader]:
    """Parse the header; return it with a reader positioned at the body.

    Works for unknown keys and versions too (the body is left unread); raises
    ``ProtocolError`` only if the frame is too short for a header.
    """
    reader = Reader(frame)
    api_key = reader.int16()
    api_version = reader.int16()
    correlation_id = reader.int32()
    client_id = None
    header_version = request_header_version(api_key, api_version)
    if header_version >= 1:
        client_id = reader.nullable_string()
    if header_version >= 2:
        skip_tagged_fields(reader)
    key = _KNOWN_KEYS.get(api_key, api_key)
    return RequestHeader(key, api_version, correlation_id, client_id), reader


def decode_request_body(header: RequestHeader, reader: Reader) -> dict[str, Any]:
    """Decode the body that follows ``header``; it must fill the frame exactly.

    Raises ``UnsupportedVersion`` if no schema exists, ``ProtocolError`` if
    the body is malformed or has trailing bytes (a schema mismatch we want to
    see, not silently ignore).
    """
    schema = _schema(REQUEST_SCHEMAS, header.api_key, header.api_version)
    body = schema.decode(reader)
    _check_consumed(reader, header.api_key, header.api_version, "request")
    return body


def encode_response(correlation_id: int, api_key: int, api_version: int,
                    body: dict[str, Any]) -> bytes:
    """A complete, size-prefixed response frame.

    >>> encode_response(9, ApiKey.FIND_COORDINATOR, 0,
    ...     {"error_code": 15, "node_id": -1, "host": "", "port": -1}).hex()
    '0000001000000009000fffffffff0000ffffffff'
    """
    return _finish_frame(_response_writer(correlation_id, api_key, api_version, body))


def encode_response_parts(correlation_id: int, api_key: int, api_version: int,
                          body: dict[str, Any]) -> list[bytearray | FileRegions]:
    """The response frame as the server sends it: buffers, with the
    :class:`FileRegions` of record fields between them left in their files."""
    writer = _response_writer(correlation_id, api_key, api_version, body)
    writer.patch_int32(0, len(writer) - 4)
    return writer.parts()


def _response_writer(correlation_id: int, api_key: int, api_version: int,
                     body: dict[str, Any]) -> Writer:
    schema = _schema(RESPONSE_SCHEMAS, api_key, api_version)
    writer = Writer()
    writer.int32(0)
    writer.int32(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        writer.raw(b"\x00")  # no tagged fields
    _encode_body(schema, writer, body)
    return writer


def decode_response(api_key: int, api_version: int,
                    frame: Buffer) -> tuple[int, dict[str, Any]]:
    """Parse a response frame (without size prefix) into (correlation_id, body)."""
    schema = _schema(RESPONSE_SCHEMAS, api_key, api_version)
    reader = Reader(frame)
    correlation_id = reader.int32()
    if response_header_version(api_key, api_version) >= 1:
        skip_tagged_fields(reader)
    body = schema.decode(reader)
    _check_consumed(reader, api_key, api_version, "response")
    return correlation_id, body


def _check_consumed(reader: Reader, api_key: int, api_version: int, kind: str) -> None:
    if reader.remaining():
        raise ProtocolError(
            f"{reader.remaining()} trailing bytes after {kind} body of "
            f"api_key {int(api_key)} v{api_version}")
