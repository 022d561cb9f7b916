"""A broker failure (docs/design.md §3): its partitions get new leaders, its replicas leave the ISRs.

In Kafka's order (``onReplicasBecomeOffline``), in three sends:

1. every live broker hears that the dead ones are gone (an UpdateMetadata with
   no partition), so a client asking meanwhile sees their partitions without a
   leader instead of a leader it keeps dialling;
2. the partitions the dead brokers led (or that had no leader) are elected,
   written and sent;
3. the dead replicas leave the ISRs of partitions whose leader lives, written
   and sent.

The writes take as long in one pass as in two.  In two, the new leaders start
after the elections' share of them: at 10k partitions over 3 brokers, a third.
"""
from __future__ import annotations

import logging
import time

from kafka_ha.controller.partition_state_machine import Decide
from kafka_ha.controller.term import ControllerTerm

log = logging.getLogger("kafka_ha.controller")


def on_broker_failure(term: ControllerTerm, dead: set[int], decide: Decide) -> None:
    """``decide`` is the election for a partition after the live set lost ``dead``."""
    started = time.monotonic()
    ctx = term.ctx
    # Topics being deleted keep their states: a new one would send LeaderAndIsr to
    # brokers that deleted the logs already (TopicDeletion.on_broker_failure waits).
    affected = sorted(ctx.outside_deletion(ctx.replicas_on(dead)))
    live_brokers = {b: info for b, info in ctx.live_brokers.items() if b not in dead}
    announce = term.new_batch()
    announce.live_brokers = live_brokers
    announce.add_update_metadata(live_brokers, [])
    announce.send(term.channel)

    elections = [tp for tp in affected if tp in ctx.states and ctx.states[tp].leader not in live_brokers]
    batch = term.new_batch()
    batch.live_brokers = live_brokers
    changed = term.psm.change(elections, decide, batch)
    batch.send(term.channel)
    if elections:
        log.info("Broker failure %s: %d new leader states written in %.0f ms and sent", sorted(dead),
                 len(changed), (time.monotonic() - started) * 1000)

    batch = term.new_batch()
    batch.live_brokers = live_brokers
    # A partition decided again after a conflict may turn out to need an election: the
    # decision is the same function, only the send comes later.
    changed.update(term.psm.change(sorted(set(affected) - set(elections)), decide, batch))
    written_ms = (time.monotonic() - started) * 1000
    led = sum(1 for s in changed.values() if s.leader >= 0)

    def acked(ms: float) -> None:
        # A broker's requests are answered in order: this batch's answer follows the elections'.
        log.info("Broker failure %s handled: %d partitions affected, %d state znodes written "
                 "(%d with a leader) in %.0f ms; LeaderAndIsr acknowledged %.0f ms after the "
                 "event started", sorted(dead), len(affected), len(changed), led, written_ms,
                 written_ms + ms)
    batch.send(term.channel, on_acked=acked)
