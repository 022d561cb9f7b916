"""Offset look-ups for the consumer and tools: ListOffsets v1 and group offsets.

``list_offsets`` asks each partition's leader (one request per leader) and
retries leader errors after a metadata refresh; ``commit``/``fetch_committed``
find the group coordinator (FindCoordinator v0) and use OffsetCommit v2 /
OffsetFetch v1 outside any group generation (generation -1, member ""), as
clients using ``assign()`` do.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Iterable

import gevent

from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode

from .cluster import ClusterMetadata
from .errors import COORDINATOR_CODES, KafkaError, KafkaTimeoutError, RetriableError, error_for

log = logging.getLogger(__name__)

LATEST = -1
EARLIEST = -2


def by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """``{topic: [partitions...]}`` in a stable order (request bodies are grouped so)."""
    out: dict[str, list[int]] = {}
    for tp in sorted(tps):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


class OffsetClient:
    def __init__(self, cluster: ClusterMetadata, timeout_s: float = 30.0,
                 retry_backoff_s: float = 0.1) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        self.retry_backoff_s = retry_backoff_s
        self._coordinators: dict[str, tuple[int, str, int]] = {}

    # -- ListOffsets ------------------------------------------------------------------

    def list_offsets(self, tps: Iterable[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """Offset per partition for ``timestamp`` (LATEST = HW, EARLIEST = log start)."""
        pending = set(tps)
        result: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + self.timeout_s
        if any(self.cluster.snapshot.partition(tp) is None for tp in pending):
            self.cluster.refresh({tp.topic for tp in pending})
        while pending:
            last_error = self._list_round(pending, timestamp, result)
            if not pending:
                break
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"offsets of {', '.join(map(str, sorted(pending)))} "
                                        f"not available within {self.timeout_s:g} s: {last_error}")
            gevent.sleep(self.retry_backoff_s)
            self._refresh({tp.topic for tp in pending})
        return result

    def _list_round(self, pending: set[TopicPartition], timestamp: int,
                    result: dict[TopicPartition, int]) -> KafkaError | None:
        """One request per known leader; moves answered partitions from pending to result."""
        last_error: KafkaError | None = None
        snap = self.cluster.snapshot
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in pending:
            leader = snap.leader_for(tp)
            if leader is None:
                last_error = error_for(snap.topic_error(tp.topic) or ErrorCode.LEADER_NOT_AVAILABLE,
                                       f"no leader for {tp}")
                if not last_error.retriable:
                    raise last_error
            else:
                by_leader.setdefault(leader, []).append(tp)
        for leader, group in by_leader.items():
            body = {"replica_id": -1, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp}
                                           for p in ps]} for t, ps in by_topic(group).items()]}
            try:
                response = self.cluster.request(leader, ApiKey.LIST_OFFSETS, 1, body)
            except RetriableError as exc:
                last_error = exc
                continue
            for topic in response["topics"]:
                for part in topic["partitions"]:
                    tp = TopicPartition(topic["name"], part["partition_index"])
                    if part["error_code"] == ErrorCode.NONE:
                        result[tp] = part["offset"]
                        pending.discard(tp)
                        continue
                    last_error = error_for(part["error_code"], f"listing offsets of {tp}")
                    if not last_error.retriable:
                        raise last_error
        return last_error

    def _refresh(self, topics: set[str]) -> None:
        try:
            self.cluster.refresh(topics)
        except KafkaError as exc:
            log.warning("metadata refresh failed (will retry): %s", exc)

    # -- group offsets ------------------------------------------------------------------

    def commit(self, group: str, offsets: dict[TopicPartition, int], metadata: str = "") -> None:
        """OffsetCommit v2 of ``offsets`` for ``group``; raises on any partition error."""
        body = {"group_id": group, "generation_id": -1, "member_id": "", "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": [
                    {"partition_index": p, "committed_offset": offsets[TopicPartition(t, p)],
                     "committed_metadata": metadata} for p in ps]}
                    for t, ps in by_topic(offsets).items()]}
        response = self._coordinator_request(group, ApiKey.OFFSET_COMMIT, 2, body)
        for topic in response["topics"]:
            for part in topic["partitions"]:
                if part["error_code"] != ErrorCode.NONE:
                    tp = TopicPartition(topic["name"], part["partition_index"])
                    raise error_for(part["error_code"], f"committing {tp} for group {group!r}")

    def fetch_committed(self, group: str,
                        tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """OffsetFetch v1; None where the group has no committed offset."""
        body = {"group_id": group, "topics": [{"name": t, "partition_indexes": ps}
                                              for t, ps in by_topic(tps).items()]}
        response = self._coordinator_request(group, ApiKey.OFFSET_FETCH, 1, body)
        result: dict[TopicPartition, int | None] = {}
        for topic in response["topics"]:
            for part in topic["partitions"]:
                tp = TopicPartition(topic["name"], part["partition_index"])
                if part["error_code"] != ErrorCode.NONE:
                    raise error_for(part["error_code"], f"fetching the offset of {tp} for {group!r}")
                offset = part["committed_offset"]
                result[tp] = offset if offset >= 0 else None
        return result

    def _coordinator_request(self, group: str, api_key: int, version: int,
                             body: dict[str, Any]) -> dict[str, Any]:
        """Send to the group's coordinator, rediscovering it on coordinator errors."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                node, host, port = self._coordinator(group)
                response = self.cluster.request_at(node, host, port, api_key, version, body)
                codes = {p["error_code"] for t in response["topics"] for p in t["partitions"]}
                moved = codes & COORDINATOR_CODES
                if not moved:
                    return response
                raise error_for(min(moved), f"coordinator {node} of group {group!r}")
            except RetriableError as exc:
                self._coordinators.pop(group, None)
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(f"group {group!r}: {exc}") from exc
                gevent.sleep(self.retry_backoff_s)

    def _coordinator(self, group: str) -> tuple[int, str, int]:
        found = self._coordinators.get(group)
        if found is None:
            response = self.cluster.request_any(ApiKey.FIND_COORDINATOR, 0, {"key": group})
            if response["error_code"] != ErrorCode.NONE:
                raise error_for(response["error_code"], f"finding the coordinator of {group!r}")
            found = (response["node_id"], response["host"], response["port"])
            self._coordinators[group] = found
        return found
