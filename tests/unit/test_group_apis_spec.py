"""The group APIs' layouts (protocol/group_apis.py) checked field by field against
Kafka's own JSON message definitions, as kafka-python ships them."""
import pytest

pytest.importorskip("kafka.protocol.schemas.load_json",
                    reason="kafka-python ships Kafka's message definitions")

from kafka_ha.protocol.group_apis import GROUP_SCHEMAS  # noqa: E402
from tests.harness.kafka_message_specs import kafkas, ours, same_layout  # noqa: E402

NAMES = {8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup",
         12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups",
         16: "ListGroups", 42: "DeleteGroups"}
# Kafka renamed this field for KIP-848 (4.0); the 2.x name is ours.
RENAMED = {("generation_id", "generation_id_or_member_epoch")}


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
