"""The Admin API's topic requests, decided without side effects: what each entry asks
for, which error code a refusal gets, and the response each version carries.

:mod:`.topic_admin_apis` does the ZooKeeper writes and the waiting; everything here
is a pure function of the request and what the controller read, so that unit tests
cover Kafka's rules without a cluster.  The checks themselves are the ZooKeeper
scripts' (:mod:`kafka_ha.admin.topic_plans`); this module only adds what belongs to
the wire format (-1 counts, null config values, a topic named twice).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from kafka_ha.admin.assignment import (
    InvalidPartitions, InvalidReplicaAssignment, InvalidReplicationFactor)
from kafka_ha.admin.topic_plans import InvalidTopicName
from kafka_ha.config import ConfigError
from kafka_ha.protocol.errors import ErrorCode

NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."
Result = tuple[int, str | None]     # (error code, error message)
NO_ERROR: Result = (ErrorCode.NONE, None)


class InvalidRequest(ValueError):
    """The entry breaks the request format's rules (INVALID_REQUEST)."""


class TopicExists(ValueError):
    """TOPIC_ALREADY_EXISTS, also for a topic still being deleted (as Kafka answers)."""


class UnknownTopic(ValueError):
    pass


_CODES = ((InvalidRequest, ErrorCode.INVALID_REQUEST),
          (TopicExists, ErrorCode.TOPIC_ALREADY_EXISTS),
          (UnknownTopic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
          (InvalidTopicName, ErrorCode.INVALID_TOPIC_EXCEPTION),
          (InvalidPartitions, ErrorCode.INVALID_PARTITIONS),
          (InvalidReplicationFactor, ErrorCode.INVALID_REPLICATION_FACTOR),
          (InvalidReplicaAssignment, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
          (ConfigError, ErrorCode.INVALID_CONFIG))


def refusal(error: Exception) -> Result:
    """Kafka's error code and message for a refused entry; anything unforeseen is
    UNKNOWN_SERVER_ERROR, so the broker answers instead of failing.

    >>> refusal(InvalidReplicationFactor("replication factor: 4 larger than available brokers: 3"))
    (<ErrorCode.INVALID_REPLICATION_FACTOR: 38>, 'replication factor: 4 larger than available brokers: 3')
    >>> refusal(KeyError("x"))[0]
    <ErrorCode.UNKNOWN_SERVER_ERROR: -1>
    """
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code, str(error)
    return ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(error).__name__}: {error}"


def named_twice(names: Iterable[str]) -> set[str]:
    """Topics a request names more than once: Kafka refuses each such entry.

    >>> sorted(named_twice(["a", "b", "a"]))
    ['a']
    """
    return {name for name, n in Counter(names).items() if n > 1}


def creation_request(entry: dict[str, Any]) -> tuple[int | None, int | None,
                                                    dict[int, tuple[int, ...]] | None,
                                                    dict[str, str]]:
    """(partitions, replication factor, explicit assignment, configs) of a CreateTopics entry.

    Up to v3 an explicit assignment comes with -1 for both counts, and without one
    both must be given (v4's "broker default" is not served).  Kafka 2.x refuses
    counts next to an assignment; we accept counts that agree with it, because
    kafka-python 3 sends them to brokers it takes for older than 2.4, and refuse
    only counts that contradict it.

    >>> creation_request({"num_partitions": -1, "replication_factor": -1, "configs": [],
    ...     "assignments": [{"partition_index": 1, "broker_ids": [2]},
    ...                     {"partition_index": 0, "broker_ids": [1]}]})
    (None, None, {0: (1,), 1: (2,)}, {})
    >>> creation_request({"num_partitions": 1, "replication_factor": 1, "configs": [],
    ...     "assignments": [{"partition_index": 0, "broker_ids": [1]}]})
    (None, None, {0: (1,)}, {})
    >>> creation_request({"num_partitions": 3, "replication_factor": 1, "configs": [],
    ...     "assignments": [{"partition_index": 0, "broker_ids": [1]}]})
    Traceback (most recent call last):
    ...
    kafka_ha.broker.topic_admin_decisions.InvalidRequest: Both numPartitions or replicationFactor \
and replicasAssignments were set, and they disagree: 3 partitions of 1 replicas, but the \
assignment has 1 partitions of 1
    >>> creation_request({"num_partitions": 2, "replication_factor": 1, "assignments": [],
    ...     "configs": [{"name": "retention.ms", "value": None}]})
    Traceback (most recent call last):
    ...
    kafka_ha.broker.topic_admin_decisions.InvalidRequest: Null value not supported for topic configs : retention.ms
    """
    nulls = [c["name"] for c in entry["configs"] if c["value"] is None]
    if nulls:
        raise InvalidRequest("Null value not supported for topic configs : " + ",".join(nulls))
    configs = {c["name"]: c["value"] for c in entry["configs"]}
    if entry["assignments"]:
        assignment: dict[int, tuple[int, ...]] = {}
        for a in entry["assignments"]:
            if a["partition_index"] in assignment:
                raise InvalidReplicaAssignment(f"Partition {a['partition_index']} is assigned twice")
            assignment[a["partition_index"]] = tuple(a["broker_ids"])
        partitions, rf = entry["num_partitions"], entry["replication_factor"]
        first_rf = len(entry["assignments"][0]["broker_ids"])
        if (partitions, rf) != (-1, -1) and (partitions, rf) != (len(assignment), first_rf):
            raise InvalidRequest(f"Both numPartitions or replicationFactor and replicasAssignments "
                                 f"were set, and they disagree: {partitions} partitions of {rf} "
                                 f"replicas, but the assignment has {len(assignment)} partitions "
                                 f"of {first_rf}")
        return None, None, dict(sorted(assignment.items())), configs
    return entry["num_partitions"], entry["replication_factor"], None, configs


def deletion_refusal(delete_enabled: bool, version: int) -> Result | None:
    """The answer for every topic when ``delete.topic.enable`` is off: Kafka says
    TOPIC_DELETION_DISABLED from v3 on, INVALID_REQUEST before.

    >>> deletion_refusal(True, 3) is None, deletion_refusal(False, 3)[0].name, deletion_refusal(False, 2)[0].name
    (True, 'TOPIC_DELETION_DISABLED', 'INVALID_REQUEST')
    """
    if delete_enabled:
        return None
    code = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
    return code, "Topic deletion is disabled."


def create_topics_response(results: dict[str, Result], version: int) -> dict[str, Any]:
    """v0 has no error messages (the encoder drops them); v2+ carries the throttle time."""
    topics = [{"name": name, "error_code": code, "error_message": message}
              for name, (code, message) in results.items()]
    return {"throttle_time_ms": 0, "topics": topics}


def delete_topics_response(results: dict[str, Result], version: int) -> dict[str, Any]:
    return {"throttle_time_ms": 0,
            "responses": [{"name": name, "error_code": code} for name, (code, _) in results.items()]}


def create_partitions_response(results: dict[str, Result], version: int) -> dict[str, Any]:
    return {"throttle_time_ms": 0,
            "results": [{"name": name, "error_code": code, "error_message": message}
                        for name, (code, message) in results.items()]}
