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
from typing import Callable

from kafka_ha.config import BrokerConfig
from kafka_ha.controller import election, events as ev
from kafka_ha.controller.term import ControllerTerm
from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.zk import admin_znodes as azn
from kafka_ha.zk.controller_store import ControllerStore

log = logging.getLogger("kafka_ha.controller")
PATH = azn.PreferredReplicaElectionZNode.PATH


class LeaderBalancing:
    def __init__(self, store: ControllerStore, config: BrokerConfig, read_request: Callable) -> None:
        """``read_request`` is the controller's ``read_admin_request``."""
        self.store = store
        self.config = config
        self._read_request = read_request

    @staticmethod
    def elect_preferred(term: ControllerTerm, partitions: list[TopicPartition], why: str) -> dict:
        ctx = term.ctx
        eligible = [tp for tp in partitions if tp in ctx.states and tp.topic not in ctx.deleting_topics]
        live = ctx.live_broker_ids

        def decide(tp: TopicPartition, current: LeaderAndIsr) -> election.Outcome:
            return election.preferred_election(current, ctx.assignments[tp], live, term.epoch)
        changed = term.change_states(eligible, decide)
        if changed:
            log.info("Preferred replica election (%s): moved leadership of %d of %d partitions",
                     why, len(changed), len(eligible))
        return changed

    def on_request(self, term: ControllerTerm, _event: object = None) -> None:
        """Handle ``/admin/preferred_replica_election`` (also on failover), then delete it."""
        wanted = self._read_request(PATH, azn.PreferredReplicaElectionZNode.decode,
                                    ev.PreferredReplicaElection(), "preferred replica election")
        if wanted is None:
            return
        unknown = [tp for tp in wanted if tp not in term.ctx.assignments]
        for tp in unknown:
            log.warning("Skipping preferred replica leader election for partition %s since it "
                        "doesn't exist", tp)
        self.elect_preferred(term, [tp for tp in wanted if tp not in unknown], "requested")
        self.store.fenced_delete(PATH)

    def auto_rebalance(self, term: ControllerTerm, _event: object = None) -> None:
        ctx = term.ctx
        if ctx.reassignments:
            return  # Kafka skips rebalancing while partitions move
        threshold = self.config["leader.imbalance.per.broker.percentage"] / 100
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
            self.elect_preferred(term, to_move, "auto leader rebalance")
