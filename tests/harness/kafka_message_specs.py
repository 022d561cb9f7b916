"""Kafka's own JSON message definitions, as kafka-python ships them, and the comparison of
a layout of ours (protocol/schema.py Structs) with theirs, field by field: the spec tests of
each protocol module use these (tests/unit/test_*_spec.py)."""
import re

import pytest

from kafka_ha.protocol.schema import (
    BOOLEAN, BYTES, INT8, INT16, INT32, INT64, NULLABLE_BYTES, NULLABLE_STRING, STRING, Array)


def load_json(message: str) -> dict:
    """Kafka's definition of ``message``; the calling test is skipped without kafka-python."""
    return pytest.importorskip("kafka.protocol.schemas.load_json",
                               reason="kafka-python ships Kafka's message definitions").load_json(message)


def in_versions(spec: str | None, version: int) -> bool:
    if not spec or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    low, _, high = spec.partition("-")
    return int(low) <= version <= int(high or low)


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def expected_type(field: dict, version: int):
    kind = field["type"]
    nullable = in_versions(field.get("nullableVersions"), version)
    if kind.startswith("[]"):
        inner = kind[2:]
        item = kind_of(inner, False) if inner[0].islower() else \
            [(snake(f["name"]), expected_type(f, version)) for f in field["fields"]
             if in_versions(f["versions"], version) and "tag" not in f]
        return ("array", item, nullable)
    return kind_of(kind, nullable)


def kind_of(kind: str, nullable: bool):
    return {("int8", False): INT8, ("int16", False): INT16, ("int32", False): INT32,
            ("int64", False): INT64, ("bool", False): BOOLEAN, ("string", False): STRING,
            ("string", True): NULLABLE_STRING, ("bytes", False): BYTES,
            ("bytes", True): NULLABLE_BYTES,
            ("records", True): NULLABLE_BYTES}[(kind, nullable)]   # records: bytes on the wire


def ours(struct) -> list:
    out = []
    for name, typ in struct.fields:
        if isinstance(typ, Array):
            item = ours(typ.item) if hasattr(typ.item, "fields") else typ.item
            out.append((name, ("array", item, typ.nullable)))
        else:
            out.append((name, typ))
    return out


def kafkas(message: str, version: int) -> list:
    spec = load_json(message)
    if not in_versions(spec["validVersions"], version):
        # Kafka 4.0 (KIP-896) dropped the oldest versions from its definitions.
        pytest.skip(f"{message} v{version} is no longer in Kafka's definitions")
    assert not in_versions(spec.get("flexibleVersions"), version), "a flexible version"
    return [(snake(f["name"]), expected_type(f, version)) for f in spec["fields"]
            if in_versions(f["versions"], version) and "tag" not in f]


def same_layout(mine: list, theirs: list) -> bool:
    """Types equal in order; names equal up to this code base's known renames."""
    if len(mine) != len(theirs):
        return False
    for (name, typ), (their_name, their_typ) in zip(mine, theirs):
        if typ != their_typ and not (isinstance(typ, tuple) and isinstance(their_typ, tuple)
                                     and typ[0] == their_typ[0] == "array"
                                     and typ[2] == their_typ[2]
                                     and same_layout(*_items(typ[1], their_typ[1]))):
            return False
    return True


def _items(mine, theirs):
    return (mine if isinstance(mine, list) else [("", mine)],
            theirs if isinstance(theirs, list) else [("", theirs)])
