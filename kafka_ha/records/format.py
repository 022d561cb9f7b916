"""Byte layouts of Kafka log entries: magic 0/1 messages and v2 record batches.

Every log entry, whatever its magic, starts ``offset i64, size i32`` and has
its magic byte at byte 16, so one walker can branch on it (Kafka's
``docs/implementation.html``).  This module holds only constants, ``struct`` layouts and the two CRC
helpers; the parsing lives in :mod:`.shallow`.

>>> LEGACY_PREFIX.size, V2_HEADER.size
(12, 61)
>>> hex(crc32c(b"123456789"))   # the published CRC-32C check value
'0xe3069283'
>>> hex(crc32(b"123456789"))    # the published CRC-32 (IEEE) check value
'0xcbf43926'
"""
from __future__ import annotations

import struct
import zlib

# --- common prefix of every entry -------------------------------------------------
OFFSET_OFFSET = 0
SIZE_OFFSET = 8
LOG_OVERHEAD = 12          # offset i64 + size i32; an entry is LOG_OVERHEAD + size bytes
MAGIC_OFFSET = 16          # the same position in all three formats
LEGACY_PREFIX = struct.Struct(">qi")
OFFSET_FIELD = struct.Struct(">q")

# --- magic 0/1 message (positions from the start of the entry) ---------------------
CRC_OFFSET = 12            # u32, CRC-32 of magic..end of value
ATTRIBUTES_OFFSET = 17     # i8
V1_TIMESTAMP_OFFSET = 18   # i64, magic 1 only
V0_KEY_OFFSET = 18         # i32 key length, then key, i32 value length, value
V1_KEY_OFFSET = 26
V0_MIN_SIZE = 14           # crc 4 + magic 1 + attributes 1 + key len 4 + value len 4
V1_MIN_SIZE = 22           # ... + timestamp 8
LEGACY_HEADER = struct.Struct(">qiIbb")      # offset, size, crc, magic, attributes
V1_TIMESTAMP = struct.Struct(">q")
LENGTH = struct.Struct(">i")

# --- v2 record batch (positions from the start of the batch) -----------------------
BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
V2_CRC_OFFSET = 17
V2_ATTRIBUTES_OFFSET = 21  # the CRC-32C covers from here to the end of the batch
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
V2_HEADER_SIZE = 61
V2_MIN_BATCH_LENGTH = V2_HEADER_SIZE - LOG_OVERHEAD   # 49
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordsCount
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
# The two fields a leader rewrites in place (both outside the CRC): baseOffset is
# written with OFFSET_FIELD, partitionLeaderEpoch with V2_EPOCH.
V2_EPOCH = struct.Struct(">i")

# --- attributes ----------------------------------------------------------------------
MAGIC_V0, MAGIC_V1, MAGIC_V2 = 0, 1, 2
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08      # magic 1 and 2: 0 CreateTime, 1 LogAppendTime
TRANSACTIONAL_MASK = 0x10       # magic 2
CONTROL_MASK = 0x20             # magic 2

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy",
               CODEC_LZ4: "lz4", CODEC_ZSTD: "zstd"}
CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}

CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE = 0, 1, -1
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1


def crc32(data) -> int:
    """CRC-32 (IEEE) as an unsigned int: the magic 0/1 message checksum."""
    return zlib.crc32(data) & 0xFFFFFFFF


try:
    from crc32c import crc32c as _crc32c
    CRC32C_ACCELERATED = True
except ImportError:  # pragma: no cover - the broker requires the package
    CRC32C_ACCELERATED = False
    _TABLE = []
    for _n in range(256):
        _c = _n
        for _ in range(8):
            _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
        _TABLE.append(_c)

    def _crc32c(data) -> int:
        # A bytewise fallback so a client without the C extension still works;
        # it is ~1 MB/s, which is why setup.cfg requires the ``crc32c`` package.
        crc = 0xFFFFFFFF
        for byte in bytes(data):
            crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
        return crc ^ 0xFFFFFFFF


def crc32c(data) -> int:
    """CRC-32C (Castagnoli) as an unsigned int: the v2 batch checksum."""
    return _crc32c(data)


def codec_id(name: str) -> int:
    """``"gzip"`` -> 1.  Raises ValueError for an unknown name.

    >>> codec_id("none"), codec_id("lz4")
    (0, 3)
    """
    try:
        return CODEC_IDS[name]
    except KeyError:
        raise ValueError(f"unknown compression {name!r}, expected one of {sorted(CODEC_IDS)}") from None
