"""One realistic sample body per CreateTopics, DeleteTopics and CreatePartitions schema."""
from __future__ import annotations

from kafka_ha.protocol.api import ApiKey as K
from kafka_ha.protocol.errors import ErrorCode


def _create_topics_request(version: int) -> dict:
    body = {"topics": [
        {"name": "orders", "num_partitions": 3, "replication_factor": 2, "assignments": [],
         "configs": [{"name": "retention.ms", "value": "60000"}]},
        {"name": "placed", "num_partitions": -1, "replication_factor": -1,
         "assignments": [{"partition_index": 0, "broker_ids": [2, 3]}], "configs": []}],
        "timeout_ms": 30000}
    if version >= 1:
        body["validate_only"] = False
    return body


def _create_topics_response(version: int) -> dict:
    topics = [{"name": "orders", "error_code": 0},
              {"name": "placed", "error_code": ErrorCode.TOPIC_ALREADY_EXISTS}]
    if version >= 1:
        topics[0]["error_message"] = None
        topics[1]["error_message"] = "Topic 'placed' already exists."
    return {"throttle_time_ms": 0, "topics": topics} if version >= 2 else {"topics": topics}


def _delete_topics_response(version: int) -> dict:
    responses = [{"name": "orders", "error_code": 0},
                 {"name": "gone", "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}]
    return {"throttle_time_ms": 0, "responses": responses} if version >= 1 else {"responses": responses}


TOPIC_ADMIN_REQUESTS = {
    **{(K.CREATE_TOPICS, v): _create_topics_request(v) for v in range(4)},
    **{(K.DELETE_TOPICS, v): {"topic_names": ["orders", "gone"], "timeout_ms": 30000}
       for v in range(4)},
    **{(K.CREATE_PARTITIONS, v): {"topics": [
        {"name": "orders", "count": 6, "assignments": None},
        {"name": "placed", "count": 2, "assignments": [{"broker_ids": [3, 1]}]}],
        "timeout_ms": 30000, "validate_only": True} for v in range(2)},
}

TOPIC_ADMIN_RESPONSES = {
    **{(K.CREATE_TOPICS, v): _create_topics_response(v) for v in range(4)},
    **{(K.DELETE_TOPICS, v): _delete_topics_response(v) for v in range(4)},
    **{(K.CREATE_PARTITIONS, v): {"throttle_time_ms": 0, "results": [
        {"name": "orders", "error_code": 0, "error_message": None},
        {"name": "placed", "error_code": ErrorCode.INVALID_PARTITIONS,
         "error_message": "Topic already has 2 partitions."}]} for v in range(2)},
}
