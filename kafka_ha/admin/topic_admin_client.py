"""A small Admin API client for the tools: CreateTopics, DeleteTopics and CreatePartitions
sent to the controller, which Metadata names.

Built on :class:`.controller_client.ControllerClient`: a request that meets a
controller change (NOT_CONTROLLER for every topic, or no controller known yet) is
sent again after a fresh Metadata, as Kafka's AdminClient does, until
``timeout_s`` runs out.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka_ha.admin.controller_client import ControllerClient
from kafka_ha.client.cluster import MetadataSnapshot
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode

Result = tuple[int, str | None]
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


class TopicAdminClient(ControllerClient):
    def __init__(self, bootstrap_servers: str, timeout_s: float = 30.0,
                 client_id: str = "kafka-topics") -> None:
        super().__init__(bootstrap_servers, timeout_s, client_id)

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
        def results(answer: dict[str, Any]) -> dict[str, Result]:
            return {r["name"]: (r["error_code"], r.get("error_message")) for r in answer[results_field]}

        def refused(answer: dict[str, Any]) -> bool:
            # These requests refuse per topic: every topic NOT_CONTROLLER.
            codes = [code for code, _ in results(answer).values()]
            return bool(codes) and all(code == ErrorCode.NOT_CONTROLLER for code in codes)
        return results(self.request(api_key, version, body, refused))
