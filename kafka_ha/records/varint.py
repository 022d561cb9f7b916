"""Zigzag varints as used inside v2 records (protobuf encoding).

>>> encode_varint(300), encode_varint(-1), encode_varint(0)
(b'\\xd8\\x04', b'\\x01', b'\\x00')
>>> decode_varint(b'\\xd8\\x04', 0)
(300, 2)
"""
from __future__ import annotations

from .errors import CorruptRecordError


def encode_varint(value: int) -> bytes:
    """Zigzag-encode a signed 64-bit value."""
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_varint(buf, pos: int) -> tuple[int, int]:
    """``(value, next_position)`` of the zigzag varint at ``buf[pos]``."""
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
