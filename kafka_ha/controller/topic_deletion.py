"""Topic deletion (docs/design.md §7): markers in ``/admin/delete_topics``, StopReplica(delete).

A marked topic's partitions are announced with leader -2 (LeaderDuringDelete)
so brokers drop them from metadata; every replica gets StopReplica with
delete=true; when every replica has answered, the topic's znodes go,
assignment last but one and the marker last.  A replica on a dead broker
makes the topic wait until that broker returns (on broker start-up the
deletion resumes).  A topic under reassignment is not deleted until that ends.

Until it is gone, a topic being deleted takes part in no election and gets no
LeaderAndIsr (``ControllerContext.outside_deletion``), and every UpdateMetadata
announces its partitions with leader -2 (``state_during_delete``).

What waits for StopReplica answers belongs to the controller term that sent the
requests (``ControllerTerm.deletions_waiting``): a controller that resigns and
is elected again restarts every deletion, and answers to an earlier term's
requests are ignored.
"""
from __future__ import annotations

import logging
from typing import Callable

from kafka_ha.config import BrokerConfig
from kafka_ha.controller import events as ev
from kafka_ha.controller.term import ControllerTerm
from kafka_ha.model import LEADER_DURING_DELETE, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk import admin_znodes as azn
from kafka_ha.zk.controller_store import ControllerStore

log = logging.getLogger("kafka_ha.controller")


def state_during_delete(term: ControllerTerm, tp: TopicPartition) -> PartitionStateInfo:
    """How UpdateMetadata announces a partition of a topic being deleted: brokers drop it."""
    return PartitionStateInfo(tp, term.epoch, LEADER_DURING_DELETE, -1, (), -1,
                              term.ctx.assignments[tp])


class TopicDeletion:
    def __init__(self, store: ControllerStore, config: BrokerConfig,
                 watch_markers: Callable[[], Callable], enqueue: Callable[[object], None]) -> None:
        """``watch_markers()`` makes the watch on the markers; ``enqueue`` puts an event on
        the controller's queue (StopReplica answers arrive on the channel's greenlets)."""
        self.store = store
        self.config = config
        self._watch_markers = watch_markers
        self._enqueue = enqueue

    def on_markers(self, term: ControllerTerm, _event: object = None) -> None:
        self.load_markers(term)
        self.resume(term)

    def load_markers(self, term: ControllerTerm) -> None:
        """Read the deletion markers (re-arming their watch) into the term's topics being deleted."""
        ctx = term.ctx
        markers = set(self.store.deletion_markers(watch=self._watch_markers()))
        for topic in sorted(markers - ctx.deleting_topics):
            if topic not in ctx.topics:
                log.info("Removing the deletion marker of unknown topic %s", topic)
                self.store.fenced_delete(azn.DeleteTopicZNode.path(topic))
            elif not self.config["delete.topic.enable"]:
                log.warning("Topic %s was marked for deletion but delete.topic.enable is false; "
                            "removing the marker (Kafka 2.x behaviour)", topic)
                self.store.fenced_delete(azn.DeleteTopicZNode.path(topic))
            else:
                log.info("Topic %s is marked for deletion", topic)
                ctx.deleting_topics.add(topic)

    def resume(self, term: ControllerTerm) -> None:
        """Start (or restart) every deletion whose replicas are all on live brokers."""
        ctx = term.ctx
        for topic in sorted(ctx.deleting_topics):
            if topic in term.deletions_waiting:
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
            self._start(term, topic, partitions, replicas)

    def _start(self, term: ControllerTerm, topic: str, partitions: list[TopicPartition],
               replicas: set[int]) -> None:
        ctx = term.ctx
        batch = term.new_batch()
        batch.add_update_metadata(ctx.live_brokers, [state_during_delete(term, tp) for tp in partitions])
        for tp in partitions:
            batch.add_stop_replica(ctx.assignments[tp], tp, delete=True)
        term.deletions_waiting[topic] = set(replicas)
        batch.send(term.channel, on_stop_replica=lambda broker, response: self._enqueue(
            ev.StopReplicaResult(topic, broker, response, term.epoch)))
        log.info("Deletion of topic %s started: StopReplica(delete) sent to brokers %s", topic,
                 sorted(replicas))

    def on_stop_replica_result(self, term: ControllerTerm, event: ev.StopReplicaResult) -> None:
        if event.controller_epoch != term.epoch:
            # Queued before this controller resigned: the new term sends its own requests.
            log.info("Ignoring the StopReplica answer of broker %d for topic %s from controller "
                     "epoch %d; the current epoch is %d", event.broker, event.topic,
                     event.controller_epoch, term.epoch)
            return
        waiting = term.deletions_waiting.get(event.topic)
        if waiting is None:
            return
        response = event.response or {}
        errors = [e for e in response.get("partition_errors", []) if e["error_code"] != ErrorCode.NONE]
        if response.get("error_code", -1) != ErrorCode.NONE or errors:
            log.warning("Broker %d failed to delete replicas of %s (%s); will retry", event.broker,
                        event.topic, response)
            del term.deletions_waiting[event.topic]  # retried on the next resume
            return
        waiting.discard(event.broker)
        if waiting:
            return
        del term.deletions_waiting[event.topic]
        self.store.delete_topic_znodes(event.topic)
        term.ctx.deleting_topics.discard(event.topic)
        term.ctx.remove_topic(event.topic)
        log.info("Deletion of topic %s successfully completed", event.topic)

    def on_broker_failure(self, term: ControllerTerm, dead: set[int]) -> None:
        """A broker died mid-deletion: its answer will not come; restart when it returns."""
        for topic, waiting in list(term.deletions_waiting.items()):
            if waiting & dead:
                del term.deletions_waiting[topic]
