"""Build produce payloads the way clients do: v2 batches and magic 0/1 message sets.

Client side only (and tests): the broker never builds records, it rewrites
offsets in the ones it receives (:mod:`.validate`).

>>> batch = build_v2_batch([Record(b"k", b"v", 1000)], base_offset=5)
>>> len(batch), batch[16]
(70, 2)
>>> ms = build_legacy_message_set([Record(b"key", b"test")], magic=0)
>>> ms.hex()      # CRC 0xaaf18f5b: kafka-python's published v0 test vector
'000000000000000000000015aaf18f5b0000000000036b65790000000474657374'
"""
from __future__ import annotations

import struct
from typing import NamedTuple, Sequence

from kafka_ha.clock import now_ms

from .compression import compress
from .format import (CODEC_ZSTD, LOG_OVERHEAD, MAGIC_V0, MAGIC_V1, MAGIC_V2, NO_PRODUCER_ID,
                     V2_ATTRIBUTES_OFFSET, V2_HEADER, codec_id, crc32, crc32c)
from .varint import encode_varint

_MESSAGE_TAIL_V0 = struct.Struct(">bb")
_MESSAGE_TAIL_V1 = struct.Struct(">bbq")
_PREFIX_CRC = struct.Struct(">qiI")
_I32 = struct.Struct(">i")
_NULL = encode_varint(-1)                    # length -1: a null key, value or header value


class Record(NamedTuple):
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None
    headers: tuple = ()            # ((str key, bytes | None value), ...); v2 only


def encode_v2_record(rec: Record, offset_delta: int, timestamp_delta: int) -> bytes:
    """One record of a v2 batch, length prefix included (``rec.timestamp_ms`` is not read).

    >>> encode_v2_record(Record(b"k", b"v"), 0, 0).hex()
    '10000000026b027600'
    """
    key, value = rec.key, rec.value
    parts = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta),
             _NULL if key is None else encode_varint(len(key)), key or b"",
             _NULL if value is None else encode_varint(len(value)), value or b""]
    if rec.headers:
        parts.append(encode_varint(len(rec.headers)))
        for h_key, h_value in rec.headers:
            h_key = h_key.encode() if isinstance(h_key, str) else h_key
            parts += (encode_varint(len(h_key)), h_key)
            parts += (_NULL,) if h_value is None else (encode_varint(len(h_value)), h_value)
    else:
        parts.append(b"\x00")                      # no headers
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def build_v2_batch(records: Sequence[Record], base_offset: int = 0, compression: str = "none",
                   timestamp_ms: int | None = None, partition_leader_epoch: int = -1,
                   producer: tuple[int, int, int] = (NO_PRODUCER_ID, -1, -1)) -> bytes:
    """One v2 RecordBatch holding ``records`` (offset deltas 0..n-1).

    A record without a timestamp gets ``timestamp_ms`` (default: now).
    ``producer`` is (producer id, epoch, base sequence): by default -1, no
    idempotence.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    default_ts = now_ms() if timestamp_ms is None else timestamp_ms
    stamps = [default_ts if r.timestamp_ms is None else r.timestamp_ms for r in records]
    base_ts = stamps[0]
    body = b"".join(encode_v2_record(r, i, ts - base_ts)
                    for i, (r, ts) in enumerate(zip(records, stamps)))
    return assemble_v2_batch(body, len(records), base_ts, max(stamps), compression,
                             base_offset, partition_leader_epoch, producer)


def assemble_v2_batch(body: bytes, count: int, base_timestamp: int, max_timestamp: int,
                      compression: str = "none", base_offset: int = 0,
                      partition_leader_epoch: int = -1,
                      producer: tuple[int, int, int] = (NO_PRODUCER_ID, -1, -1)) -> bytes:
    """The batch around ``count`` records already encoded by :func:`encode_v2_record`
    (offset deltas 0..count-1, timestamps relative to ``base_timestamp``):
    compress them, write the header, compute the CRC.

    >>> one = encode_v2_record(Record(b"k", b"v"), 0, 0)
    >>> assemble_v2_batch(one, 1, 1000, 1000) == build_v2_batch([Record(b"k", b"v", 1000)])
    True
    """
    codec = codec_id(compression)
    body = compress(codec, body, MAGIC_V2)
    header = bytearray(V2_HEADER.pack(base_offset, V2_HEADER.size - LOG_OVERHEAD + len(body),
                                      partition_leader_epoch, MAGIC_V2, 0, codec, count - 1,
                                      base_timestamp, max_timestamp, *producer, count))
    crc = crc32c(bytes(header[V2_ATTRIBUTES_OFFSET:]) + body)
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + body


def encode_legacy_message(offset: int, magic: int, attributes: int, key: bytes | None,
                          value: bytes | None, timestamp_ms: int = -1) -> bytes:
    """One magic 0/1 log entry: ``offset i64, size i32, crc, magic, attributes, [ts], key, value``."""
    tail = (_MESSAGE_TAIL_V1.pack(magic, attributes, timestamp_ms) if magic == MAGIC_V1
            else _MESSAGE_TAIL_V0.pack(magic, attributes))
    kv = [tail]
    for field in (key, value):
        kv += (_I32.pack(-1),) if field is None else (_I32.pack(len(field)), field)
    body = b"".join(kv)
    return _PREFIX_CRC.pack(offset, 4 + len(body), crc32(body)) + body


def build_legacy_message_set(records: Sequence[Record], magic: int = 1, compression: str = "none",
                             base_offset: int = 0, timestamp_ms: int | None = None) -> bytes:
    """A magic 0/1 MessageSet as old clients send it.

    Uncompressed: one entry per record at ``base_offset + i``.  Compressed:
    one wrapper (key null) whose value is the compressed inner set.  Inner
    offsets are ``base_offset + i`` for magic 0 (absolute, as a v0 broker
    stores them) and ``0..n-1`` for magic 1 (relative); the wrapper carries the
    last absolute offset and, for magic 1, the largest inner timestamp.
    """
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"legacy message sets have magic 0 or 1, not {magic}")
    codec = codec_id(compression)
    if codec == CODEC_ZSTD:
        raise ValueError("zstd needs magic 2")
    default_ts = now_ms() if timestamp_ms is None else timestamp_ms
    stamps = [-1 if magic == MAGIC_V0 else (default_ts if r.timestamp_ms is None else r.timestamp_ms)
              for r in records]
    if codec == 0:
        return b"".join(encode_legacy_message(base_offset + i, magic, 0, r.key, r.value, ts)
                        for i, (r, ts) in enumerate(zip(records, stamps)))
    first_inner = base_offset if magic == MAGIC_V0 else 0
    inner = b"".join(encode_legacy_message(first_inner + i, magic, 0, r.key, r.value, ts)
                     for i, (r, ts) in enumerate(zip(records, stamps)))
    return encode_legacy_message(base_offset + len(records) - 1, magic, codec, None,
                                 compress(codec, inner, magic), max(stamps))
