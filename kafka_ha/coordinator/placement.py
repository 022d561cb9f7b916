"""Which ``__consumer_offsets`` partition holds a group: Kafka's choice, so that
tools computing it themselves agree with the brokers.

Kafka takes ``Utils.abs(group.hashCode()) % partitions``: Java's String.hashCode
(``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, wrapping at 32 bits),
and a ``Utils.abs`` that maps Integer.MIN_VALUE to 0 (``n & 0x7fffffff``) where
Math.abs would leave it negative.

>>> java_string_hash_code("")
0
>>> java_string_hash_code("hello")
99162322
>>> java_string_hash_code("\U0001F600")   # a surrogate pair: 0xD83D * 31 + 0xDE00
1772899
>>> java_string_hash_code("polygenelubricants")     # Integer.MIN_VALUE
-2147483648
>>> partition_for("polygenelubricants", 50)
0
>>> partition_for("my-group", 50)
36
"""
from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash_code(text: str) -> int:
    """Java's ``String.hashCode``: a signed 32-bit value."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: the low 31 bits, so MIN_VALUE maps to 0, not to itself."""
    return n & 0x7FFFFFFF


def partition_for(group_id: str, partitions: int) -> int:
    return kafka_abs(java_string_hash_code(group_id)) % partitions
