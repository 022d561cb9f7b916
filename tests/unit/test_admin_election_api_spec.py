"""ElectLeaders, Alter/ListPartitionReassignments and ApiVersions v3 checked field by field
(names, types, nullability, compact encoding, tagged sections) against Kafka's JSON
message definitions, as kafka-python ships them."""
import pytest

load_json = pytest.importorskip("kafka.protocol.schemas.load_json",
                                reason="kafka-python ships Kafka's message definitions").load_json

from kafka_ha.protocol.api import REQUEST_SCHEMAS, RESPONSE_SCHEMAS, ApiKey, is_flexible  # noqa: E402
from kafka_ha.protocol.schema import (  # noqa: E402
    COMPACT_NULLABLE_STRING, COMPACT_STRING, INT8, INT16, INT32, NULLABLE_STRING, STRING, Array,
    CompactArray, Struct)
from tests.harness.kafka_message_specs import in_versions, snake  # noqa: E402

CHECKED = {ApiKey.ELECT_LEADERS: "ElectLeaders", ApiKey.ALTER_PARTITION_REASSIGNMENTS:
           "AlterPartitionReassignments", ApiKey.LIST_PARTITION_REASSIGNMENTS:
           "ListPartitionReassignments", ApiKey.API_VERSIONS: "ApiVersions"}
CASES = sorted(kv for kv in REQUEST_SCHEMAS if kv[0] in CHECKED and
               (kv[0] != ApiKey.API_VERSIONS or kv[1] >= 3))


def theirs(fields: list, version: int, flexible: bool) -> tuple:
    out = []
    for f in fields:
        if not in_versions(f["versions"], version) or "tag" in f:
            continue
        nullable = in_versions(f.get("nullableVersions"), version)
        kind = f["type"]
        if kind.startswith("[]"):
            inner = kind[2:]
            item = ({"int8": "INT8", "int16": "INT16", "int32": "INT32", "string": "STRING"}[inner]
                    if inner[0].islower() else theirs(f["fields"], version, flexible))
            out.append((snake(f["name"]), ("array", flexible, nullable, item)))
        else:
            out.append((snake(f["name"]), (kind.upper(), flexible and kind == "string", nullable)))
    return (flexible, tuple(out))


SCALARS = {INT8: ("INT8", False, False), INT16: ("INT16", False, False), INT32: ("INT32", False, False),
           STRING: ("STRING", False, False), NULLABLE_STRING: ("STRING", False, True),
           COMPACT_STRING: ("STRING", True, False), COMPACT_NULLABLE_STRING: ("STRING", True, True)}


def ours(struct: Struct) -> tuple:
    out = []
    for name, typ in struct.fields:
        if isinstance(typ, (Array, CompactArray)):
            item = ours(typ.item) if isinstance(typ.item, Struct) else SCALARS[typ.item][0]
            out.append((name, ("array", isinstance(typ, CompactArray), typ.nullable, item)))
        else:
            out.append((name, SCALARS[typ]))
    return (struct.tagged, tuple(out))


@pytest.mark.parametrize("key_version", CASES, ids=lambda kv: f"{CHECKED[kv[0]]}-v{kv[1]}")
def test_layout_matches_kafkas_message_definition(key_version):
    key, version = key_version
    for kind, table in (("Request", REQUEST_SCHEMAS), ("Response", RESPONSE_SCHEMAS)):
        spec = load_json(CHECKED[key] + kind)
        if not in_versions(spec["validVersions"], version):
            pytest.skip(f"{CHECKED[key]} v{version} is no longer in Kafka's definitions")
        flexible = in_versions(spec.get("flexibleVersions"), version)
        assert is_flexible(key, version) == flexible
        assert ours(table[key_version]) == theirs(spec["fields"], version, flexible)
