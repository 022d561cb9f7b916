"""ListOffsets v0-4: the layouts against Kafka's JSON message definitions (names and
types), and the broker's answers per version (data_apis.list_offsets_entry)."""
import pytest

from kafka_ha.broker.data_apis import list_offsets_entry
from kafka_ha.broker.replica_offsets import OffsetLookup
from kafka_ha.protocol.api import ADVERTISED_VERSIONS, REQUEST_SCHEMAS, RESPONSE_SCHEMAS, ApiKey

spec = pytest.importorskip("tests.unit.test_group_apis_spec")


@pytest.mark.parametrize("version", range(0, 5))
def test_layout_matches_kafkas_message_definition(version):
    for schemas, message in ((REQUEST_SCHEMAS, "ListOffsetsRequest"),
                             (RESPONSE_SCHEMAS, "ListOffsetsResponse")):
        mine = spec.ours(schemas[(ApiKey.LIST_OFFSETS, version)])
        theirs = spec.kafkas(message, version)
        assert spec.same_layout(mine, theirs), (mine, theirs)
        assert [n for n, _ in mine] == [n for n, _ in theirs]


def test_kafka_2_1_versions_are_advertised():
    assert ADVERTISED_VERSIONS[ApiKey.LIST_OFFSETS] == (0, 4)


def test_entries_per_version():
    found = OffsetLookup(0, 42, 1_000, 7)
    none = OffsetLookup(0)
    assert list_offsets_entry(1, 0, none) == {"partition_index": 1, "error_code": 0, "old_style_offsets": []}
    assert list_offsets_entry(1, 1, found) == {"partition_index": 1, "error_code": 0,
                                               "timestamp": 1_000, "offset": 42}
    assert list_offsets_entry(1, 3, none) == {"partition_index": 1, "error_code": 0,
                                              "timestamp": -1, "offset": -1}
    assert list_offsets_entry(1, 4, OffsetLookup(74))["leader_epoch"] == -1
