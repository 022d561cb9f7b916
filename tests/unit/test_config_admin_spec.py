"""The config and log admin APIs' layouts (protocol/config_admin_api.py) checked field
by field against Kafka's own JSON message definitions, as kafka-python ships them."""
import pytest

pytest.importorskip("kafka.protocol.schemas.load_json",
                    reason="kafka-python ships Kafka's message definitions")

from kafka_ha.protocol.config_admin_api import CONFIG_ADMIN_SCHEMAS  # noqa: E402
from tests.harness.kafka_message_specs import kafkas, ours, same_layout  # noqa: E402

NAMES = {21: "DeleteRecords", 32: "DescribeConfigs", 33: "AlterConfigs", 35: "DescribeLogDirs",
         44: "IncrementalAlterConfigs"}
# Kafka's own misspelling ("IncludeSynoyms"); ours is spelt right.
RENAMED = {("include_synonyms", "include_synoyms")}


@pytest.mark.parametrize("key_version", sorted(CONFIG_ADMIN_SCHEMAS),
                         ids=lambda kv: f"{NAMES[kv[0]]}-v{kv[1]}")
def test_layout_and_names_match_kafkas_message_definition(key_version):
    key, version = key_version
    for struct, kind in zip(CONFIG_ADMIN_SCHEMAS[key_version], ("Request", "Response")):
        theirs = kafkas(NAMES[key] + kind, version)
        assert same_layout(ours(struct), theirs), (ours(struct), theirs)
        names = [(mine, their) for (mine, _), (their, _) in zip(ours(struct), theirs)
                 if mine != their]
        assert set(names) <= RENAMED
