"""Layouts of ElectLeaders (43) and the KIP-455 reassignment APIs (45, 46).

Field for field as in Kafka's ``ElectLeaders*.json``,
``AlterPartitionReassignments*.json`` and ``ListPartitionReassignments*.json``:

- ElectLeaders v0 names partitions (a null list: all of them) and a timeout; v1
  puts an ``election_type`` (0 preferred, 1 unclean) first and adds a top-level
  error to the response; v2 is v1 made flexible.
- Alter/ListPartitionReassignments exist only as flexible v0.  In Alter, null
  replicas cancel a partition's reassignment; in List, null topics mean every
  reassignment in progress.

``ADMIN_ELECTION_SCHEMAS`` maps each key to (versions, first flexible version,
request-of-version, response-of-version); ``api.py`` registers them.
"""
from __future__ import annotations

from kafka_ha.protocol.schema import (
    COMPACT_NULLABLE_STRING, COMPACT_STRING, INT8, INT16, INT32, NULLABLE_STRING, STRING,
    Array, CompactArray, Struct)

ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 43, 45, 46


def _layout(flexible: bool):
    """(string, nullable string, array-of) for one encoding generation."""
    if flexible:
        return COMPACT_STRING, COMPACT_NULLABLE_STRING, CompactArray
    return STRING, NULLABLE_STRING, Array


def elect_leaders_request(version: int) -> Struct:
    flexible = version >= 2
    string, _, array = _layout(flexible)
    topics = ("topic_partitions", array(Struct(
        ("topic", string), ("partitions", array(INT32)), tagged=flexible), nullable=True))
    fields = [topics, ("timeout_ms", INT32)]
    if version >= 1:
        fields.insert(0, ("election_type", INT8))
    return Struct(*fields, tagged=flexible)


def elect_leaders_response(version: int) -> Struct:
    flexible = version >= 2
    string, nullable_string, array = _layout(flexible)
    partition = Struct(("partition_id", INT32), ("error_code", INT16),
                       ("error_message", nullable_string), tagged=flexible)
    results = ("replica_election_results", array(Struct(
        ("topic", string), ("partition_result", array(partition)), tagged=flexible)))
    fields = [("throttle_time_ms", INT32), results]
    if version >= 1:
        fields.insert(1, ("error_code", INT16))
    return Struct(*fields, tagged=flexible)


_TOP_LEVEL = (("throttle_time_ms", INT32), ("error_code", INT16),
              ("error_message", COMPACT_NULLABLE_STRING))


def alter_reassignments_request(_version: int) -> Struct:
    partition = Struct(("partition_index", INT32),
                       ("replicas", CompactArray(INT32, nullable=True)), tagged=True)
    return Struct(("timeout_ms", INT32), ("topics", CompactArray(Struct(
        ("name", COMPACT_STRING), ("partitions", CompactArray(partition)), tagged=True))),
        tagged=True)


def alter_reassignments_response(_version: int) -> Struct:
    partition = Struct(("partition_index", INT32), ("error_code", INT16),
                       ("error_message", COMPACT_NULLABLE_STRING), tagged=True)
    return Struct(*_TOP_LEVEL, ("responses", CompactArray(Struct(
        ("name", COMPACT_STRING), ("partitions", CompactArray(partition)), tagged=True))),
        tagged=True)


def list_reassignments_request(_version: int) -> Struct:
    return Struct(("timeout_ms", INT32), ("topics", CompactArray(Struct(
        ("name", COMPACT_STRING), ("partition_indexes", CompactArray(INT32)), tagged=True),
        nullable=True)), tagged=True)


def list_reassignments_response(_version: int) -> Struct:
    partition = Struct(("partition_index", INT32), ("replicas", CompactArray(INT32)),
                       ("adding_replicas", CompactArray(INT32)),
                       ("removing_replicas", CompactArray(INT32)), tagged=True)
    return Struct(*_TOP_LEVEL, ("topics", CompactArray(Struct(
        ("name", COMPACT_STRING), ("partitions", CompactArray(partition)), tagged=True))),
        tagged=True)


ADMIN_ELECTION_SCHEMAS = {
    ELECT_LEADERS: (range(0, 3), 2, elect_leaders_request, elect_leaders_response),
    ALTER_PARTITION_REASSIGNMENTS: (range(0, 1), 0, alter_reassignments_request,
                                    alter_reassignments_response),
    LIST_PARTITION_REASSIGNMENTS: (range(0, 1), 0, list_reassignments_request,
                                   list_reassignments_response),
}
