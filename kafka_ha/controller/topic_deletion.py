"""Topic deletion (controller.md §14): markers in ``/admin/delete_topics``, StopReplica(delete).

A marked topic's partitions are announced with leader -2 (LeaderDuringDelete)
so brokers drop them from metadata; every replica gets StopReplica with
delete=true; when every replica has answered, the topic's znodes go,
assignment last but one and the marker last.  A replica on a dead broker
makes the topic wait until that broker returns (on broker start-up the
deletion resumes).  A topic under reassignment is not deleted until that ends.
"""
from __future__ import annotations

import logging

from kafka_ha.controller import events as ev
from kafka_ha.model import LEADER_DURING_DELETE, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk import admin_znodes as azn

log = logging.getLogger("kafka_ha.controller")


class TopicDeletion:
    def __init__(self, controller) -> None:
        self.c = controller
        # topic -> brokers whose StopReplica(delete) has not succeeded yet
        self._pending: dict[str, set[int]] = {}

    def on_markers(self, _event: object = None) -> None:
        ctx = self.c.ctx
        markers = set(self.c.store.deletion_markers(watch=self.c.watch_event("deletion")))
        for topic in sorted(markers - ctx.deleting_topics):
            if topic not in ctx.topics:
                log.info("Removing the deletion marker of unknown topic %s", topic)
                self.c.store.fenced_delete(azn.DeleteTopicZNode.path(topic))
            elif not self.c.config["delete.topic.enable"]:
                log.warning("Topic %s was marked for deletion but delete.topic.enable is false; "
                            "removing the marker (Kafka 2.x behaviour)", topic)
                self.c.store.fenced_delete(azn.DeleteTopicZNode.path(topic))
            else:
                log.info("Topic %s is marked for deletion", topic)
                ctx.deleting_topics.add(topic)
        self.resume()

    def resume(self) -> None:
        """Start (or restart) every deletion whose replicas are all on live brokers."""
        ctx = self.c.ctx
        for topic in sorted(ctx.deleting_topics):
            if topic in self._pending:
                continue
            partitions = ctx.partitions_of(topic)
            if any(tp in ctx.reassignments for tp in partitions):
                log.info("Deletion of topic %s waits for its reassignment to finish", topic)
                continue
            replicas = {b for tp in partitions for b in ctx.assignments[tp]}
            dead = sorted(b for b in replicas if b not in ctx.live_brokers)
            if dead:
                log.info("Deletion of topic %s waits for brokers %s, which hold replicas", topic, dead)
                continue
            self._start(topic, partitions, replicas)

    def _start(self, topic: str, partitions: list[TopicPartition], replicas: set[int]) -> None:
        ctx = self.c.ctx
        batch = self.c.new_batch()
        batch.add_update_metadata(ctx.live_brokers, [
            PartitionStateInfo(tp, ctx.epoch, LEADER_DURING_DELETE, -1, (), -1, ctx.assignments[tp])
            for tp in partitions])
        for tp in partitions:
            batch.add_stop_replica(ctx.assignments[tp], tp, delete=True)
        self._pending[topic] = set(replicas)
        batch.send(self.c.channel, on_stop_replica=lambda broker, response: self.c.enqueue(
            ev.StopReplicaResult(topic, broker, response)))
        log.info("Deletion of topic %s started: StopReplica(delete) sent to brokers %s", topic,
                 sorted(replicas))

    def on_stop_replica_result(self, event: ev.StopReplicaResult) -> None:
        waiting = self._pending.get(event.topic)
        if waiting is None:
            return
        response = event.response or {}
        errors = [e for e in response.get("partition_errors", []) if e["error_code"] != ErrorCode.NONE]
        if response.get("error_code", -1) != ErrorCode.NONE or errors:
            log.warning("Broker %d failed to delete replicas of %s (%s); will retry", event.broker,
                        event.topic, response)
            del self._pending[event.topic]  # retried on the next resume
            return
        waiting.discard(event.broker)
        if waiting:
            return
        del self._pending[event.topic]
        self.c.store.delete_topic_znodes(event.topic)
        self.c.ctx.deleting_topics.discard(event.topic)
        self.c.ctx.remove_topic(event.topic)
        log.info("Deletion of topic %s successfully completed", event.topic)

    def on_broker_failure(self, dead: set[int]) -> None:
        """A broker died mid-deletion: its answer will not come; restart when it returns."""
        for topic, waiting in list(self._pending.items()):
            if waiting & dead:
                del self._pending[topic]
