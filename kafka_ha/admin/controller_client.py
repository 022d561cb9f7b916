"""The admin tools' ``--bootstrap-server`` path: requests to the controller over the protocol.

Metadata names the controller; a NOT_CONTROLLER answer (it moved), a lost
connection to it, or no controller known yet refreshes it and retries until the
deadline, as Kafka's AdminClient does.  The topic tools' client
(:mod:`.topic_admin_client`) builds on this one.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import gevent

from kafka_ha.client.cluster import ClusterMetadata
from kafka_ha.client.errors import KafkaConnectionError, KafkaError
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode

RETRY_BACKOFF_S = 0.2


def top_level_not_controller(answer: dict[str, Any]) -> bool:
    """A refusal in the answer's own error code (ElectLeaders v1+, the KIP-455 requests)."""
    return answer.get("error_code") == ErrorCode.NOT_CONTROLLER


class ControllerClient:
    def __init__(self, bootstrap_servers: str, timeout_s: float = 30.0,
                 client_id: str = "kafka-ha-admin") -> None:
        self.cluster = ClusterMetadata(bootstrap_servers, client_id=client_id,
                                       request_timeout_ms=int(timeout_s * 1000))
        self.timeout_s = timeout_s

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cluster.close()

    def request(self, api_key: int, version: int, body: dict[str, Any],
                refused: Callable[[dict[str, Any]], bool] = top_level_not_controller) -> dict[str, Any]:
        """The controller's answer; KafkaError if none answers before the deadline.
        ``refused(answer)``: whether the answer says "not the controller"."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            controller = self.cluster.refresh([]).controller_id
            if controller >= 0:
                try:
                    answer = self.cluster.request(controller, api_key, version, body)
                    if not refused(answer):
                        return answer
                except KafkaConnectionError:
                    pass   # the controller went away: ask Metadata for the next one
            if time.monotonic() + RETRY_BACKOFF_S >= deadline:
                raise KafkaError(ErrorCode.NOT_CONTROLLER,
                                 f"no controller answered within {self.timeout_s:g} s")
            gevent.sleep(RETRY_BACKOFF_S)

    def assignments(self, topics: list[str] | None) -> dict[TopicPartition, tuple[int, ...]]:
        """The replicas of every partition of ``topics`` (None: of all topics), from Metadata."""
        snapshot = self.cluster.refresh(topics)
        return {TopicPartition(t.name, p): pm.replicas
                for t in snapshot.topics.values()
                if t.error_code == ErrorCode.NONE and (topics is None or t.name in topics)
                for p, pm in sorted(t.partitions.items())}
