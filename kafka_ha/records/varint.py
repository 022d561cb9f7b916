"""Zigzag varints as used inside v2 records (protobuf encoding).

>>> encode_varint(300), encode_varint(-1), encode_varint(0)
(b'\\xd8\\x04', b'\\x01', b'\\x00')
>>> decode_varint(b'\\xd8\\x04', 0)
(300, 2)
"""
from __future__ import annotations

from .errors import CorruptRecordError


def _encode_slow(value: int) -> bytes:
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# A producer encodes six varints per record, nearly all of them small
# (deltas, lengths, header counts): those come from a table.
_TABLE_MIN, _TABLE_MAX = -8192, 8192          # every one- and two-byte varint
_TABLE = [_encode_slow(v) for v in range(_TABLE_MIN, _TABLE_MAX)]


def encode_varint(value: int) -> bytes:
    """Zigzag-encode a signed 64-bit value."""
    if _TABLE_MIN <= value < _TABLE_MAX:
        return _TABLE[value - _TABLE_MIN]
    return _encode_slow(value)


def decode_varint(buf, pos: int) -> tuple[int, int]:
    """``(value, next_position)`` of the zigzag varint at ``buf[pos]``."""
    # One- and two-byte varints (lengths and deltas of ordinary records) take
    # the short path: a consumer decodes six varints per record.
    try:
        byte = buf[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        second = buf[pos + 1]
        if second < 0x80:
            n = (byte & 0x7F) | (second << 7)
            return (n >> 1) ^ -(n & 1), pos + 2
    except IndexError:
        pass
    return _decode_slow(buf, pos)


def _decode_slow(buf, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise CorruptRecordError(f"truncated or overlong varint at record position {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
