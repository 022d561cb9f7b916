"""Compress and decompress record payloads with Kafka's codec framings.

gzip uses the standard library.  snappy, lz4 and zstd are optional: they come
from ``cramjam`` when installed, else from ``python-snappy`` / ``lz4`` /
``zstandard``; a codec whose library is absent raises
:class:`UnsupportedCompressionError` (UNSUPPORTED_COMPRESSION_TYPE), as does
an unknown codec id.

Decompression takes a ``max_bytes`` bound and stops there with
:class:`RecordTooLargeError` instead of inflating a bomb (1 MB of gzip can
hold 1 GB of zeros): gzip is inflated in steps, snappy states its length up
front, lz4 and zstd decompress into a buffer that grows (by four, from a few
times the input) up to the bound and no further.

Framing quirks handled here (Kafka's producers and consumers):

- snappy: Java clients and kafka-python write *xerial* framing, librdkafka raw
  snappy; decoding accepts both, encoding writes xerial like the Java client.
- lz4: magic 0 used a wrong LZ4F header checksum (KAFKA-3160, computed over
  the frame magic too) and no content-size field; magic 1 and 2 use correct
  LZ4F frames.

>>> decompress(CODEC_GZIP, compress(CODEC_GZIP, b"abc" * 10)) == b"abc" * 10
True
>>> compress(7, b"")
Traceback (most recent call last):
...
kafka_ha.records.errors.UnsupportedCompressionError: unknown compression codec 7
"""
from __future__ import annotations

import struct
import zlib

from .errors import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError
from .format import CODEC_GZIP, CODEC_LZ4, CODEC_NAMES, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD, MAGIC_V0

try:
    import cramjam as _cramjam
except ImportError:  # pragma: no cover - depends on the installation
    _cramjam = None

XERIAL_HEADER = b"\x82SNAPPY\x00"
_XERIAL_PREAMBLE = XERIAL_HEADER + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024      # the Java client's SnappyOutputStream block size
_I32 = struct.Struct(">i")
_LZ4F_MAGIC = b"\x04\x22\x4d\x18"


def _raw_snappy():
    if _cramjam is not None:
        return (lambda d: bytes(_cramjam.snappy.compress_raw(d)),
                lambda d: bytes(_cramjam.snappy.decompress_raw(d)))
    try:
        import snappy
    except ImportError:
        return None
    return snappy.compress, snappy.decompress


def _lz4_frame():
    if _cramjam is not None:
        return (lambda d: bytes(_cramjam.lz4.compress(d)),
                lambda d: bytes(_cramjam.lz4.decompress(d)))
    try:
        import lz4.frame as lz4f
    except ImportError:
        return None
    return (lambda d: lz4f.compress(d, content_checksum=True)), lz4f.decompress


def _zstd():
    if _cramjam is not None:
        return (lambda d: bytes(_cramjam.zstd.compress(d)),
                lambda d: bytes(_cramjam.zstd.decompress(d)))
    try:
        import zstandard
    except ImportError:
        return None
    return (lambda d: zstandard.ZstdCompressor().compress(d),
            lambda d: zstandard.ZstdDecompressor().decompressobj().decompress(d))


_BACKENDS = {CODEC_SNAPPY: _raw_snappy(), CODEC_LZ4: _lz4_frame(), CODEC_ZSTD: _zstd()}


def available_codecs() -> set[int]:
    """Codec ids this process can compress and decompress."""
    return {CODEC_NONE, CODEC_GZIP} | {c for c, impl in _BACKENDS.items() if impl is not None}


def _backend(codec: int):
    if codec not in CODEC_NAMES:
        raise UnsupportedCompressionError(f"unknown compression codec {codec}")
    impl = _BACKENDS.get(codec)
    if impl is None:
        raise UnsupportedCompressionError(
            f"{CODEC_NAMES[codec]} compression needs cramjam (or its codec package), not installed")
    return impl


def compress(codec: int, data: bytes, magic: int = 2) -> bytes:
    """``data`` compressed with ``codec`` in the framing Kafka uses for ``magic``."""
    if codec == CODEC_NONE:
        return bytes(data)
    if codec == CODEC_GZIP:
        co = zlib.compressobj(6, zlib.DEFLATED, 31)   # wbits 31: a gzip stream
        return co.compress(data) + co.flush()
    raw_compress = _backend(codec)[0]
    if codec == CODEC_SNAPPY:
        blocks = [_XERIAL_PREAMBLE]
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = raw_compress(bytes(view[start:start + _XERIAL_BLOCK]))
            blocks += (_I32.pack(len(block)), block)
        return b"".join(blocks)
    frame = raw_compress(bytes(data))
    if codec == CODEC_LZ4 and magic == MAGIC_V0:
        return _lz4_to_kafka3160(frame)
    return frame


def decompress(codec: int, data, magic: int = 2, max_bytes: int | None = None) -> bytes:
    """Inverse of :func:`compress`; garbage raises :class:`CorruptRecordError`, and more
    than ``max_bytes`` of output :class:`RecordTooLargeError` (before it is all made)."""
    if codec == CODEC_NONE:
        return bytes(data)
    try:
        if codec == CODEC_GZIP:
            return _gunzip(data, max_bytes)
        raw_decompress = _backend(codec)[1]
        if codec == CODEC_SNAPPY:
            return _unsnappy(bytes(data), raw_decompress, max_bytes)
        if codec == CODEC_LZ4 and magic == MAGIC_V0:
            data = _lz4_fix_header_checksum(bytes(data))
        if max_bytes is not None:
            return _bounded(codec, bytes(data), raw_decompress, max_bytes)
        return raw_decompress(bytes(data))
    except (UnsupportedCompressionError, RecordTooLargeError):
        raise
    except Exception as exc:  # each library has its own error types
        raise CorruptRecordError(f"cannot decompress {CODEC_NAMES[codec]} payload: {exc}") from exc


def _too_large(codec: int, max_bytes: int) -> RecordTooLargeError:
    return RecordTooLargeError(f"{CODEC_NAMES[codec]} payload inflates to more than {max_bytes} bytes")


def _bounded(codec: int, data: bytes, raw_decompress, max_bytes: int) -> bytes:
    """lz4 or zstd output of at most ``max_bytes``, without making more."""
    module = None
    if _cramjam is not None:
        module = _cramjam.lz4 if codec == CODEC_LZ4 else _cramjam.zstd
    if module is None:   # the fallback libraries: inflate, then judge
        out = raw_decompress(data)
        if len(out) > max_bytes:
            raise _too_large(codec, max_bytes)
        return out
    size = min(max_bytes + 1, max(64 * 1024, 4 * len(data)))
    while True:
        buffer = bytearray(size)
        try:
            n = module.decompress_into(data, buffer)
        except _cramjam.DecompressionError as exc:
            # cramjam reports a full output buffer and bad input alike; a full
            # buffer says "failed to write whole buffer".
            if "whole buffer" not in str(exc):
                raise
            if size > max_bytes:
                raise _too_large(codec, max_bytes) from None
            size = min(max_bytes + 1, size * 4)
            continue
        if n > max_bytes:
            raise _too_large(codec, max_bytes)
        del buffer[n:]
        return bytes(buffer)


def _gunzip(data, max_bytes: int | None = None) -> bytes:
    # Loop over members: a gzip file may be several concatenated streams.
    out, rest, total = [], bytes(data), 0
    while rest:
        d = zlib.decompressobj(31)
        while True:
            limit = 0 if max_bytes is None else max_bytes + 1 - total
            chunk = d.decompress(rest, limit)
            out.append(chunk)
            total += len(chunk)
            if max_bytes is not None and total > max_bytes:
                raise _too_large(CODEC_GZIP, max_bytes)
            rest = d.unconsumed_tail
            if not rest or d.eof:
                break
        if not d.eof:
            raise CorruptRecordError("truncated gzip payload")
        rest = d.unused_data
    return b"".join(out)


def _unsnappy(data: bytes, raw_decompress, max_bytes: int | None = None) -> bytes:
    def block(raw: bytes, made: int) -> bytes:
        # Raw snappy states its decompressed length first: judge it before inflating.
        if max_bytes is not None and _cramjam is not None and \
                made + _cramjam.snappy.decompress_raw_len(raw) > max_bytes:
            raise _too_large(CODEC_SNAPPY, max_bytes)
        out = raw_decompress(raw)
        if max_bytes is not None and made + len(out) > max_bytes:
            raise _too_large(CODEC_SNAPPY, max_bytes)
        return out

    if not data.startswith(XERIAL_HEADER):
        return block(data, 0)                             # librdkafka: raw snappy
    out, pos, made = [], len(_XERIAL_PREAMBLE), 0
    while pos < len(data):
        (length,) = _I32.unpack_from(data, pos)
        if length < 0 or pos + 4 + length > len(data):
            raise CorruptRecordError("truncated xerial snappy block")
        out.append(block(data[pos + 4:pos + 4 + length], made))
        made += len(out[-1])
        pos += 4 + length
    return b"".join(out)


# --- lz4 for magic 0 (KAFKA-3160) -------------------------------------------------------

def _xxh32(data: bytes, seed: int = 0) -> int:
    # Only ever hashes an LZ4F frame descriptor (< 16 bytes), so the short-input
    # path of xxHash32 suffices and no extra dependency is needed.
    p1, p2, p3, p4, p5, m = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 0xFFFFFFFF
    assert len(data) < 16
    h = (seed + p5 + len(data)) & m
    pos = 0
    while pos + 4 <= len(data):
        h = (h + int.from_bytes(data[pos:pos + 4], "little") * p3) & m
        h = (((h << 17) | (h >> 15)) & m) * p4 & m
        pos += 4
    for byte in data[pos:]:
        h = (h + byte * p5) & m
        h = (((h << 11) | (h >> 21)) & m) * p1 & m
    h ^= h >> 15
    h = h * p2 & m
    h ^= h >> 13
    h = h * p3 & m
    return h ^ (h >> 16)


def _lz4_descriptor_end(frame: bytes) -> int:
    if frame[:4] != _LZ4F_MAGIC or len(frame) < 7:
        raise CorruptRecordError("lz4 payload is not an LZ4F frame")
    flg = frame[4]
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)   # + content size, dict id


def _lz4_to_kafka3160(frame: bytes) -> bytes:
    end = _lz4_descriptor_end(frame)
    if frame[4] & 0x08:   # old Kafka rejects the content-size field: drop it
        frame = frame[:4] + bytes([frame[4] & ~0x08]) + frame[5:6] + frame[14:]
        end = _lz4_descriptor_end(frame)
    broken = (_xxh32(frame[:end]) >> 8) & 0xFF          # wrongly includes the frame magic
    return frame[:end] + bytes([broken]) + frame[end + 1:]


def _lz4_fix_header_checksum(frame: bytes) -> bytes:
    end = _lz4_descriptor_end(frame)
    correct = (_xxh32(frame[4:end]) >> 8) & 0xFF
    return frame[:end] + bytes([correct]) + frame[end + 1:]
