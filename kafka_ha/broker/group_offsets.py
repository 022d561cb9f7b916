"""OffsetCommit v0 and OffsetFetch v0: offsets kept in ZooKeeper.

The 0.8 layout, ``/consumers/<group>/offsets/<topic>/<partition>`` holding a
bare decimal offset, so ZooKeeper-era tools see the same commits.  Every broker
serves these for every group; later versions go to the group coordinator
(``kafka_ha/coordinator``, offsets in ``__consumer_offsets``).  Commit metadata
is not stored (the 0.8 layout has no place for it).
"""
from __future__ import annotations

import logging
from typing import Any

from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk.admin_znodes import ConsumerOffsetZNode
from kafka_ha.zk.broker_store import BrokerStore
from kafka_ha.zk.errors import MalformedZnode, ZkError, error_text

log = logging.getLogger(__name__)


class GroupOffsets:
    def __init__(self, store: BrokerStore) -> None:
        self.store = store

    def commit(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        group = request["group_id"]
        topics = []
        for topic in request["topics"]:
            parts = []
            for part in topic["partitions"]:
                error = self._commit_one(group, topic["name"], part["partition_index"],
                                         part["committed_offset"])
                parts.append({"partition_index": part["partition_index"], "error_code": error})
            topics.append({"name": topic["name"], "partitions": parts})
        return {"topics": topics}

    def _commit_one(self, group: str, topic: str, partition: int, offset: int) -> int:
        try:
            self.store.commit_offset(group, topic, partition, offset)
        except ZkError as e:
            log.warning("Offset commit to %s failed: %s",
                        ConsumerOffsetZNode.path(group, topic, partition), error_text(e))
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        except ValueError as e:
            log.info("Refusing offset commit for group %r: %s", group, e)
            return ErrorCode.INVALID_REQUEST
        return ErrorCode.NONE

    def fetch(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        group = request["group_id"]
        wanted = [(t["name"], p) for t in request["topics"] for p in t["partition_indexes"]]
        try:
            found = self.store.committed_offsets(group, wanted)
        except (ValueError, ZkError) as e:
            log.warning("Offset fetch for group %r failed: %s", group, error_text(e))
            found = {}
        by_topic: dict[str, list] = {}
        for (topic, partition), committed in found.items():
            offset, error = -1, ErrorCode.NONE
            if isinstance(committed, MalformedZnode):
                log.warning("Ignoring malformed committed offset: %s", committed)
            elif committed is not None:
                offset = committed
            by_topic.setdefault(topic, []).append({"partition_index": partition,
                                                   "committed_offset": offset, "metadata": "",
                                                   "error_code": error})
        return {"topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
