"""Up-conversion of legacy (magic 0/1) produce data to v2 record batches.

The log stores v2 only, as Kafka does with message format 0.11+: only a v2
batch carries the leader epoch it was written in, and followers learn epoch
boundaries from those batches.  Without them a follower cannot truncate by
leader epoch (KIP-101) and would have to fall back to its high watermark.
Clients that already send v2 (our producer, aiokafka) pay nothing; legacy
producers (kafka-python, librdkafka) pay one decode and encode per request.

>>> from kafka_ha.records.builder import Record, build_legacy_message_set
>>> from kafka_ha.records.reader import decode_records
>>> legacy = build_legacy_message_set([Record(b"k", b"v%d" % i, 1000) for i in range(3)], magic=1,
...                                   compression="gzip")
>>> needs_conversion(legacy)
True
>>> v2 = to_v2(legacy)
>>> needs_conversion(v2), [r.value for r in decode_records(v2)]
(False, [b'v0', b'v1', b'v2'])
"""
from __future__ import annotations

from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.records.errors import CorruptRecordError
from kafka_ha.records.format import CODEC_NAMES, MAGIC_V2
from kafka_ha.records.reader import decode_records
from kafka_ha.records.shallow import iter_entries, validate_entry


def needs_conversion(buf) -> bool:
    """True if any entry is magic 0 or 1 (byte 16 of every entry holds the magic)."""
    return any(entry.magic != MAGIC_V2 for entry in iter_entries(buf))


def to_v2(buf) -> bytes:
    """One v2 batch per run of consecutive legacy entries, v2 batches kept as they are.

    A compressed legacy wrapper's codec is kept; timestamps are kept (magic 0
    has none, so those records get the conversion time, as Kafka's
    up-conversion stamps them).
    """
    view = memoryview(buf)
    out: list[bytes] = []
    run: list[Record] = []
    codec = None
    for entry in iter_entries(view):
        validate_entry(view, entry)
        if entry.magic == MAGIC_V2:
            if run:
                out.append(build_v2_batch(run, compression=CODEC_NAMES[codec or 0]))
                run, codec = [], None
            out.append(bytes(view[entry.position:entry.end]))
            continue
        records = [Record(r.key, r.value, r.timestamp_ms if r.timestamp_ms >= 0 else None)
                   # producers leave legacy offsets unassigned (a compressed wrapper's
                   # inner offsets then come out negative): keep every record
                   for r in decode_records(view[entry.position:entry.end], min_offset=-(1 << 63),
                                           check_crc=False)]
        if not records:
            raise CorruptRecordError(f"a legacy entry at position {entry.position} holds no records")
        if run and (entry.codec or 0) != (codec or 0):
            out.append(build_v2_batch(run, compression=CODEC_NAMES[codec or 0]))
            run = []
        run.extend(records)
        codec = entry.codec
    if run:
        out.append(build_v2_batch(run, compression=CODEC_NAMES[codec or 0]))
    return b"".join(out)
