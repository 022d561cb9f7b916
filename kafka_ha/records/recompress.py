"""A topic's ``compression.type``: the leader rewrites batches into the topic's codec.

Kafka's rule (its LogValidator): with ``compression.type=producer`` (the default) a
batch is stored in whatever codec the producer chose; with ``uncompressed``, ``gzip``,
``snappy``, ``lz4`` or ``zstd`` the leader stores every batch in that codec and
rewrites the ones that arrive in another.  A rewrite changes only the codec bits of
the attributes, the compressed body, the batch length and the CRC: offsets, the
producer id, epoch and base sequence (which the idempotent producer's duplicate check
relies on), the timestamps and every record stay as the producer sent them.

The source CRC is checked before a batch is rewritten: the new CRC must not launder
bytes damaged on the way.  Decompression stops at ``max_bytes`` (the topic's
``max.message.bytes``), so a small batch cannot inflate without bound.

>>> from kafka_ha.records.builder import Record, build_v2_batch
>>> from kafka_ha.records.reader import decode_records
>>> from kafka_ha.records.shallow import iter_entries
>>> batch = build_v2_batch([Record(b"k", b"v" * 100)] * 3, producer=(7, 0, 40))
>>> gz = recompress(batch, CODEC_GZIP, 1 << 20)
>>> [(e.attributes & 7, e.producer_id, e.base_sequence) for e in iter_entries(gz)]
[(1, 7, 40)]
>>> [r.value for r in decode_records(gz)] == [r.value for r in decode_records(batch)]
True
>>> recompress(gz, CODEC_GZIP, 1 << 20) is gz     # already in the topic's codec: untouched
True
"""
from __future__ import annotations

import struct

from .compression import compress, decompress
from .format import (BATCH_LENGTH_OFFSET, CODEC_GZIP, CODEC_LZ4, CODEC_MASK, CODEC_NONE, CODEC_SNAPPY,
                     CODEC_ZSTD, LOG_OVERHEAD, MAGIC_V2, V2_ATTRIBUTES_OFFSET, V2_CRC_OFFSET,
                     V2_HEADER_SIZE, crc32c)
from .shallow import iter_entries, validate_entry

# compression.type's values (Kafka's BrokerCompressionCodec); None: keep the producer's.
TOPIC_CODECS = {"producer": None, "uncompressed": CODEC_NONE, "gzip": CODEC_GZIP,
                "snappy": CODEC_SNAPPY, "lz4": CODEC_LZ4, "zstd": CODEC_ZSTD}
_ATTRIBUTES = struct.Struct(">h")
_LENGTH = struct.Struct(">i")


def topic_codec(compression_type: str) -> int | None:
    """The codec id a topic stores, or None for ``producer``.

    >>> topic_codec("producer"), topic_codec("uncompressed"), topic_codec("zstd")
    (None, 0, 4)
    """
    return TOPIC_CODECS[compression_type]


def recompress(buf, codec: int | None, max_bytes: int):
    """``buf`` with every v2 batch not already in ``codec`` rewritten in it.

    Returns ``buf`` itself when nothing needs rewriting.  Legacy (magic 0/1) entries
    are left as they are: the leader converts them to v2 before this step.
    """
    if codec is None:
        return buf
    view = memoryview(buf)
    entries = list(iter_entries(view))
    if all(e.magic != MAGIC_V2 or e.attributes & CODEC_MASK == codec for e in entries):
        return buf
    out: list[bytes] = []
    for entry in entries:
        raw = view[entry.position:entry.end]
        if entry.magic != MAGIC_V2 or entry.attributes & CODEC_MASK == codec:
            out.append(bytes(raw))
            continue
        validate_entry(view, entry)
        out.append(_rewritten(raw, entry.attributes & CODEC_MASK, codec, max_bytes))
    return b"".join(out)


def _rewritten(batch: memoryview, source: int, target: int, max_bytes: int) -> bytes:
    body = decompress(source, batch[V2_HEADER_SIZE:], MAGIC_V2, max_bytes)
    new_body = compress(target, body, MAGIC_V2)
    header = bytearray(batch[:V2_HEADER_SIZE])
    attributes = _ATTRIBUTES.unpack_from(header, V2_ATTRIBUTES_OFFSET)[0]
    _ATTRIBUTES.pack_into(header, V2_ATTRIBUTES_OFFSET, (attributes & ~CODEC_MASK) | target)
    _LENGTH.pack_into(header, BATCH_LENGTH_OFFSET, V2_HEADER_SIZE - LOG_OVERHEAD + len(new_body))
    crc = crc32c(bytes(header[V2_ATTRIBUTES_OFFSET:]) + new_body)
    struct.pack_into(">I", header, V2_CRC_OFFSET, crc)
    return bytes(header) + new_body
