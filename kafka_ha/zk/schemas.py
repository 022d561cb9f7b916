"""Access to the JSON Schemas in ``zk_schemas/``, one per znode family.

The schemas document exactly what Kafka (and so this project) writes into
each znode; tests check every codec's ``encode`` output against them.
``jsonschema`` is a test dependency only, so it is imported lazily and
:func:`validate_znode` degrades to a JSON syntax check without it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# The repository root's zk_schemas/ (kafka_ha/zk/schemas.py -> parents[2]).
SCHEMA_DIR = Path(__file__).resolve().parents[2] / "zk_schemas"

FAMILIES: tuple[str, ...] = (
    "broker_registration", "topic_assignment", "partition_state", "controller",
    "controller_epoch", "reassign_partitions", "preferred_replica_election",
    "delete_topic_marker", "isr_change_notification", "topic_config", "broker_config",
    "config_change_notification", "cluster_id", "consumer_offset", "producer_id_block",
)


def load_schema(family_name: str) -> dict[str, Any]:
    """The schema of one family, e.g. ``load_schema("partition_state")``.

    >>> load_schema("controller_epoch")["type"]
    'integer'
    """
    # A fixed name pattern keeps a caller's string from reaching outside the dir.
    if not re.fullmatch(r"[a-z_]+", family_name) or family_name not in FAMILIES:
        raise ValueError(f"unknown znode family {family_name!r}; known: {', '.join(FAMILIES)}")
    with open(SCHEMA_DIR / f"{family_name}.json", encoding="utf-8") as f:
        schema: dict[str, Any] = json.load(f)
    return schema


def validate_znode(family_name: str, data: bytes | None) -> Any:
    """Parse znode ``data`` and check it against the family's schema.

    Null or empty data parses as JSON null (the delete marker); bare integers
    (``/controller_epoch``, consumer offsets) parse as JSON numbers.  Returns
    the parsed value.  Raises ``json.JSONDecodeError`` / ``UnicodeDecodeError``
    for bytes that are not JSON, and ``jsonschema.ValidationError`` when the
    value breaks the schema (only if jsonschema is installed).

    >>> validate_znode("controller_epoch", b"5")
    5
    """
    value = json.loads(data.decode("utf-8")) if data else None
    schema = load_schema(family_name)
    try:
        import jsonschema
    except ImportError:
        return value
    jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)
    return value
