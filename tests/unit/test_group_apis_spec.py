"""The group APIs' layouts (protocol/group_apis.py) checked field by field against
Kafka's own JSON message definitions, as kafka-python ships them."""
import re

import pytest

load_json = pytest.importorskip("kafka.protocol.schemas.load_json",
                                reason="kafka-python ships Kafka's message definitions").load_json

from kafka_ha.protocol.group_apis import GROUP_SCHEMAS  # noqa: E402
from kafka_ha.protocol.schema import (  # noqa: E402
    BOOLEAN, BYTES, INT8, INT16, INT32, INT64, NULLABLE_BYTES, NULLABLE_STRING, STRING, Array)

NAMES = {8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup",
         12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups",
         16: "ListGroups", 42: "DeleteGroups"}
# Kafka renamed this field for KIP-848 (4.0); the 2.x name is ours.
RENAMED = {("generation_id", "generation_id_or_member_epoch")}


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


@pytest.mark.parametrize("key_version", sorted(GROUP_SCHEMAS),
                         ids=lambda kv: f"{NAMES[kv[0]]}-v{kv[1]}")
def test_layout_matches_kafkas_message_definition(key_version):
    key, version = key_version
    request, response = GROUP_SCHEMAS[key_version]
    assert same_layout(ours(request), kafkas(NAMES[key] + "Request", version)), \
        (ours(request), kafkas(NAMES[key] + "Request", version))
    assert same_layout(ours(response), kafkas(NAMES[key] + "Response", version)), \
        (ours(response), kafkas(NAMES[key] + "Response", version))


def test_field_names_follow_kafka():
    """Names too, for the fields whose name this code base keeps as Kafka's."""
    mismatched = set()
    for (key, version), (request, response) in GROUP_SCHEMAS.items():
        if (key, version) in ((8, 0), (8, 1), (9, 0)):
            continue
        for struct, kind in ((request, "Request"), (response, "Response")):
            for (name, _), (their, _) in zip(ours(struct), kafkas(NAMES[key] + kind, version)):
                if name != their and (name, their) not in RENAMED:
                    mismatched.add((NAMES[key] + kind, name, their))
    assert mismatched == set()
