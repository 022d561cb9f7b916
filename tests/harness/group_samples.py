"""Sample bodies of the group APIs (protocol/group_apis.py) for the round-trip tests."""
from kafka_ha.protocol.api import ApiKey as K

THROTTLE = {"throttle_time_ms": 0}
_PROTOCOLS = [{"name": "range", "metadata": b"\x00\x01"}, {"name": "roundrobin", "metadata": b""}]
_JOINED = {"error_code": 0, "generation_id": 3, "protocol_name": "range", "leader": "m-1",
           "member_id": "m-2", "members": [{"member_id": "m-1", "metadata": b"\x00\x01"}]}
_DESCRIBED = {"groups": [{"error_code": 0, "group_id": "g1", "group_state": "Stable",
                          "protocol_type": "consumer", "protocol_data": "range", "members": [
                              {"member_id": "m-1", "client_id": "c", "client_host": "/127.0.0.1",
                               "member_metadata": b"\x00", "member_assignment": b"\x01"}]}]}
_LISTED = {"error_code": 0, "groups": [{"group_id": "g1", "protocol_type": "consumer"}]}
_FETCHED = {"topics": [{"name": "orders", "partitions": [
    {"partition_index": 0, "committed_offset": 77, "metadata": "", "error_code": 0}]}]}


def _throttled(body: dict, version: int, first: int) -> dict:
    return {**THROTTLE, **body} if version >= first else body


def _join_request(version: int) -> dict:
    body = {"group_id": "g1", "session_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": _PROTOCOLS}
    return {**body, "rebalance_timeout_ms": 300000} if version >= 1 else body


def _commit_request(version: int) -> dict:
    partition = {"partition_index": 0, "committed_offset": 77, "committed_metadata": "m"}
    if version == 1:
        partition["commit_timestamp"] = -1
    body = {"group_id": "g1", "generation_id": 2, "member_id": "m-1",
            "topics": [{"name": "orders", "partitions": [partition]}]}
    if version >= 6:
        partition["committed_leader_epoch"] = 4
    return {**body, "retention_time_ms": -1} if 2 <= version <= 4 else body


GROUP_REQUESTS = {
    **{(K.FIND_COORDINATOR, v): {"key": "g1", "key_type": 0} for v in (1, 2)},
    **{(K.JOIN_GROUP, v): _join_request(v) for v in range(4)},
    **{(K.SYNC_GROUP, v): {"group_id": "g1", "generation_id": 3, "member_id": "m-1",
                           "assignments": [{"member_id": "m-1", "assignment": b"\x07"}]}
       for v in range(3)},
    **{(K.HEARTBEAT, v): {"group_id": "g1", "generation_id": 3, "member_id": "m-1"}
       for v in range(3)},
    **{(K.LEAVE_GROUP, v): {"group_id": "g1", "member_id": "m-1"} for v in range(3)},
    **{(K.DESCRIBE_GROUPS, v): {"groups": ["g1", "g2"]} for v in range(3)},
    **{(K.LIST_GROUPS, v): {} for v in range(3)},
    **{(K.OFFSET_COMMIT, v): _commit_request(v) for v in (3, 4, 5, 6)},
    **{(K.OFFSET_FETCH, v): {"group_id": "g1", "topics": None} for v in (2, 3, 4, 5)},
    **{(K.DELETE_GROUPS, v): {"groups_names": ["g1", "g2"]} for v in (0, 1)},
}

GROUP_RESPONSES = {
    **{(K.FIND_COORDINATOR, v): {**THROTTLE, "error_code": 0, "error_message": None,
                                 "node_id": 1, "host": "broker1", "port": 9092} for v in (1, 2)},
    **{(K.JOIN_GROUP, v): _throttled(_JOINED, v, 2) for v in range(4)},
    **{(K.SYNC_GROUP, v): _throttled({"error_code": 0, "assignment": b"\x07"}, v, 1)
       for v in range(3)},
    **{(K.HEARTBEAT, v): _throttled({"error_code": 27}, v, 1) for v in range(3)},
    **{(K.LEAVE_GROUP, v): _throttled({"error_code": 0}, v, 1) for v in range(3)},
    **{(K.DESCRIBE_GROUPS, v): _throttled(_DESCRIBED, v, 1) for v in range(3)},
    **{(K.LIST_GROUPS, v): _throttled(_LISTED, v, 1) for v in range(3)},
    **{(K.OFFSET_COMMIT, v): {**THROTTLE, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "error_code": 0}]}]} for v in (3, 4, 5, 6)},
    (K.OFFSET_FETCH, 2): {**_FETCHED, "error_code": 0},
    **{(K.OFFSET_FETCH, v): {**THROTTLE, **_FETCHED, "error_code": 14} for v in (3, 4)},
    (K.OFFSET_FETCH, 5): {**THROTTLE, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "committed_offset": 77, "committed_leader_epoch": 3,
         "metadata": "", "error_code": 0}]}], "error_code": 0},
    **{(K.DELETE_GROUPS, v): {**THROTTLE, "results": [{"group_id": "g1", "error_code": 0},
                                                      {"group_id": "g2", "error_code": 68}]}
       for v in (0, 1)},
}
