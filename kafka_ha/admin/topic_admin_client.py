"""A small Admin API client for the tools: CreateTopics, DeleteTopics and CreatePartitions
sent to the controller, which Metadata names.

Built on the project's client connections (:class:`kafka_ha.client.cluster.ClusterMetadata`).
A request that meets a controller change (NOT_CONTROLLER for every topic, or no
controller known yet) is sent again after a fresh Metadata, as Kafka's AdminClient
does, until ``timeout_s`` runs out.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import gevent

from kafka_ha.client.cluster import ClusterMetadata, MetadataSnapshot
from kafka_ha.client.errors import KafkaConnectionError, KafkaTimeoutError
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode

Result = tuple[int, str | None]
RETRY_BACKOFF_S = 0.2
# The versions we send: the newest each API has here.
CREATE_TOPICS_VERSION, DELETE_TOPICS_VERSION, CREATE_PARTITIONS_VERSION = 3, 3, 1


def creatable_topic(topic: str, partitions: int, replication_factor: int,
                    assignment: Mapping[int, Sequence[int]] | None = None,
                    configs: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A CreateTopics entry; with an ``assignment``, pass -1 for both counts."""
    return {"name": topic, "num_partitions": partitions, "replication_factor": replication_factor,
            "assignments": [{"partition_index": p, "broker_ids": list(b)}
                            for p, b in (assignment or {}).items()],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


class TopicAdminClient:
    def __init__(self, bootstrap_servers: str, timeout_s: float = 30.0,
                 client_id: str = "kafka-topics") -> None:
        self.cluster = ClusterMetadata(bootstrap_servers, client_id=client_id,
                                       request_timeout_ms=int(timeout_s * 1000))
        self.timeout_s = timeout_s

    def __enter__(self) -> TopicAdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cluster.close()

    def metadata(self, topics: Sequence[str] | None = None) -> MetadataSnapshot:
        return self.cluster.refresh(topics)

    def create_topic(self, topic: str, partitions: int, replication_factor: int,
                     assignment: Mapping[int, Sequence[int]] | None,
                     configs: Mapping[str, str], validate_only: bool = False) -> Result:
        entry = creatable_topic(topic, partitions, replication_factor, assignment, configs)
        return self.create_topics([entry], validate_only)[topic]

    def create_topics(self, entries: Sequence[dict[str, Any]],
                      validate_only: bool = False) -> dict[str, Result]:
        """One CreateTopics request for ``entries`` (from :func:`creatable_topic`)."""
        return self._to_controller(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, {
            "topics": list(entries), "timeout_ms": self._timeout_ms(),
            "validate_only": validate_only}, "topics")

    def delete_topics(self, topics: Sequence[str]) -> dict[str, Result]:
        return self._to_controller(ApiKey.DELETE_TOPICS, DELETE_TOPICS_VERSION, {
            "topic_names": list(topics), "timeout_ms": self._timeout_ms()}, "responses")

    def create_partitions(self, topic: str, count: int,
                          assignment: Sequence[Sequence[int]] | None) -> Result:
        entry = {"name": topic, "count": count,
                 "assignments": None if assignment is None
                 else [{"broker_ids": list(b)} for b in assignment]}
        answer = self._to_controller(ApiKey.CREATE_PARTITIONS, CREATE_PARTITIONS_VERSION, {
            "topics": [entry], "timeout_ms": self._timeout_ms(), "validate_only": False}, "results")
        return answer[topic]

    def _timeout_ms(self) -> int:
        return int(self.timeout_s * 1000)

    def _to_controller(self, api_key: ApiKey, version: int, body: dict[str, Any],
                       results_field: str) -> dict[str, Result]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            controller = self.cluster.refresh([]).controller_id
            if controller >= 0:
                try:
                    answer = self.cluster.request(controller, api_key, version, body)
                    results = {r["name"]: (r["error_code"], r.get("error_message"))
                               for r in answer[results_field]}
                    if not results or any(code != ErrorCode.NOT_CONTROLLER
                                          for code, _ in results.values()):
                        return results
                except KafkaConnectionError:
                    pass   # the controller went away: ask Metadata for the next one
            if time.monotonic() + RETRY_BACKOFF_S >= deadline:
                raise KafkaTimeoutError(f"no controller answered within {self.timeout_s:g} s")
            gevent.sleep(RETRY_BACKOFF_S)
