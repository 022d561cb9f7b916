"""What a broker knows of the cluster, from the controller's UpdateMetadata requests.

Serves Metadata requests as Kafka 2.1's ``MetadataCache`` does: a dead leader gives
LEADER_NOT_AVAILABLE with leader -1 and an empty ISR.  Metadata v0 lists only live
replicas and ISR members and flags a partition missing one REPLICA_NOT_AVAILABLE (0.8.2's
answer); v1 and later list every assigned replica and ISR member, dead ones by id, so a
client sees the replication factor and the under-replication as they are (and v5+ names
the dead ones again in ``offline_replicas``).

A partition announced with leader -2 (its topic is being deleted) leaves the
metadata and is remembered as being deleted until the controller publishes it
again, which it does only for a topic created anew under the same name.
"""
from __future__ import annotations

import logging
from typing import Any

from gevent.event import Event

from kafka_ha.model import LEADER_DURING_DELETE, BrokerEndpoint, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import EncodedOnce
from kafka_ha.protocol.partition_states import from_wire
from kafka_ha.state_change_log import LOGGER_NAME

state_change = logging.getLogger(LOGGER_NAME)
# Whole answers kept encoded per UpdateMetadata; clients asking for ever new topic lists
# get theirs encoded each time past this many.
ENCODED_ANSWERS = 32


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.controller_id = -1
        self.controller_epoch = 0
        self.cluster_id: str | None = None   # /cluster/id, read at start-up (Metadata v2+)
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.racks: dict[int, str | None] = {}
        self.partitions: dict[str, dict[int, PartitionStateInfo]] = {}
        # Each topic's answer, built at most once per UpdateMetadata and Metadata flavour
        # (v0 lists live replicas only): clients in a failover ask for every partition again
        # and again, and building a 10k-partition answer per request took seconds of the loop.
        self._answers: dict[tuple[str, bool], dict[str, Any]] = {}
        self._encoded: dict[tuple, EncodedOnce] = {}
        self._being_deleted: set[TopicPartition] = set()
        self._updated = Event()   # set (and replaced) by each accepted UpdateMetadata

    def update(self, request: dict[str, Any], version: int, correlation_id: int) -> dict[str, Any]:
        controller, epoch = request["controller_id"], request["controller_epoch"]
        if epoch < self.controller_epoch:
            state_change.warning("Broker %d ignoring UpdateMetadata request correlation id %d from "
                                 "controller %d with epoch %d; latest known controller epoch is %d",
                                 self.broker_id, correlation_id, controller, epoch,
                                 self.controller_epoch)
            return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH}
        self.controller_id, self.controller_epoch = controller, epoch
        self._answers, self._encoded = {}, {}
        self.brokers = {b["id"]: _endpoint(b, version) for b in request["live_brokers"]}
        self.racks = {b["id"]: b.get("rack") for b in request["live_brokers"]}   # v2+
        for entry in request["partition_states"]:
            s = from_wire(entry)
            if s.leader == LEADER_DURING_DELETE:
                self._being_deleted.add(s.tp)
                self.partitions.get(s.tp.topic, {}).pop(s.tp.partition, None)
                if not self.partitions.get(s.tp.topic):
                    self.partitions.pop(s.tp.topic, None)
            else:
                self._being_deleted.discard(s.tp)
                self.partitions.setdefault(s.tp.topic, {})[s.tp.partition] = s
        state_change.debug("Broker %d cached UpdateMetadata correlation id %d from controller %d "
                           "epoch %d: %d partitions, live brokers %s", self.broker_id,
                           correlation_id, controller, epoch, len(request["partition_states"]),
                           sorted(self.brokers))
        updated, self._updated = self._updated, Event()
        updated.set()
        return {"error_code": ErrorCode.NONE}

    def knows(self, tp: TopicPartition) -> bool:
        """Whether the controller's latest metadata has this partition."""
        return tp.partition in self.partitions.get(tp.topic, ())

    def wait_for_update(self, timeout_s: float) -> None:
        """Return at the next accepted UpdateMetadata, or after ``timeout_s``: admin requests
        that wait for their topics to show (broker/topic_admin_apis.py) wake at once."""
        self._updated.wait(timeout_s)

    def being_deleted(self, tp: TopicPartition) -> bool:
        """Announced with leader -2 and not published again since."""
        return tp in self._being_deleted

    def partition(self, tp: TopicPartition) -> PartitionStateInfo | None:
        return self.partitions.get(tp.topic, {}).get(tp.partition)

    def topic_metadata(self, topic: str, version: int = 1) -> dict[str, Any]:
        """The topic's part of a Metadata answer.  A known topic's is shared between answers
        until the next UpdateMetadata: callers must not change it."""
        parts = self.partitions.get(topic)
        if not parts:
            return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": topic,
                    "is_internal": False, "partitions": []}
        key = (topic, version == 0)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = {
                "error_code": ErrorCode.NONE, "name": topic,
                "is_internal": topic == "__consumer_offsets",   # clients skip it in subscriptions
                "partitions": [self._partition_metadata(s, version) for _, s in sorted(parts.items())]}
        return answer

    def _partition_metadata(self, s: PartitionStateInfo, version: int) -> dict[str, Any]:
        if version == 0:
            replicas = [r for r in s.replicas if r in self.brokers]
            isr = [r for r in s.isr if r in self.brokers]
        else:
            replicas, isr = list(s.replicas), list(s.isr)
        if s.leader not in self.brokers:
            error, leader, isr = ErrorCode.LEADER_NOT_AVAILABLE, -1, []
        elif len(replicas) < len(s.replicas) or len(isr) < len(s.isr):
            error, leader = ErrorCode.REPLICA_NOT_AVAILABLE, s.leader
        else:
            error, leader = ErrorCode.NONE, s.leader
        # Metadata v5+: Kafka's controller calls a replica offline when its broker is
        # not live (or its log dir failed); v7+: the epoch clients fetch at (KIP-320).
        return {"error_code": error, "partition_index": s.tp.partition, "leader_id": leader,
                "leader_epoch": s.leader_epoch, "replica_nodes": replicas, "isr_nodes": isr,
                "offline_replicas": [r for r in s.replicas if r not in self.brokers]}

    def metadata_response(self, topics: list[str] | None, version: int = 1) -> dict[str, Any]:
        names = sorted(self.partitions) if topics is None else topics
        return {"brokers": [{"node_id": b.broker_id, "host": b.host, "port": b.port,
                             "rack": self.racks.get(b.broker_id)}
                            for b in self.brokers.values()],
                "controller_id": self.controller_id,
                "topics": [self.topic_metadata(t, version) for t in names]}

    def full_response(self, topics: list[str] | None, version: int) -> dict[str, Any]:
        """The whole Metadata answer: v2+'s cluster id and v3+'s throttle time included."""
        response = self.metadata_response(topics, version)
        if version >= 2:
            response["cluster_id"] = self.cluster_id
        if version >= 3:
            response["throttle_time_ms"] = 0
        return response

    def encoded_response(self, topics: list[str] | None, version: int) -> EncodedOnce:
        """``full_response``, encoded once per UpdateMetadata for each version and topic list:
        after a failover every client asks again every second, and a 10k-partition answer
        took about 40 ms to encode."""
        key = (None if topics is None else tuple(topics), version, self.cluster_id)
        body = self._encoded.get(key)
        if body is None:
            body = EncodedOnce(self.full_response(topics, version))
            if len(self._encoded) < ENCODED_ANSWERS:
                self._encoded[key] = body
        return body


def _endpoint(entry: dict[str, Any], version: int) -> BrokerEndpoint:
    if version == 0:
        return BrokerEndpoint(entry["id"], entry["host"], entry["port"])
    first = entry["endpoints"][0]
    return BrokerEndpoint(entry["id"], first["host"], first["port"])
