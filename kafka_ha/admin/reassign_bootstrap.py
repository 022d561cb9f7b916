"""kafka-reassign-partitions.sh ``--bootstrap-server``: the KIP-455 requests it sends.

``--execute`` sends AlterPartitionReassignments; ``--verify`` reads the
reassignments in progress from ListPartitionReassignments (the target of each
is its replicas without the ones being removed).  ``--cancel`` sends
AlterPartitionReassignments with a null target (KIP-455).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka_ha.admin.controller_client import ControllerClient
from kafka_ha.client.errors import KafkaError
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey

__all__ = ["ControllerClient", "alter", "in_progress"]
TIMEOUT_MS = 30_000


def alter(client: ControllerClient, targets: Mapping[TopicPartition, Sequence[int] | None]
          ) -> list[tuple[TopicPartition, int, str | None]]:
    """Ask the controller to move ``targets`` (None: cancel); (partition, error code, message)
    for each."""
    topics = [{"name": topic, "partitions": [
        {"partition_index": tp.partition, "replicas": None if replicas is None else list(replicas)}
        for tp, replicas in targets.items() if tp.topic == topic]}
        for topic in dict.fromkeys(tp.topic for tp in targets)]
    answer = client.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0,
                            {"timeout_ms": TIMEOUT_MS, "topics": topics})
    if answer["error_code"]:
        return [(tp, answer["error_code"], answer["error_message"]) for tp in targets]
    return [(TopicPartition(t["name"], p["partition_index"]), p["error_code"], p["error_message"])
            for t in answer["responses"] for p in t["partitions"]]


def in_progress(client: ControllerClient) -> dict[TopicPartition, tuple[int, ...]]:
    """Every reassignment in progress, partition -> target replicas."""
    answer = client.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                            {"timeout_ms": TIMEOUT_MS, "topics": None})
    if answer["error_code"]:
        raise KafkaError(answer["error_code"], answer["error_message"] or "")
    return {TopicPartition(t["name"], p["partition_index"]):
            tuple(r for r in p["replicas"] if r not in p["removing_replicas"])
            for t in answer["topics"] for p in t["partitions"]}
