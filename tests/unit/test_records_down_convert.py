"""Down-conversion of v2 batches for Fetch v0-v3 readers (records.down_convert)."""
import struct
import zlib

import pytest

from kafka_ha.records import (CorruptRecordError, Record, UnsupportedCompressionError,
                              build_legacy_message_set, build_v2_batch, decode_records, iter_entries,
                              validate_entry)
from kafka_ha.records.compression import available_codecs, decompress
from kafka_ha.records.down_convert import down_convert, magic_for_fetch_version
from kafka_ha.records.format import CODEC_IDS, CONTROL_MASK, TIMESTAMP_TYPE_MASK, V2_ATTRIBUTES_OFFSET, crc32c

LEGACY_CODECS = [name for name, codec in CODEC_IDS.items()
                 if codec in available_codecs() and name != "zstd"]
COMPRESSED = [name for name in LEGACY_CODECS if name != "none"]


def kafka_python_has(codec):
    kafka_codec = pytest.importorskip("kafka.codec")
    return {"none": True, "gzip": True, "snappy": kafka_codec.has_snappy(),
            "lz4": kafka_codec.has_lz4()}[codec]


def recs(n, start=0, ts=1_000_000):
    return [Record(b"k%d" % i, b"value-%d" % i * 3, ts + 7 * i) for i in range(start, start + n)]


def entries(buf):
    return list(iter_entries(buf))


def checked(buf):
    """Every entry's CRC and sizes must be valid; returns the decoded records."""
    for e in entries(buf):
        validate_entry(buf, e)
    return list(decode_records(buf))


def with_attributes(batch, set_bits, max_timestamp=None):
    """``batch`` with extra v2 attribute bits (and maxTimestamp), CRC-32C recomputed."""
    b = bytearray(batch)
    attrs = struct.unpack_from(">h", b, V2_ATTRIBUTES_OFFSET)[0] | set_bits
    struct.pack_into(">h", b, V2_ATTRIBUTES_OFFSET, attrs)
    if max_timestamp is not None:
        struct.pack_into(">q", b, 35, max_timestamp)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[V2_ATTRIBUTES_OFFSET:])))
    return bytes(b)


def test_fetch_version_to_magic():
    assert [magic_for_fetch_version(v) for v in range(5)] == [0, 0, 1, 1, 2]


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_batch_becomes_one_message_per_record(magic):
    rs = recs(5)
    out = down_convert(build_v2_batch(rs, base_offset=100), magic)
    es = entries(out)
    assert [e.magic for e in es] == [magic] * 5
    assert [out[e.position + 16] for e in es] == [magic] * 5            # magic byte at 16
    assert [e.last_offset for e in es] == list(range(100, 105))
    assert all(e.codec == 0 for e in es)
    decoded = checked(out)
    assert [(r.offset, r.key, r.value) for r in decoded] == \
        [(100 + i, r.key, r.value) for i, r in enumerate(rs)]
    if magic == 1:
        assert [(r.timestamp_ms, r.timestamp_type) for r in decoded] == [(r.timestamp_ms, 0) for r in rs]
    else:
        assert {(r.timestamp_ms, r.timestamp_type) for r in decoded} == {(-1, -1)}
    # Byte-exact against the legacy builder (which writes messages the way clients do).
    expected = build_legacy_message_set(rs, magic=magic, base_offset=100)
    assert out == expected


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("magic", [0, 1])
def test_compressed_batch_becomes_one_wrapper_with_the_same_codec(codec, magic):
    rs = recs(6)
    out = down_convert(build_v2_batch(rs, base_offset=50, compression=codec), magic)
    [wrapper] = entries(out)
    assert (wrapper.magic, wrapper.codec, wrapper.last_offset) == (magic, CODEC_IDS[codec], 55)
    decoded = checked(out)
    assert [(r.offset, r.key, r.value) for r in decoded] == \
        [(50 + i, r.key, r.value) for i, r in enumerate(rs)]
    # Inner offsets: relative 0..n-1 for magic 1, absolute for magic 0 (Kafka's LogValidator).
    key_pos = wrapper.position + (26 if magic == 1 else 18)
    assert struct.unpack_from(">i", out, key_pos)[0] == -1                # null wrapper key
    value_len = struct.unpack_from(">i", out, key_pos + 4)[0]
    inner = decompress(CODEC_IDS[codec], out[key_pos + 8:key_pos + 8 + value_len], magic)
    assert [e.last_offset for e in entries(inner)] == \
        (list(range(6)) if magic == 1 else list(range(50, 56)))
    assert {e.magic for e in entries(inner)} == {magic}
    if magic == 1:
        assert wrapper.max_timestamp == rs[-1].timestamp_ms
        assert [r.timestamp_ms for r in decoded] == [r.timestamp_ms for r in rs]


def test_compressed_batch_keeps_records_before_the_fetch_offset():
    batch = build_v2_batch(recs(4), base_offset=10, compression="gzip")
    out = down_convert(batch, 1, fetch_offset=12)
    assert [r.offset for r in checked(out)] == [10, 11, 12, 13]   # the wrapper stays whole
    uncompressed = down_convert(build_v2_batch(recs(4), base_offset=10), 1, fetch_offset=12)
    assert [r.offset for r in checked(uncompressed)] == [12, 13]


def test_null_keys_and_values():
    rs = [Record(None, b"v", 5), Record(b"k", None, 6), Record(None, None, 7), Record(b"", b"", 8)]
    for codec in ("none", "gzip"):
        out = down_convert(build_v2_batch(rs, compression=codec), 1)
        assert [(r.key, r.value, r.timestamp_ms) for r in checked(out)] == \
            [(None, b"v", 5), (b"k", None, 6), (None, None, 7), (b"", b"", 8)]


def test_headers_are_dropped():
    rs = [Record(b"k", b"v", 9, (("h1", b"x"), ("h2", None))), Record(None, b"w", 10)]
    for magic in (0, 1):
        out = down_convert(build_v2_batch(rs), magic)
        decoded = checked(out)
        assert [(r.key, r.value, r.headers) for r in decoded] == [(b"k", b"v", ()), (None, b"w", ())]


def test_multiple_batches_mixed_codecs_keep_log_order():
    parts, offset, expected = [], 0, []
    for n, codec in [(3, "none"), (4, "gzip"), (1, "none"), (5, "gzip"), (2, "none")]:
        rs = recs(n, start=offset)
        parts.append(build_v2_batch(rs, base_offset=offset, compression=codec))
        expected += [(offset + i, r.key, r.value) for i, r in enumerate(rs)]
        offset += n
    buf = b"".join(parts)
    for magic in (0, 1):
        out = down_convert(buf, magic)
        assert [(r.offset, r.key, r.value) for r in checked(out)] == expected
        assert len(entries(out)) == 3 + 1 + 1 + 1 + 2


def test_partial_trailing_batch_is_not_converted():
    a = build_v2_batch(recs(3), base_offset=0)
    b = build_v2_batch(recs(3, start=3), base_offset=3, compression="gzip")
    for cut in (1, 11, 12, 40, len(b) - 1):
        out = down_convert(a + b[:cut], 1)
        assert [r.offset for r in checked(out)] == [0, 1, 2]
        assert sum(e.size for e in entries(out)) == len(out)         # whole entries only


def test_partial_first_batch_is_returned_as_it_is():
    """A legacy reader then sees an entry larger than its fetch size: RecordTooLargeError."""
    batch = build_v2_batch(recs(10), base_offset=0)
    for cut in (5, 12, 100):
        partial = batch[:cut]
        assert down_convert(partial, 0) is partial
    assert down_convert(b"", 1) == b""


def test_size_limit_counts_whole_converted_entries_and_always_includes_the_first():
    rs = recs(20)
    batch = build_v2_batch(rs, base_offset=0)
    full = down_convert(batch, 1)
    assert len(full) > len(batch)                        # legacy messages carry more overhead
    limited = down_convert(batch, 1, max_bytes=len(batch))
    assert len(limited) <= len(batch)
    got = [r.offset for r in checked(limited)]
    assert got == list(range(len(got))) and 0 < len(got) < 20
    one = down_convert(batch, 1, max_bytes=1)
    assert [r.offset for r in checked(one)] == [0]       # the first entry even past the limit
    gz = build_v2_batch(rs, base_offset=0, compression="gzip")
    assert len(entries(down_convert(gz + gz, 1, max_bytes=1))) == 1


def test_log_append_time_sets_attribute_bit_and_the_batch_max_timestamp():
    rs = recs(3)
    for codec in ("none", "gzip"):
        batch = with_attributes(build_v2_batch(rs, compression=codec), TIMESTAMP_TYPE_MASK, 424242)
        out = down_convert(batch, 1)
        assert all(e.attributes & TIMESTAMP_TYPE_MASK for e in entries(out))
        assert [(r.timestamp_ms, r.timestamp_type) for r in checked(out)] == [(424242, 1)] * 3
        if codec == "gzip":
            assert entries(out)[0].max_timestamp == 424242


def test_control_batches_are_dropped():
    control = with_attributes(build_v2_batch([Record(b"\x00\x00\x00\x00", b"")], base_offset=3),
                              CONTROL_MASK)
    data = build_v2_batch(recs(3), base_offset=0) + control + build_v2_batch(recs(1, 4), base_offset=4)
    assert [r.offset for r in checked(down_convert(data, 1))] == [0, 1, 2, 4]


def test_legacy_entries_pass_through_or_drop_to_magic_0():
    v1 = build_legacy_message_set(recs(3), magic=1, base_offset=0, compression="gzip")
    v0 = build_legacy_message_set(recs(2, 3), magic=0, base_offset=3)
    assert down_convert(v1 + v0, 1) == v1 + v0
    out = down_convert(v1 + v0, 0)
    assert {e.magic for e in entries(out)} == {0}
    assert [r.offset for r in checked(out)] == [0, 1, 2, 3, 4]
    mixed = v1 + build_v2_batch(recs(2, 3), base_offset=3)
    out = down_convert(mixed, 1)
    assert out[:len(v1)] == v1 and [e.magic for e in entries(out)] == [1, 1, 1]


def test_nothing_to_convert_returns_the_same_object():
    batch = build_v2_batch(recs(2))
    assert down_convert(batch, 2) is batch
    legacy = build_legacy_message_set(recs(2), magic=1)
    assert down_convert(legacy, 1) is legacy


def test_corrupt_stored_batch_raises_instead_of_getting_a_fresh_crc():
    batch = bytearray(build_v2_batch(recs(3)))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        down_convert(bytes(batch), 1)


@pytest.mark.skipif(4 not in available_codecs(), reason="zstd codec not installed")
def test_zstd_cannot_be_down_converted():
    with pytest.raises(UnsupportedCompressionError):
        down_convert(build_v2_batch(recs(2), compression="zstd"), 1)


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_reads_the_converted_data(codec, magic):
    """An independent legacy decoder (kafka-python's) agrees on every field and CRC."""
    memory_records = pytest.importorskip("kafka.record.memory_records")
    if not kafka_python_has(codec):
        pytest.skip(f"kafka-python has no {codec} library here")
    rs = recs(4) + [Record(None, None, 2_000_000)]
    buf = build_v2_batch(rs[:2], base_offset=7) + build_v2_batch(rs[2:], base_offset=9, compression=codec)
    out = down_convert(buf, magic)
    records = memory_records.MemoryRecords(out)
    got = []
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        assert batch.magic == magic and batch.validate_crc()
        for r in batch:
            assert r.validate_crc()
            got.append((r.offset, r.timestamp, r.key, r.value))
    assert got == [(7 + i, r.timestamp_ms if magic == 1 else None, r.key, r.value)
                   for i, r in enumerate(rs)]


def test_crc_is_ieee_over_magic_to_end():
    out = down_convert(build_v2_batch([Record(b"k", b"v", 1)], base_offset=3), 1)
    [e] = entries(out)
    assert struct.unpack_from(">I", out, 12)[0] == zlib.crc32(out[16:]) & 0xFFFFFFFF
