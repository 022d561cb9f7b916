"""CreateTopics, DeleteTopics and CreatePartitions (protocol/topic_admin_api.py) checked field
by field, names included, against Kafka's own JSON message definitions as kafka-python ships them."""
import pytest

pytest.importorskip("kafka.protocol.schemas.load_json",
                    reason="kafka-python ships Kafka's message definitions")

from kafka_ha.protocol.topic_admin_api import TOPIC_ADMIN_SCHEMAS  # noqa: E402
from tests.harness.kafka_message_specs import kafkas, ours, same_layout, snake  # noqa: E402

NAMES = {19: "CreateTopics", 20: "DeleteTopics", 37: "CreatePartitions"}


def names(layout: list) -> list:
    """Field names all the way down (Kafka's timeoutMs is camel case: snake-cased here)."""
    return [(snake(name), names(typ[1]) if isinstance(typ, tuple) and isinstance(typ[1], list)
             else None) for name, typ in layout]


@pytest.mark.parametrize("key_version", sorted(TOPIC_ADMIN_SCHEMAS),
                         ids=lambda kv: f"{NAMES[kv[0]]}-v{kv[1]}")
def test_layout_matches_kafkas_message_definition(key_version):
    key, version = key_version
    for struct, kind in zip(TOPIC_ADMIN_SCHEMAS[key_version], ("Request", "Response")):
        theirs = kafkas(NAMES[key] + kind, version)
        assert same_layout(ours(struct), theirs), (kind, ours(struct), theirs)
        assert names(ours(struct)) == names(theirs)
