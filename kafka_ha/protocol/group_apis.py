"""Request and response layouts of the group APIs (8-16, and DeleteGroups, 42),
the versions a Kafka 2.1 broker offers.

Field names follow Kafka's ``common/message/*.json`` in snake_case.  From the
second or third version of each API on, the only change is a leading
``throttle_time_ms`` in the response (KIP-219 later changed what throttling
means, not the layout), so most versions share one struct.  None of these
versions is flexible.

``GROUP_SCHEMAS`` maps ``(api_key, version)`` to ``(request, response)``;
``protocol/api.py`` merges it into its tables.
"""
from __future__ import annotations

from kafka_ha.protocol.schema import (
    BYTES, INT8, INT16, INT32, INT64, NULLABLE_STRING, STRING, Array, Struct)

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 11, 12, 13, 14, 15, 16
DELETE_GROUPS = 42

GROUP_SCHEMAS: dict[tuple[int, int], tuple[Struct, Struct]] = {}
_THROTTLE = ("throttle_time_ms", INT32)
_ERROR = ("error_code", INT16)


def _define(key: int, versions: range, request: Struct, response: Struct) -> None:
    for version in versions:
        GROUP_SCHEMAS[(key, version)] = (request, response)


def _throttled(response: Struct) -> Struct:
    return Struct(_THROTTLE, *response.fields)


# -- FindCoordinator (10): v1 adds key_type (0 group, 1 transaction) and an error message.
_define(FIND_COORDINATOR, range(0, 1), Struct(("key", STRING)), Struct(
    _ERROR, ("node_id", INT32), ("host", STRING), ("port", INT32)))
_define(FIND_COORDINATOR, range(1, 3), Struct(("key", STRING), ("key_type", INT8)), Struct(
    _THROTTLE, _ERROR, ("error_message", NULLABLE_STRING),
    ("node_id", INT32), ("host", STRING), ("port", INT32)))

# -- JoinGroup (11): v1 adds the rebalance timeout, v2 the throttle time.
_PROTOCOLS = ("protocols", Array(Struct(("name", STRING), ("metadata", BYTES))))
_JOIN_V0 = Struct(("group_id", STRING), ("session_timeout_ms", INT32), ("member_id", STRING),
                  ("protocol_type", STRING), _PROTOCOLS)
_JOIN_V1 = Struct(("group_id", STRING), ("session_timeout_ms", INT32),
                  ("rebalance_timeout_ms", INT32), ("member_id", STRING),
                  ("protocol_type", STRING), _PROTOCOLS)
_JOINED = Struct(_ERROR, ("generation_id", INT32), ("protocol_name", STRING),
                 ("leader", STRING), ("member_id", STRING),
                 ("members", Array(Struct(("member_id", STRING), ("metadata", BYTES)))))
_define(JOIN_GROUP, range(0, 1), _JOIN_V0, _JOINED)
_define(JOIN_GROUP, range(1, 2), _JOIN_V1, _JOINED)
_define(JOIN_GROUP, range(2, 4), _JOIN_V1, _throttled(_JOINED))

# -- Heartbeat (12), LeaveGroup (13), SyncGroup (14): v1 adds the throttle time.
_HEARTBEAT = Struct(("group_id", STRING), ("generation_id", INT32), ("member_id", STRING))
_LEAVE = Struct(("group_id", STRING), ("member_id", STRING))
_SYNC = Struct(("group_id", STRING), ("generation_id", INT32), ("member_id", STRING),
               ("assignments", Array(Struct(("member_id", STRING), ("assignment", BYTES)))))
_SYNCED = Struct(_ERROR, ("assignment", BYTES))
_ERROR_ONLY = Struct(_ERROR)
for _key, _request, _response in ((HEARTBEAT, _HEARTBEAT, _ERROR_ONLY),
                                  (LEAVE_GROUP, _LEAVE, _ERROR_ONLY),
                                  (SYNC_GROUP, _SYNC, _SYNCED)):
    _define(_key, range(0, 1), _request, _response)
    _define(_key, range(1, 3), _request, _throttled(_response))

# -- DescribeGroups (15), ListGroups (16): v1 adds the throttle time.
_DESCRIBED = Struct(("groups", Array(Struct(
    _ERROR, ("group_id", STRING), ("group_state", STRING), ("protocol_type", STRING),
    ("protocol_data", STRING), ("members", Array(Struct(
        ("member_id", STRING), ("client_id", STRING), ("client_host", STRING),
        ("member_metadata", BYTES), ("member_assignment", BYTES))))))))
_LISTED = Struct(_ERROR, ("groups", Array(Struct(("group_id", STRING), ("protocol_type", STRING)))))
for _key, _request, _response in ((DESCRIBE_GROUPS, Struct(("groups", Array(STRING))), _DESCRIBED),
                                  (LIST_GROUPS, Struct(), _LISTED)):
    _define(_key, range(0, 1), _request, _response)
    _define(_key, range(1, 3), _request, _throttled(_response))

# -- OffsetCommit (8): v1 adds the generation, member and a per-partition
# timestamp; v2 replaces that timestamp by a request-wide retention time; v3
# adds the throttle time; v4 is v3; v5 (KIP-211) drops the retention time (the
# broker's offsets.retention.minutes, counted from when the group empties); v6
# (KIP-320) adds each partition's committed_leader_epoch.


def _offset_commit_request(version: int) -> Struct:
    partition = [("partition_index", INT32), ("committed_offset", INT64)]
    if version == 1:
        partition.append(("commit_timestamp", INT64))
    if version >= 6:
        partition.append(("committed_leader_epoch", INT32))
    partition.append(("committed_metadata", NULLABLE_STRING))
    fields = [("group_id", STRING)]
    if version >= 1:
        fields += [("generation_id", INT32), ("member_id", STRING)]
    if 2 <= version <= 4:
        fields.append(("retention_time_ms", INT64))
    fields.append(("topics", Array(Struct(("name", STRING),
                                          ("partitions", Array(Struct(*partition)))))))
    return Struct(*fields)


_COMMITTED = Struct(("topics", Array(Struct(("name", STRING), ("partitions", Array(Struct(
    ("partition_index", INT32), _ERROR)))))))
for _v in range(0, 7):
    _define(OFFSET_COMMIT, range(_v, _v + 1), _offset_commit_request(_v),
            _COMMITTED if _v < 3 else _throttled(_COMMITTED))

# -- OffsetFetch (9): v0 reads ZooKeeper, v1 the offsets topic (same layout);
# v2 lets topics be null (all of the group's offsets) and adds a top-level
# error; v3 adds the throttle time; v4 is v3; v5 (KIP-320) answers each
# partition's committed_leader_epoch.


def _offset_fetch_response(version: int) -> Struct:
    partition = [("partition_index", INT32), ("committed_offset", INT64)]
    if version >= 5:
        partition.append(("committed_leader_epoch", INT32))
    partition += [("metadata", NULLABLE_STRING), _ERROR]
    fields = [("topics", Array(Struct(("name", STRING), ("partitions", Array(Struct(*partition))))))]
    if version >= 2:
        fields.append(_ERROR)
    if version >= 3:
        fields.insert(0, _THROTTLE)
    return Struct(*fields)


def _offset_fetch_request(nullable: bool) -> Struct:
    return Struct(("group_id", STRING), ("topics", Array(Struct(
        ("name", STRING), ("partition_indexes", Array(INT32))), nullable=nullable)))


for _v in range(0, 6):
    _define(OFFSET_FETCH, range(_v, _v + 1), _offset_fetch_request(_v >= 2),
            _offset_fetch_response(_v))

# -- DeleteGroups (42, Kafka 1.1+, KIP-229): v1 is v0 (only throttling changed).
_define(DELETE_GROUPS, range(0, 2), Struct(("groups_names", Array(STRING))), Struct(
    _THROTTLE, ("results", Array(Struct(("group_id", STRING), _ERROR)))))
del _v, _key, _request, _response
