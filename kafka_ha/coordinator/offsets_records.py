"""The keys and values of ``__consumer_offsets`` records, as Kafka writes them.

Every key and value starts with an INT16 schema version.  Keys: versions 0 and 1
are an offset commit (group, topic, partition); version 2 is a group's metadata
(group).  Offset commit values: v0 (offset, metadata, timestamp), v1 adds an
expire timestamp (0.10-2.0), v2 drops it (2.1), v3 adds the leader epoch after
the offset (2.1+).  Group metadata values: v0, v1 adds each member's rebalance
timeout (0.10.1+), v2 the time of the last state change (2.1+).  A null value
is a tombstone: the offset, or the group, is gone.

This broker writes offset values v1 (v3 when the commit names a leader epoch) and
group values v2, and reads every version above.  A key or value of another version raises ``UnknownRecordVersion``.

>>> key = offset_key("g", "t", 1)
>>> key.hex()
'000100016700017400000001'
>>> decode_key(key)
OffsetKey(group='g', topic='t', partition=1)
>>> decode_key(group_key("g"))
GroupKey(group='g')
"""
from __future__ import annotations

from typing import Any, NamedTuple

from kafka_ha.protocol.primitives import ProtocolError, Reader, Writer
from kafka_ha.protocol.schema import BYTES, INT32, INT64, NULLABLE_STRING, STRING, Array, Struct


class UnknownRecordVersion(ValueError):
    """A key or value of a schema version this broker does not know."""


class OffsetKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupKey(NamedTuple):
    group: str


class OffsetValue(NamedTuple):
    offset: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    leader_epoch: int = -1


_OFFSET_KEY = Struct(("group", STRING), ("topic", STRING), ("partition", INT32))
_GROUP_KEY = Struct(("group", STRING))
_OFFSET_VALUES = {
    0: Struct(("offset", INT64), ("metadata", STRING), ("commit_timestamp", INT64)),
    1: Struct(("offset", INT64), ("metadata", STRING), ("commit_timestamp", INT64),
              ("expire_timestamp", INT64)),
    2: Struct(("offset", INT64), ("metadata", STRING), ("commit_timestamp", INT64)),
    3: Struct(("offset", INT64), ("leader_epoch", INT32), ("metadata", STRING),
              ("commit_timestamp", INT64)),
}
_MEMBER_FIELDS = {
    0: (("member_id", STRING), ("client_id", STRING), ("client_host", STRING),
        ("session_timeout", INT32), ("subscription", BYTES), ("assignment", BYTES)),
    1: (("member_id", STRING), ("client_id", STRING), ("client_host", STRING),
        ("rebalance_timeout", INT32), ("session_timeout", INT32),
        ("subscription", BYTES), ("assignment", BYTES)),
}
_GROUP_HEAD = (("protocol_type", STRING), ("generation", INT32),
               ("protocol", NULLABLE_STRING), ("leader", NULLABLE_STRING))
_GROUP_VALUES = {
    0: Struct(*_GROUP_HEAD, ("members", Array(Struct(*_MEMBER_FIELDS[0])))),
    1: Struct(*_GROUP_HEAD, ("members", Array(Struct(*_MEMBER_FIELDS[1])))),
    2: Struct(*_GROUP_HEAD, ("current_state_timestamp", INT64),
              ("members", Array(Struct(*_MEMBER_FIELDS[1])))),
}
OFFSET_VALUE_VERSION = 1
EPOCH_VALUE_VERSION = 3    # with the committed leader epoch (OffsetCommit v6+), no expire timestamp
GROUP_VALUE_VERSION = 2


def _versioned(version: int, schema: Struct, value: dict[str, Any]) -> bytes:
    writer = Writer()
    writer.int16(version)
    schema.encode(writer, value)
    return writer.getvalue()


def _split(data: bytes) -> tuple[int, Reader]:
    reader = Reader(data)
    return reader.int16(), reader


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _versioned(1, _OFFSET_KEY, {"group": group, "topic": topic, "partition": partition})


def group_key(group: str) -> bytes:
    return _versioned(2, _GROUP_KEY, {"group": group})


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    version, reader = _split(data)
    if version in (0, 1):
        return OffsetKey(**_read_all(_OFFSET_KEY, reader))
    if version == 2:
        return GroupKey(**_read_all(_GROUP_KEY, reader))
    raise UnknownRecordVersion(f"offsets topic key version {version}")


def offset_value(value: OffsetValue, version: int = OFFSET_VALUE_VERSION) -> bytes:
    schema = _OFFSET_VALUES[version]
    fields = value._asdict()
    return _versioned(version, schema, {name: fields[name] for name in schema.names})


def decode_offset_value(data: bytes) -> OffsetValue:
    version, reader = _split(data)
    schema = _OFFSET_VALUES.get(version)
    if schema is None:
        raise UnknownRecordVersion(f"offset commit value version {version}")
    return OffsetValue(**_read_all(schema, reader))


def group_value(group: dict[str, Any], version: int = GROUP_VALUE_VERSION) -> bytes:
    """``group``: protocol_type, generation, protocol, leader, current_state_timestamp and
    members (dicts with the v1 member fields)."""
    return _versioned(version, _GROUP_VALUES[version], group)


def decode_group_value(data: bytes) -> dict[str, Any]:
    """The group's fields; members of v0 get rebalance_timeout = session_timeout
    (what Kafka assumes for them) and v0/v1 a current_state_timestamp of -1."""
    version, reader = _split(data)
    schema = _GROUP_VALUES.get(version)
    if schema is None:
        raise UnknownRecordVersion(f"group metadata value version {version}")
    group = _read_all(schema, reader)
    group.setdefault("current_state_timestamp", -1)
    for member in group["members"]:
        member.setdefault("rebalance_timeout", member["session_timeout"])
    return group


def _read_all(schema: Struct, reader: Reader) -> dict[str, Any]:
    value = schema.decode(reader)
    if reader.remaining():
        # Kafka tolerates nothing after a value either: a longer record is a newer schema.
        raise ProtocolError(f"{reader.remaining()} trailing bytes after {schema.name}")
    return value
