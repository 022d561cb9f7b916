"""CreateTopics (19) v0-3, DeleteTopics (20) v0-3 and CreatePartitions (37) v0-1.

Field for field from Kafka's ``CreateTopicsRequest.json``, ``DeleteTopicsRequest.json``
and ``CreatePartitionsRequest.json`` (and their responses); none of these
versions is flexible.  What changes between versions:

- CreateTopics v1 adds ``validate_only`` to the request and ``error_message`` to
  each topic's result; v2 puts ``throttle_time_ms`` first in the response; v3 is
  v2 again (it only changes throttling).  -1 partitions / replication factor
  means "see the assignment" (v4 would let them mean the broker's defaults).
- DeleteTopics v1 adds ``throttle_time_ms``; v2 and v3 are v1 again (v3 may
  answer TOPIC_DELETION_DISABLED).  No error message before v5.
- CreatePartitions v1 is v0 again; its ``assignments`` is nullable (null: let
  the broker place the new partitions).
"""
from __future__ import annotations

from kafka_ha.protocol.schema import (
    BOOLEAN, INT16, INT32, NULLABLE_STRING, STRING, Array, Struct)

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
_THROTTLE = ("throttle_time_ms", INT32)
_TIMEOUT = ("timeout_ms", INT32)

_CREATABLE_TOPIC = Struct(
    ("name", STRING), ("num_partitions", INT32), ("replication_factor", INT16),
    ("assignments", Array(Struct(("partition_index", INT32), ("broker_ids", Array(INT32))))),
    ("configs", Array(Struct(("name", STRING), ("value", NULLABLE_STRING)))))
_CREATE_TOPICS_V0 = Struct(("topics", Array(_CREATABLE_TOPIC)), _TIMEOUT)
_CREATE_TOPICS_V1 = Struct(*_CREATE_TOPICS_V0.fields, ("validate_only", BOOLEAN))
_CREATED_V0 = Struct(("name", STRING), ("error_code", INT16))
_CREATED_V1 = Struct(*_CREATED_V0.fields, ("error_message", NULLABLE_STRING))

_DELETE_TOPICS = Struct(("topic_names", Array(STRING)), _TIMEOUT)
_DELETED = ("responses", Array(Struct(("name", STRING), ("error_code", INT16))))

_CREATE_PARTITIONS = Struct(
    ("topics", Array(Struct(
        ("name", STRING), ("count", INT32),
        ("assignments", Array(Struct(("broker_ids", Array(INT32))), nullable=True))))),
    _TIMEOUT, ("validate_only", BOOLEAN))
_CREATE_PARTITIONS_RESPONSE = Struct(_THROTTLE, ("results", Array(Struct(
    ("name", STRING), ("error_code", INT16), ("error_message", NULLABLE_STRING)))))

#: ``{(api key, version): (request, response)}``, registered by :mod:`kafka_ha.protocol.api`.
TOPIC_ADMIN_SCHEMAS: dict[tuple[int, int], tuple[Struct, Struct]] = {
    (CREATE_TOPICS, 0): (_CREATE_TOPICS_V0, Struct(("topics", Array(_CREATED_V0)))),
    (CREATE_TOPICS, 1): (_CREATE_TOPICS_V1, Struct(("topics", Array(_CREATED_V1)))),
    **{(CREATE_TOPICS, v): (_CREATE_TOPICS_V1, Struct(_THROTTLE, ("topics", Array(_CREATED_V1))))
       for v in (2, 3)},
    (DELETE_TOPICS, 0): (_DELETE_TOPICS, Struct(_DELETED)),
    **{(DELETE_TOPICS, v): (_DELETE_TOPICS, Struct(_THROTTLE, _DELETED)) for v in (1, 2, 3)},
    **{(CREATE_PARTITIONS, v): (_CREATE_PARTITIONS, _CREATE_PARTITIONS_RESPONSE) for v in (0, 1)},
}
