"""Record data whose CRC is valid but whose contents lie, and decompression bombs.

A CRC only proves the bytes arrived as the producer sent them; a hostile producer
computes it over whatever it likes.  The leader checks what the batch claims
against what it holds, as Kafka's LogValidator does, before anything is stored.
"""
from __future__ import annotations

import tracemalloc

import pytest

from kafka_ha.records.builder import (Record, assemble_v2_batch, build_v2_batch, encode_legacy_message,
                                      encode_v2_record)
from kafka_ha.records.compression import available_codecs, compress, decompress
from kafka_ha.records.errors import CorruptRecordError, RecordTooLargeError
from kafka_ha.records.format import CODEC_GZIP, CODEC_LZ4, CODEC_NAMES, CODEC_SNAPPY, CODEC_ZSTD
from kafka_ha.records.validate import assign_offsets
from kafka_ha.records.varint import encode_varint

MB = 1024 * 1024


def records(n, value=b"v" * 10):
    return b"".join(encode_v2_record(Record(b"k", value), i, 0) for i in range(n))


def assign(batch, max_bytes=MB):
    return assign_offsets(batch, 0, 0, max_bytes, allow_zstd=True)


def test_an_honest_batch_passes():
    assert assign(assemble_v2_batch(records(3), 3, 1000, 1000)).count == 3


@pytest.mark.parametrize("claimed", [2**31 - 1, 4, 2])
def test_a_record_count_that_does_not_match_the_records_is_corrupt(claimed):
    with pytest.raises(CorruptRecordError):
        assign(assemble_v2_batch(records(3), claimed, 1000, 1000))


def test_garbage_records_are_corrupt():
    with pytest.raises(CorruptRecordError):
        assign(assemble_v2_batch(b"\x99" * 50, 1, 1000, 1000))


def test_offset_deltas_must_count_up_from_zero():
    body = encode_v2_record(Record(b"k", b"v"), 0, 0) + encode_v2_record(Record(b"k", b"v"), 5, 0)
    with pytest.raises(CorruptRecordError):
        assign(assemble_v2_batch(body, 2, 1000, 1000))


def _record(fields: bytes) -> bytes:
    return encode_varint(len(fields)) + fields


@pytest.mark.parametrize("fields", [
    b"\x00\x00\x00" + encode_varint(100) + b"k" + encode_varint(1) + b"v" + b"\x00",   # key past the end
    b"\x00\x00\x00" + encode_varint(-5) + encode_varint(1) + b"v" + b"\x00",            # key length -5
    b"\x00\x00\x00" + encode_varint(1) + b"k" + encode_varint(1) + b"v" + encode_varint(-1),  # headers -1
    b"\x00\x00\x00" + encode_varint(1) + b"k" + encode_varint(1) + b"v" + b"\x00" + b"extra",  # trailing
])
def test_lengths_inside_a_record_must_fit_it(fields):
    with pytest.raises(CorruptRecordError):
        assign(assemble_v2_batch(_record(fields), 1, 1000, 1000))


def test_two_byte_varints_are_checked_like_one_byte_ones():
    """The walk decodes one- and two-byte varints inline (1 KiB values, offset deltas of
    64 and more); they get the same checks as the long ones."""
    value = b"v" * 1024
    assert assign(assemble_v2_batch(records(200, value), 200, 1000, 1000)).count == 200
    # Offset delta 100 (two bytes) where 99 is due.
    skipped = records(99, value) + encode_v2_record(Record(b"k", value), 100, 0)
    with pytest.raises(CorruptRecordError, match="offset delta 100"):
        assign(assemble_v2_batch(skipped, 100, 1000, 1000))
    # A two-byte value length past the end of its record.
    fields = b"\x00\x00\x00" + encode_varint(1) + b"k" + encode_varint(302) + b"v" * 299 + b"\x00"
    with pytest.raises(CorruptRecordError, match="value length 302"):
        assign(assemble_v2_batch(_record(fields), 1, 1000, 1000))
    # Seven bytes that end inside a two-byte length: the records end inside a record.
    with pytest.raises(CorruptRecordError):
        assign(assemble_v2_batch(b"\x00" * 6 + b"\x80", 1, 1000, 1000))


def test_headers_are_checked_too():
    good = build_v2_batch([Record(b"k", b"v", headers=[("h", b"x"), ("n", None)])], timestamp_ms=1)
    assert assign(good).count == 1


@pytest.mark.parametrize("codec", sorted(c for c in available_codecs() if c))
def test_a_compressed_batch_is_checked_inside(codec):
    name = CODEC_NAMES[codec]
    assert assign(assemble_v2_batch(records(50), 50, 1000, 1000, name)).count == 50
    with pytest.raises(CorruptRecordError):
        assign(assemble_v2_batch(records(50), 51, 1000, 1000, name))


@pytest.mark.parametrize("codec", sorted(c for c in available_codecs() if c))
def test_a_decompression_bomb_stops_at_the_limit_without_inflating(codec):
    bomb = compress(codec, bytes(64 * MB))
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError):
            decompress(codec, bomb, max_bytes=MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MB, peak
    assert decompress(codec, compress(codec, b"x" * 1000), max_bytes=1000) == b"x" * 1000


def test_a_compressed_v2_batch_larger_than_max_message_bytes_inflated_is_refused():
    body = records(2000, value=b"\x00" * 1000)                  # ~2 MB of records
    batch = assemble_v2_batch(body, 2000, 1000, 1000, "gzip")   # a few KB compressed
    assert len(batch) < 64 * 1024
    with pytest.raises(RecordTooLargeError):
        assign(batch, max_bytes=MB)


def test_a_legacy_wrapper_of_a_million_empty_messages_is_refused_cheaply():
    inner = encode_legacy_message(0, 1, 0, None, b"", 0) * 1_000_000
    wrapper = encode_legacy_message(0, 1, CODEC_GZIP, None, compress(CODEC_GZIP, inner, 1), 0)
    assert len(wrapper) < 200 * 1024
    with pytest.raises(RecordTooLargeError):
        assign(wrapper, max_bytes=MB)


def test_down_converting_a_stored_bomb_stops_at_the_limit():
    from kafka_ha.records.down_convert import down_convert

    body = records(20000, value=b"\x00" * 1000)                      # ~20 MB of records
    stored = assemble_v2_batch(body, 20000, 1000, 1000, "gzip")      # as if stored earlier
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError):
            down_convert(stored, 1, max_bytes=MB, max_inflate=2 * MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MB, peak
