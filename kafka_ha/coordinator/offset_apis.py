"""OffsetCommit and OffsetFetch: v0 in ZooKeeper (the 0.8 layout, ``GroupOffsets``),
v1 and later in ``__consumer_offsets``.

A v1+ commit is checked against the group (generation and member, Kafka 2.0's
rules in ``Group.commit_error``), written as offset records with acks=-1, and
only then applied to what OffsetFetch answers: an answered commit is on every
in-sync replica of the group's offsets partition.
"""
from __future__ import annotations

from typing import Any, Callable

from kafka_ha.clock import monotonic_ms, now_ms
from kafka_ha.coordinator.catalog import GroupCatalog
from kafka_ha.coordinator.group_state import GroupState
from kafka_ha.coordinator.offsets_records import (
    EPOCH_VALUE_VERSION, OFFSET_VALUE_VERSION, OffsetValue, offset_key, offset_value)
from kafka_ha.protocol.errors import ErrorCode

DEFAULT_RETENTION = -1    # OffsetCommit v2+: the broker's offsets.retention.minutes


class OffsetApis:
    def __init__(self, config, catalog: GroupCatalog, zk_offsets: Any,
                 partition_exists: Callable[[str, int], bool]) -> None:
        """``zk_offsets``: ``commit`` and ``fetch`` of the v0 requests (ZooKeeper)."""
        self.config = config
        self.catalog = catalog
        self.zk_offsets = zk_offsets
        self._partition_exists = partition_exists

    # ---- OffsetCommit -----------------------------------------------------------

    def commit(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        if version == 0:
            return self.zk_offsets.commit(request, version)
        group_id = request["group_id"]
        error = self.catalog.status(group_id)   # the empty group id too, as Kafka allows
        generation, member_id = request["generation_id"], request["member_id"]
        if error == ErrorCode.NONE:
            group = self.catalog.group(group_id)
            if group is None:
                # Kafka 2.0: a group unknown here takes only commits outside group management.
                error = ErrorCode.NONE if generation < 0 else ErrorCode.ILLEGAL_GENERATION
            else:
                error = group.commit_error(member_id, generation, monotonic_ms())
        now = now_ms()
        results: dict[tuple[str, int], int] = {}
        records, values = [], {}
        for topic in request["topics"]:
            for part in topic["partitions"]:
                tp = (topic["name"], part["partition_index"])
                results[tp] = error if error != ErrorCode.NONE else self._partition_error(tp, part)
                if results[tp] != ErrorCode.NONE:
                    continue
                value = self._value(request, part, version, now)
                values[tp] = value
                records.append((offset_key(group_id, *tp), offset_value(
                    value, EPOCH_VALUE_VERSION if value.leader_epoch >= 0 else OFFSET_VALUE_VERSION)))
        if records:
            written = self.catalog.write(group_id, records,
                                         self.config["offsets.commit.timeout.ms"] / 1000)
            if written == ErrorCode.NONE and self.catalog.status(group_id) == ErrorCode.NONE:
                group = self.catalog.group(group_id, create=True)
                if group.state != GroupState.DEAD:
                    self.catalog.offsets.setdefault(group_id, {}).update(values)
            for tp in values:
                results[tp] = written
        by_topic: dict[str, list] = {}
        for (topic, partition), code in results.items():
            by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
        return {"throttle_time_ms": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

    def _partition_error(self, tp: tuple[str, int], part: dict[str, Any]) -> int:
        if not self._partition_exists(*tp):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        metadata = part["committed_metadata"] or ""
        if len(metadata.encode()) > self.config["offset.metadata.max.bytes"]:
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        return ErrorCode.NONE

    def _value(self, request: dict[str, Any], part: dict[str, Any], version: int,
               now: int) -> OffsetValue:
        commit_ts = part.get("commit_timestamp", -1)
        if commit_ts < 0:
            commit_ts = now
        retention_ms = request.get("retention_time_ms", DEFAULT_RETENTION)
        if retention_ms < 0:
            retention_ms = self.config["offsets.retention.minutes"] * 60000
        # A committed leader epoch (v6+, KIP-320) goes to the offsets topic as value v3,
        # which has the epoch and no expiry time: as Kafka 2.1 does, such a value
        # expires offsets.retention.minutes after its commit (group_state.expired_offsets).
        return OffsetValue(part["committed_offset"], part["committed_metadata"] or "",
                           commit_ts, commit_ts + retention_ms,
                           part.get("committed_leader_epoch", -1))   # v6+

    # ---- OffsetFetch -----------------------------------------------------------

    def fetch(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        if version == 0:
            return self.zk_offsets.fetch(request, version)
        group_id = request["group_id"]
        error = self.catalog.status(group_id)   # the empty group id too, as Kafka allows
        committed = self.catalog.offsets.get(group_id, {}) if error == ErrorCode.NONE else {}
        if request["topics"] is None:
            wanted = sorted(committed)
        else:
            wanted = [(t["name"], p) for t in request["topics"] for p in t["partition_indexes"]]
        from_zk = self._zookeeper_only(group_id, [tp for tp in wanted if tp not in committed]) \
            if error == ErrorCode.NONE else {}
        by_topic: dict[str, list] = {}
        for topic, partition in wanted:
            value = committed.get((topic, partition))
            entry = {"partition_index": partition, "error_code": ErrorCode.NONE,
                     "committed_offset": from_zk.get((topic, partition), -1), "metadata": "",
                     "committed_leader_epoch": -1}
            if value is not None:
                entry.update(committed_offset=value.offset, metadata=value.metadata,
                             committed_leader_epoch=value.leader_epoch)
            if version < 2 and error != ErrorCode.NONE:
                entry["error_code"] = error   # v1 has no top-level error
            by_topic.setdefault(topic, []).append(entry)
        topics = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
        return {"throttle_time_ms": 0, "topics": topics, "error_code": error}

    def _zookeeper_only(self, group_id: str, missing: list[tuple[str, int]]) -> dict:
        """Offsets ZooKeeper's 0.8 layout has for partitions the offsets topic has none of:
        commits of v0 clients, and of every client before this broker had the offsets
        topic (it stored all versions there), so that an upgrade skips no message.
        (Kafka itself has no such fallback; its 0.8.2 clients committed twice instead.)"""
        if not missing or not group_id:
            return {}
        topics: dict[str, list[int]] = {}
        for topic, partition in missing:
            topics.setdefault(topic, []).append(partition)
        answer = self.zk_offsets.fetch({"group_id": group_id, "topics": [
            {"name": t, "partition_indexes": ps} for t, ps in topics.items()]}, 0)
        return {(t["name"], p["partition_index"]): p["committed_offset"]
                for t in answer["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}

