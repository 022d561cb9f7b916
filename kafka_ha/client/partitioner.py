"""Kafka's default partitioner: murmur2 of the key, round-robin for null keys.

Keys must land where Java clients put them (``Utils.toPositive(murmur2(key))
% numPartitions``), so :func:`murmur2` reproduces Java's 32-bit signed
arithmetic exactly.

>>> murmur2(b"21"), murmur2(b"foobar"), murmur2(b"abc")
(-973932308, -790332482, 479470107)
>>> [to_positive(murmur2(k)) % 1000 for k in (b"", b"a", b"ab", b"abc", b"123456789")]
[681, 524, 434, 107, 566]
"""
from __future__ import annotations

import random
from typing import Callable, Sequence

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF

# partitioner(topic, key, all_partitions, available_partitions) -> partition
Partitioner = Callable[[str, bytes | None, Sequence[int], Sequence[int]], int]


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit hash."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24              # Java's >>> on the unsigned 32-bit value
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not abs())."""
    return number & 0x7FFFFFFF


class DefaultPartitioner:
    """Hash keyed records; spread null-keyed ones round-robin over available partitions.

    Like Kafka's pre-2.4 DefaultPartitioner, the round-robin counter is per
    topic and starts at a random value, and a null key prefers partitions
    that currently have a leader.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._counters: dict[str, int] = {}

    def __call__(self, topic: str, key: bytes | None, all_partitions: Sequence[int],
                 available: Sequence[int]) -> int:
        if key is not None:
            return all_partitions[to_positive(murmur2(key)) % len(all_partitions)]
        n = self._counters.get(topic)
        if n is None:
            n = self._rng.randrange(1 << 31)
        self._counters[topic] = n + 1
        choices = available or all_partitions
        return choices[to_positive(n) % len(choices)]
