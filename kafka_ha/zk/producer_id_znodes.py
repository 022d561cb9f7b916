"""``/latest_producer_id_block``: the last block of producer ids a broker claimed.

Kafka's layout (its ProducerIdBlockZNode): ``{"version":1,"broker":<id>,
"block_start":"<n>","block_end":"<m>"}``, both ends inclusive and written as
decimal *strings* (Kafka writes ``toString`` of a Long and reads them back as
strings).  The node is created empty at start-up (``znodes.PERSISTENT_PATHS``):
empty data means no block was ever claimed.

>>> ProducerIdBlockZNode.encode(ProducerIdBlock(2, 1000, 1999))
b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
>>> ProducerIdBlockZNode.decode(b'{"version":1,"broker":2,"block_start":"0","block_end":"999"}')
ProducerIdBlock(broker_id=2, first=0, last=999)
>>> ProducerIdBlockZNode.decode(b"") is None
True
"""
from __future__ import annotations

from typing import NamedTuple

from kafka_ha.zk.errors import (MalformedZnode, check_int, check_str, check_version, json_object,
                                parse_json, required)
from kafka_ha.zk.znodes import LATEST_PRODUCER_ID_BLOCK_PATH, non_negative, to_json_bytes

PRODUCER_ID_BLOCK_SIZE = 1000   # Kafka's PidBlockSize
MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdBlock(NamedTuple):
    """Producer ids ``first..last`` (inclusive), claimed by ``broker_id``."""

    broker_id: int
    first: int
    last: int


def _decimal_string(value: object, path: str, name: str) -> int:
    text = check_str(value, path, name)
    if not text.isdigit() or int(text) > MAX_PRODUCER_ID:
        raise MalformedZnode(path, f"{name} must be a decimal producer id in a string, got {text!r}")
    return int(text)


class ProducerIdBlockZNode:
    SCHEMA = "producer_id_block"
    PATH = LATEST_PRODUCER_ID_BLOCK_PATH

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        first = non_negative(block.first, "block_start")
        last = non_negative(block.last, "block_end")
        if last < first or last > MAX_PRODUCER_ID:
            raise ValueError(f"producer id block {first}..{last} is empty or out of range")
        return to_json_bytes({"version": 1, "broker": non_negative(block.broker_id, "broker id"),
                              "block_start": str(first), "block_end": str(last)})

    @staticmethod
    def decode(data: bytes | None, path: str = LATEST_PRODUCER_ID_BLOCK_PATH) -> ProducerIdBlock | None:
        """The block in ``data``; None for empty data (no block claimed yet)."""
        if not data:
            return None
        obj = json_object(parse_json(data, path), path)
        check_version(obj, path)
        broker = check_int(required(obj, "broker", path), path, "broker")
        first = _decimal_string(required(obj, "block_start", path), path, "block_start")
        last = _decimal_string(required(obj, "block_end", path), path, "block_end")
        if last < first:
            raise MalformedZnode(path, f"block_end {last} is below block_start {first}")
        return ProducerIdBlock(broker, first, last)


def next_block(previous: ProducerIdBlock | None, broker_id: int,
               size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
    """The block after ``previous`` (the first block, 0..size-1, if there is none).

    >>> next_block(None, 1)
    ProducerIdBlock(broker_id=1, first=0, last=999)
    >>> next_block(ProducerIdBlock(1, 0, 999), 3)
    ProducerIdBlock(broker_id=3, first=1000, last=1999)
    """
    first = 0 if previous is None else previous.last + 1
    if first + size - 1 > MAX_PRODUCER_ID:
        raise ValueError("producer ids are exhausted")   # Kafka: "Have exhausted all producerIds"
    return ProducerIdBlock(broker_id, first, first + size - 1)
