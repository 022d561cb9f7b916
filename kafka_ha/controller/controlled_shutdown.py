"""Controlled shutdown (docs/design.md §7): a stopping broker asks the controller to move its work.

The broker is marked shutting down (it still gets requests but no longer
counts as live for elections); partitions it leads get a new leader from the
rest of the ISR, and it leaves every ISR.  It hears LeaderAndIsr for the
partitions it led and StopReplica for those it followed.  The reply lists the replicated
partitions it still leads; the broker retries until that list is empty.
"""
from __future__ import annotations

import logging

from kafka_ha.clock import monotonic_ms
from kafka_ha.controller import election
from kafka_ha.controller import events as ev
from kafka_ha.controller.term import ControllerTerm
from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.protocol.errors import ErrorCode

log = logging.getLogger("kafka_ha.controller")


def on_request(term: ControllerTerm | None, event: ev.ControlledShutdownRequest) -> None:
    """Answer ``event.reply``; ``term`` is None when this broker is not the controller."""
    broker = event.broker_id
    if term is None:
        event.reply.set({"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []})
        return
    ctx, started_ms = term.ctx, monotonic_ms()
    if broker not in ctx.live_brokers:
        event.reply.set({"error_code": ErrorCode.BROKER_NOT_AVAILABLE, "remaining_partitions": []})
        return
    current_epoch = ctx.live_brokers[broker].epoch
    if 0 <= event.broker_epoch < current_epoch:
        # Sent by a previous process of this broker (KIP-380): served, it would move the
        # leaderships of the process registered now and mark that one shutting down.
        log.info("Received controlled shutdown request from an old broker epoch %d for broker %d. "
                 "Current broker epoch is %d.", event.broker_epoch, broker, current_epoch)
        event.reply.set({"error_code": ErrorCode.STALE_BROKER_EPOCH, "remaining_partitions": []})
        return
    ctx.shutting_down.add(broker)
    # Partitions of topics being deleted are left alone: no election for them.
    replicated = [tp for tp in ctx.outside_deletion(ctx.replicas_on({broker}))
                  if len(ctx.assignments[tp]) > 1 and tp in ctx.states]
    live, shutting = ctx.live_broker_ids, ctx.shutting_down

    def decide(tp: TopicPartition, current: LeaderAndIsr) -> election.Outcome:
        return election.controlled_shutdown_election(current, ctx.assignments[tp], live,
                                                     shutting, term.epoch)
    led = {tp for tp in replicated if ctx.states[tp].leader == broker}
    batch = term.new_batch()
    # The stopping broker still receives requests.  As in Kafka, it hears LeaderAndIsr only
    # for the partitions it led (it follows their new leaders until it goes) and stops
    # fetching for those it followed; their ISR shrinks go to the other replicas only.
    batch.live_brokers = dict(ctx.live_brokers)
    changed = term.psm.change(replicated, decide, batch)
    written_ms = monotonic_ms()
    batch.keep_leader_and_isr(broker, led)
    for tp in replicated:
        if tp not in led:
            batch.add_stop_replica([broker], tp, delete=False)
    batch.send(term.channel)
    remaining = [tp for tp in replicated if ctx.states[tp].leader == broker]
    log.info("Controlled shutdown of broker %d: %d partitions changed, %d still led by it; %d ms in "
             "the event queue, states written in %d ms, requests queued %d ms later", broker,
             len(changed), len(remaining), started_ms - event.queued_ms, written_ms - started_ms,
             monotonic_ms() - written_ms)
    event.reply.set({"error_code": ErrorCode.NONE, "remaining_partitions": [
        {"topic": tp.topic, "partition": tp.partition} for tp in remaining]})
