"""docs/configuration.md is generated from kafka_ha/config.py and stays in step with it."""
from kafka_ha import config
from kafka_ha.tools import config_docs


def test_generated_reference_is_up_to_date():
    assert config_docs.main(["--check"]) == 0, "run python -m kafka_ha.tools.config_docs"


def test_every_key_is_documented_with_its_default(tmp_path):
    text = config_docs.render()
    for key in config.KEYS:
        assert f"| `{key.name}` |" in text
    assert "| `broker.id` | int | (required) | [0,...] | no |" in text
    assert "`num.network.threads`" in text.split("## Kafka keys accepted and ignored")[1]
    out = tmp_path / "configuration.md"
    assert config_docs.main(["--check", "--output", str(out)]) == 1
    assert config_docs.main(["--output", str(out)]) == 0
    assert config_docs.main(["--check", "--output", str(out)]) == 0
