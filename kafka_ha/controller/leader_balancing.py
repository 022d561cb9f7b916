"""Preferred replica elections: on request (``/admin/preferred_replica_election``) and automatic.

The preferred replica is the first of a partition's assigned replicas; the
round-robin assignment spreads those evenly, so moving leadership back to
them after broker bounces rebalances load.  Auto rebalance runs every
``leader.imbalance.check.interval.seconds`` and moves leaders of brokers whose
share of not-led preferred partitions exceeds ``leader.imbalance.per.broker.percentage``.
"""
from __future__ import annotations

import logging
from collections import defaultdict

from kafka_ha.controller import election
from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.zk import admin_znodes as azn

log = logging.getLogger("kafka_ha.controller")
PATH = azn.PreferredReplicaElectionZNode.PATH


class LeaderBalancing:
    def __init__(self, controller) -> None:
        self.c = controller

    def elect_preferred(self, partitions: list[TopicPartition], why: str) -> dict:
        ctx = self.c.ctx
        eligible = [tp for tp in partitions if tp in ctx.states and tp.topic not in ctx.deleting_topics]
        live, epoch = ctx.live_broker_ids, ctx.epoch

        def decide(tp: TopicPartition, current: LeaderAndIsr) -> election.Outcome:
            return election.preferred_election(current, ctx.assignments[tp], live, epoch)
        batch = self.c.new_batch()
        changed = self.c.psm.change(eligible, decide, batch)
        batch.send(self.c.channel)
        if changed:
            log.info("Preferred replica election (%s): moved leadership of %d of %d partitions",
                     why, len(changed), len(eligible))
        return changed

    def on_request(self, _event: object = None) -> None:
        """Handle ``/admin/preferred_replica_election`` (also on failover), then delete it."""
        wanted = self.c.read_admin_request(PATH, azn.PreferredReplicaElectionZNode.decode,
                                           "preferred", "preferred replica election")
        if wanted is None:
            return
        unknown = [tp for tp in wanted if tp not in self.c.ctx.assignments]
        for tp in unknown:
            log.warning("Skipping preferred replica leader election for partition %s since it "
                        "doesn't exist", tp)
        self.elect_preferred([tp for tp in wanted if tp not in unknown], "requested")
        self.c.store.fenced_delete(PATH)

    def auto_rebalance(self, _event: object = None) -> None:
        ctx = self.c.ctx
        if ctx.reassignments:
            return  # Kafka skips rebalancing while partitions move
        threshold = self.c.config["leader.imbalance.per.broker.percentage"] / 100
        by_preferred: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp, replicas in ctx.assignments.items():
            if tp in ctx.states and tp.topic not in ctx.deleting_topics:
                by_preferred[replicas[0]].append(tp)
        to_move = []
        for broker, partitions in by_preferred.items():
            if not ctx.is_live(broker):
                continue
            not_led = [tp for tp in partitions if ctx.states[tp].leader != broker]
            if partitions and len(not_led) / len(partitions) > threshold:
                to_move += [tp for tp in not_led if broker in ctx.states[tp].isr]
        if to_move:
            self.elect_preferred(to_move, "auto leader rebalance")
