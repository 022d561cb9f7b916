"""Record formats: byte-exact encodings, offset assignment, corruption detection."""
import struct

import pytest

from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records import (CorruptRecordError, OffsetMismatchError, Record, RecordTooLargeError,
                              UnsupportedCompressionError, assign_offsets, build_legacy_message_set,
                              build_v2_batch, decode_records, iter_entries, valid_length,
                              validate_entry, validate_follower_records)
from kafka_ha.records.compression import available_codecs
from kafka_ha.records.format import CODEC_IDS, V2_ATTRIBUTES_OFFSET, crc32, crc32c

MB = 1 << 20
CODECS = [name for name, codec in CODEC_IDS.items() if codec in available_codecs()]
LEGACY_CODECS = [c for c in CODECS if c != "zstd"]


def records(n, size=10, ts=1000):
    return [Record(b"k%d" % i, bytes([65 + i % 26]) * size, ts + i) for i in range(n)]


def entries(buf):
    return list(iter_entries(buf))


def all_valid(buf):
    for e in entries(buf):
        validate_entry(buf, e)
    return True


# --- byte-exact encodings ------------------------------------------------------------------

def test_crc32c_published_check_value():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32(b"123456789") == 0xCBF43926


def test_v0_message_matches_kafka_python_vectors():
    # kafka-python test_protocol.py: Message(b'test', key=b'key') has CRC -1427009701,
    # and a set of k1/v1 and k2/v2 has CRCs 1474775406 and -16383415.
    expected = (struct.pack(">qi", 0, 21) + struct.pack(">i", -1427009701) + b"\x00\x00"
                + struct.pack(">i", 3) + b"key" + struct.pack(">i", 4) + b"test")
    assert build_legacy_message_set([Record(b"key", b"test")], magic=0) == expected
    two = build_legacy_message_set([Record(b"k1", b"v1"), Record(b"k2", b"v2")], magic=0)
    crcs = [struct.unpack_from(">i", two, e.position + 12)[0] for e in entries(two)]
    assert crcs == [1474775406, -16383415]
    assert [e.last_offset for e in entries(two)] == [0, 1]


# A v2 batch captured from librdkafka (rskafka's test_decode_fixture_nocompression):
# one record, key b"", value b"hello kafka", header foo=bar, timestamp 1641388919.
LIBRDKAFKA_BATCH = bytes.fromhex(
    "0000000000000000" "0000004b" "00000000" "02" "2724fecd" "0000" "00000000"
    "0000000061d59b77" "0000000061d59b77" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
    "32000000001668656c6c6f206b61666b610206666f6f06626172")


def test_v2_batch_matches_librdkafka_capture():
    built = build_v2_batch([Record(b"", b"hello kafka", 1641388919, (("foo", b"bar"),))],
                           partition_leader_epoch=0)
    assert built == LIBRDKAFKA_BATCH
    assert crc32c(LIBRDKAFKA_BATCH[V2_ATTRIBUTES_OFFSET:]) == 0x2724FECD
    (entry,) = entries(LIBRDKAFKA_BATCH)
    assert entry[:8] == (0, 87, 2, 0, 0, 0, 1641388919, 1)
    validate_entry(LIBRDKAFKA_BATCH, entry)
    (rec,) = decode_records(LIBRDKAFKA_BATCH)
    assert rec == (0, 1641388919, 0, b"", b"hello kafka", (("foo", b"bar"),))


# --- shallow iteration -----------------------------------------------------------------------

def test_entry_fields_per_format():
    v0 = build_legacy_message_set(records(2), magic=0, base_offset=5)
    v1 = build_legacy_message_set(records(2), magic=1, base_offset=7)
    v1z = build_legacy_message_set(records(3), magic=1, compression="gzip", base_offset=9)
    v2 = build_v2_batch(records(4), base_offset=12, partition_leader_epoch=6)
    got = [e[2:8] for e in entries(v0 + v1 + v1z + v2)]
    assert got == [(0, 5, 5, -1, -1, 1), (0, 6, 6, -1, -1, 1),
                   (1, 7, 7, -1, 1000, 1), (1, 8, 8, -1, 1001, 1),
                   (1, None, 11, -1, 1002, None),
                   (2, 12, 15, 6, 1003, 4)]


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 69])
def test_partial_trailing_entry_is_not_yielded(cut):
    one = build_v2_batch(records(1))
    buf = one + one[:cut]
    assert [e.position for e in entries(buf)] == [0]
    assert valid_length(buf) == len(one)


def test_impossible_size_is_corrupt():
    buf = bytearray(build_legacy_message_set(records(1), magic=0))
    struct.pack_into(">i", buf, 8, 3)
    with pytest.raises(CorruptRecordError, match="position 0"):
        entries(buf)


# --- round trips ------------------------------------------------------------------------------

@pytest.mark.parametrize("compression", CODECS)
def test_v2_round_trip(compression):
    recs = records(20) + [Record(None, None, 5000, (("h", None), ("i", b"\x00")))]
    buf = build_v2_batch(recs, base_offset=100, compression=compression)
    assert all_valid(buf)
    out = list(decode_records(buf))
    assert [r.offset for r in out] == list(range(100, 121))
    assert [(r.key, r.value, r.timestamp_ms, r.headers) for r in out] == \
        [(r.key, r.value, r.timestamp_ms, tuple(r.headers)) for r in recs]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", LEGACY_CODECS)
def test_legacy_round_trip(magic, compression):
    recs = records(5) + [Record(None, None, 77)]
    buf = build_legacy_message_set(recs, magic=magic, compression=compression, base_offset=40)
    assert all_valid(buf)
    out = list(decode_records(buf))
    assert [r.offset for r in out] == list(range(40, 46))
    assert [(r.key, r.value) for r in out] == [(r.key, r.value) for r in recs]
    assert [r.timestamp_ms for r in out] == ([-1] * 6 if magic == 0 else [r.timestamp_ms for r in recs])


def test_decode_skips_below_min_offset_and_partial_tail():
    buf = build_v2_batch(records(5), base_offset=10) + build_v2_batch(records(5), base_offset=15)
    assert [r.offset for r in decode_records(buf[:-3], min_offset=12)] == [12, 13, 14]


# --- offset assignment ------------------------------------------------------------------------

def test_assign_v2_in_place_keeps_crc():
    batch = build_v2_batch(records(3), base_offset=0)
    a = assign_offsets(batch, 50, 7, MB)
    assert a[1:] == (50, 52, 3, 1002, 1)
    assert a.buffer[17:] == batch[17:]                     # CRC and everything after unchanged
    assert struct.unpack_from(">qiib", a.buffer) == (50, len(batch) - 12, 7, 2)
    assert all_valid(a.buffer)


@pytest.mark.parametrize("magic", [0, 1])
def test_assign_legacy_uncompressed_rewrites_offset_fields(magic):
    ms = build_legacy_message_set(records(3), magic=magic)
    a = assign_offsets(ms, 1000, 1, MB)
    assert [e.last_offset for e in entries(a.buffer)] == [1000, 1001, 1002]
    assert (a.first_offset, a.last_offset, a.count, a.shallow_count) == (1000, 1002, 3, 3)
    assert all_valid(a.buffer)
    assert [e[12:] for e in entries(a.buffer)] == [e[12:] for e in entries(ms)]


def test_assign_v0_compressed_recompresses_with_absolute_inner_offsets():
    ms = build_legacy_message_set(records(4), magic=0, compression="gzip")
    a = assign_offsets(ms, 500, 1, MB)
    (wrapper,) = entries(a.buffer)
    assert (wrapper.last_offset, a.first_offset, a.last_offset, a.count) == (503, 500, 503, 4)
    validate_entry(a.buffer, wrapper)                     # new wrapper CRC
    assert [r.offset for r in decode_records(a.buffer)] == [500, 501, 502, 503]


def test_assign_v1_compressed_sets_only_wrapper_offset():
    ms = build_legacy_message_set(records(4), magic=1, compression="gzip")
    a = assign_offsets(ms, 500, 1, MB)
    assert a.buffer[8:] == ms[8:]                         # inner offsets stay relative 0..3
    assert entries(a.buffer)[0].last_offset == 503
    assert (a.first_offset, a.last_offset, a.count, a.max_timestamp) == (500, 503, 4, 1003)
    assert [r.offset for r in decode_records(a.buffer)] == [500, 501, 502, 503]


def test_assign_v1_compressed_with_wrong_inner_offsets_rewrites_them():
    # Some clients sent absolute-looking inner offsets; Kafka rebuilds the wrapper.
    ms = build_legacy_message_set(records(3), magic=1, compression="gzip", base_offset=0)
    from kafka_ha.records.builder import encode_legacy_message
    from kafka_ha.records.compression import compress
    inner = build_legacy_message_set(records(3), magic=1, base_offset=20)
    bad = encode_legacy_message(22, 1, 1, None, compress(1, inner, 1), 1002)
    a = assign_offsets(bad, 10, 1, MB)
    assert assign_offsets(ms, 10, 1, MB).buffer == a.buffer
    assert [r.offset for r in decode_records(a.buffer)] == [10, 11, 12]


def test_assign_mixed_magics_in_one_produce():
    data = (build_legacy_message_set(records(2), magic=0)
            + build_legacy_message_set(records(3), magic=1, compression="gzip")
            + build_v2_batch(records(4))
            + build_legacy_message_set(records(2), magic=0, compression="gzip")
            + build_legacy_message_set(records(1), magic=1))
    a = assign_offsets(data, 0, 2, MB)
    assert (a.first_offset, a.last_offset, a.count, a.shallow_count) == (0, 11, 12, 6)
    assert [r.offset for r in decode_records(a.buffer)] == list(range(12))
    assert [e.last_offset for e in entries(a.buffer)] == [0, 1, 4, 8, 10, 11]
    assert all_valid(a.buffer)


def test_assign_rejects_empty_truncated_oversized_and_bad_codecs():
    batch = build_v2_batch(records(3))
    with pytest.raises(CorruptRecordError, match="empty"):
        assign_offsets(b"", 0, 0, MB)
    with pytest.raises(CorruptRecordError, match="truncated"):
        assign_offsets(batch + batch[:20], 0, 0, MB)
    with pytest.raises(RecordTooLargeError) as err:
        assign_offsets(batch, 0, 0, len(batch) - 1)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE
    for codec, magic in ((5, 2), (4, 2), (4, 1), (7, 0)):
        bad = _with_attributes(build_v2_batch(records(1)) if magic == 2
                               else build_legacy_message_set(records(1), magic=magic), codec)
        with pytest.raises(UnsupportedCompressionError) as err:
            assign_offsets(bad, 0, 0, MB)
        assert err.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def _with_attributes(buf, attributes):
    """Set an entry's attributes and fix its CRC, so only the codec is wrong."""
    out = bytearray(buf)
    if out[16] == 2:
        struct.pack_into(">h", out, 21, attributes)
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    else:
        out[17] = attributes
        struct.pack_into(">I", out, 12, crc32(bytes(out[16:])))
    return bytes(out)


def test_assign_rejects_control_batches_from_clients():
    with pytest.raises(CorruptRecordError, match="control"):
        assign_offsets(_with_attributes(build_v2_batch(records(1)), 0x20), 0, 0, MB)


# --- corruption: flip a byte in each region ---------------------------------------------------

V2_REGIONS = {"batch length": 11, "magic": 16, "crc": 18, "attributes": 22, "last offset delta": 26,
              "base timestamp": 30, "max timestamp": 40, "producer id": 45, "records count": 60,
              "records": 70, "last byte": -1}


@pytest.mark.parametrize("region", V2_REGIONS)
def test_v2_corruption_detected(region):
    buf = bytearray(build_v2_batch(records(2)))
    buf[V2_REGIONS[region]] ^= 0x01
    with pytest.raises(CorruptRecordError):
        assign_offsets(bytes(buf), 0, 0, MB)


V0_REGIONS = {"size": 11, "crc": 13, "magic": 16, "attributes": 17, "key length": 21,
              "key": 22, "value length": 26, "value": 28}


@pytest.mark.parametrize("region", V0_REGIONS)
def test_v0_corruption_detected(region):
    buf = bytearray(build_legacy_message_set([Record(b"ke", b"value")], magic=0))
    buf[V0_REGIONS[region]] ^= 0x04
    with pytest.raises(CorruptRecordError):
        assign_offsets(bytes(buf), 0, 0, MB)


def test_corruption_inside_a_compressed_wrapper_names_its_position():
    ok = build_v2_batch(records(1))
    buf = bytearray(build_legacy_message_set(records(3), magic=1, compression="gzip"))
    buf[-6] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=f"position {len(ok)}"):
        assign_offsets(ok + bytes(buf), 0, 0, MB)


def test_uncovered_fields_are_not_checked_by_crc():
    # baseOffset, batchLength-independent prefix and partitionLeaderEpoch are outside
    # the CRC by design: that is why the leader can rewrite them in place.
    buf = bytearray(build_v2_batch(records(1)))
    buf[3] ^= 1
    buf[13] ^= 1
    assert all_valid(bytes(buf))


# --- follower appends -------------------------------------------------------------------------

def test_follower_records_contiguity_and_epochs():
    data = (build_v2_batch(records(2), base_offset=10, partition_leader_epoch=3)
            + build_v2_batch(records(2), base_offset=12, partition_leader_epoch=3)
            + build_legacy_message_set(records(1), magic=1, base_offset=14)
            + build_v2_batch(records(3), base_offset=15, partition_leader_epoch=5))
    f = validate_follower_records(data + data[:40], 10)
    assert (f.valid_bytes, f.first_offset, f.last_offset, f.shallow_count) == (len(data), 10, 17, 4)
    assert f.epochs == [(3, 10), (5, 15)]
    with pytest.raises(OffsetMismatchError, match="expected to start at 9"):
        validate_follower_records(data, 9)
    with pytest.raises(OffsetMismatchError):
        validate_follower_records(data, 11)
    gap = build_v2_batch(records(2), base_offset=0) + build_v2_batch(records(2), base_offset=3)
    with pytest.raises(OffsetMismatchError, match="start at 2"):
        validate_follower_records(gap, 0)


def test_follower_records_crc_checked():
    buf = bytearray(build_v2_batch(records(2), base_offset=0))
    buf[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        validate_follower_records(bytes(buf), 0)
    assert validate_follower_records(b"", 7)[:3] == (0, 7, 6)


def test_follower_accepts_compressed_legacy_wrappers_by_last_offset():
    data = assign_offsets(build_legacy_message_set(records(3), magic=1, compression="gzip"), 4, 0, MB)
    f = validate_follower_records(data.buffer, 4)
    assert f.last_offset == 6 and f.epochs == []


# --- codec framings ---------------------------------------------------------------------------

def test_xxh32_vectors_and_lz4_header_checksums():
    from kafka_ha.records import compression
    assert [compression._xxh32(s) for s in (b"", b"a", b"abc")] == [0x02CC5D05, 0x550D7456, 0x32D153FF]
    if "lz4" not in CODECS:
        pytest.skip("no lz4 backend installed")
    frame = compression.compress(3, b"hello" * 100, magic=1)
    assert compression._lz4_fix_header_checksum(frame) == frame       # magic 1: a correct LZ4F frame
    old = compression.compress(3, b"hello" * 100, magic=0)
    assert old != frame and old[:6] == frame[:6]                      # magic 0: only the HC byte differs
    assert compression.decompress(3, old, magic=0) == b"hello" * 100


def test_snappy_accepts_raw_and_xerial():
    from kafka_ha.records import compression
    if "snappy" not in CODECS:
        pytest.skip("no snappy backend installed")
    xerial = compression.compress(2, b"x" * 100000)
    assert xerial.startswith(compression.XERIAL_HEADER)
    raw = compression._BACKENDS[2][0](b"x" * 100000)
    assert compression.decompress(2, xerial) == compression.decompress(2, raw) == b"x" * 100000


def test_missing_codec_library_is_unsupported(monkeypatch):
    from kafka_ha.records import compression
    monkeypatch.setitem(compression._BACKENDS, 2, None)
    with pytest.raises(UnsupportedCompressionError, match="snappy"):
        compression.decompress(2, b"\x00")


def test_varints_round_trip_across_the_table_and_fast_path_edges():
    from kafka_ha.records.errors import CorruptRecordError
    from kafka_ha.records.varint import _encode_slow, decode_varint, encode_varint

    values = [*range(-8300, 8300), 2**31 - 1, -2**31, 2**63 - 1, -2**63, 300000, -300000]
    for value in values:
        data = encode_varint(value)
        assert data == _encode_slow(value)                    # the table agrees with the loop
        assert decode_varint(b"\x07" + data + b"\x00", 1) == (value, 1 + len(data))
    for truncated in (b"\x80", b"\xff\xff", b"\xff\xff\xff"):
        with pytest.raises(CorruptRecordError, match="truncated or overlong varint"):
            decode_varint(truncated, 0)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"", 0)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff" * 11, 0)                       # longer than 64 bits
