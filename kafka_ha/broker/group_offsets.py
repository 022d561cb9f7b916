"""FindCoordinator, OffsetCommit and OffsetFetch with offsets kept in ZooKeeper.

The 0.8 layout, ``/consumers/<group>/offsets/<topic>/<partition>`` holding a
bare decimal offset, so ZooKeeper-era tools see the same commits.  Every
broker can serve every group, so a broker names itself coordinator.
Commit metadata is not stored (the 0.8 layout has no place for it).
"""
from __future__ import annotations

import logging
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from kafka_ha.model import BrokerEndpoint
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk import admin_znodes as azn
from kafka_ha.zk.errors import MalformedZnode, error_text
from kafka_ha.zk.multi_read import get_many

log = logging.getLogger(__name__)


class GroupOffsets:
    def __init__(self, zk: KazooClient, me: BrokerEndpoint) -> None:
        self.zk = zk
        self.me = me

    def find_coordinator(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        return {"error_code": ErrorCode.NONE, "node_id": self.me.broker_id, "host": self.me.host,
                "port": self.me.port}

    def commit(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        group = request["group_id"]
        topics = []
        for topic in request["topics"]:
            parts = []
            for part in topic["partitions"]:
                error = self._store(group, topic["name"], part["partition_index"],
                                    part["committed_offset"])
                parts.append({"partition_index": part["partition_index"], "error_code": error})
            topics.append({"name": topic["name"], "partitions": parts})
        return {"topics": topics}

    def _store(self, group: str, topic: str, partition: int, offset: int) -> int:
        try:
            path = azn.ConsumerOffsetZNode.path(group, topic, partition)
            data = azn.ConsumerOffsetZNode.encode(offset)
        except ValueError as e:
            log.info("Refusing offset commit for group %r: %s", group, e)
            return ErrorCode.INVALID_REQUEST
        try:
            try:
                self.zk.set(path, data)
            except NoNodeError:
                self.zk.create(path, data, makepath=True)
        except KazooException as e:
            log.warning("Offset commit to %s failed: %s", path, error_text(e))
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    def fetch(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        group = request["group_id"]
        wanted = [(t["name"], p) for t in request["topics"] for p in t["partition_indexes"]]
        try:
            paths = {azn.ConsumerOffsetZNode.path(group, t, p): (t, p) for t, p in wanted}
            found = get_many(self.zk, paths)
        except (ValueError, KazooException) as e:
            log.warning("Offset fetch for group %r failed: %s", group, error_text(e))
            found, paths = {}, {}
        by_topic: dict[str, list] = {}
        for path, (topic, partition) in paths.items():
            offset, error = -1, ErrorCode.NONE
            got = found.get(path)
            if got is not None:
                try:
                    offset = azn.ConsumerOffsetZNode.decode(got[0], path)
                except MalformedZnode as e:
                    log.warning("Ignoring malformed committed offset: %s", e)
            by_topic.setdefault(topic, []).append({"partition_index": partition,
                                                   "committed_offset": offset, "metadata": "",
                                                   "error_code": error})
        return {"topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
