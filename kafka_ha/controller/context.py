"""The controller's cached view of the cluster, one per controller term (term.py).

Owned by the controller's event loop alone, so it needs no locks.  It caches
what was last read from or written to ZooKeeper: live brokers, assignments,
partition states (with their znode versions) and topic configs.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicPartition


class ControllerContext:
    def __init__(self) -> None:
        self.live_brokers: dict[int, BrokerInfo] = {}
        self.shutting_down: set[int] = set()
        self.assignments: dict[TopicPartition, tuple[int, ...]] = {}
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        # partitions whose state znode is malformed or contradicts the
        # assignment: skipped (and logged) until the znode is fixed
        self.unusable: set[TopicPartition] = set()
        self.deleting_topics: set[str] = set()
        # partition -> requested replicas, while a reassignment is in progress
        self.reassignments: dict[TopicPartition, tuple[int, ...]] = {}
        # partition -> its replicas when this controller took up its reassignment
        # (ListPartitionReassignments derives adding/removing replicas from them)
        self.reassignment_origins: dict[TopicPartition, tuple[int, ...]] = {}
        # topic -> partitions, kept in step with assignments for per-topic work
        self._by_topic: dict[str, set[int]] = defaultdict(set)
        # broker -> partitions it has a replica of
        self._by_broker: dict[int, set[TopicPartition]] = defaultdict(set)

    # ---- brokers --------------------------------------------------------

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers that may lead or join an ISR (registered and not shutting down)."""
        return set(self.live_brokers) - self.shutting_down

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers and broker_id not in self.shutting_down

    # ---- topics and assignments -----------------------------------------

    @property
    def topics(self) -> set[str]:
        return set(self._by_topic)

    def set_assignment(self, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
        old = self.assignments.get(tp, ())
        for b in old:
            self._by_broker[b].discard(tp)
        self.assignments[tp] = tuple(replicas)
        self._by_topic[tp.topic].add(tp.partition)
        for b in replicas:
            self._by_broker[b].add(tp)

    def remove_topic(self, topic: str) -> None:
        for p in self._by_topic.pop(topic, ()):
            tp = TopicPartition(topic, p)
            for b in self.assignments.pop(tp, ()):
                self._by_broker[b].discard(tp)
            self.states.pop(tp, None)
            self.unusable.discard(tp)
            self.reassignments.pop(tp, None)
            self.reassignment_origins.pop(tp, None)
        self.topic_configs.pop(topic, None)

    def outside_deletion(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """These partitions less those of topics being deleted.

        A topic being deleted takes part in no election and gets no LeaderAndIsr: one
        that reaches a broker after its StopReplica(delete) would create the deleted
        log again, and nothing would remove it once the deletion has completed.
        """
        if not self.deleting_topics:
            return list(partitions)
        return [tp for tp in partitions if tp.topic not in self.deleting_topics]

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self._by_topic.get(topic, ()))]

    def replicas_on(self, broker_ids: set[int]) -> set[TopicPartition]:
        """Partitions with a replica on any of these brokers."""
        out: set[TopicPartition] = set()
        for b in broker_ids:
            out |= self._by_broker.get(b, set())
        return out

    def all_partitions(self) -> list[TopicPartition]:
        return list(self.assignments)

    # ---- states ---------------------------------------------------------

    def offline_partitions(self, among: Iterable[TopicPartition] | None = None) -> list[TopicPartition]:
        """Partitions (of ``among``, else all) with a state but no live leader."""
        if among is None:
            return [tp for tp, s in self.states.items() if not self.is_live(s.leader)]
        return [tp for tp in among if tp in self.states and not self.is_live(self.states[tp].leader)]

    def partitions_with_dead_members(self) -> list[TopicPartition]:
        """Partitions whose leader or some ISR member is not live (what a failover must repair)."""
        live = self.live_broker_ids
        return [tp for tp, s in self.states.items()
                if s.leader not in live or not live.issuperset(s.isr)]

    def new_partitions(self) -> list[TopicPartition]:
        """Assigned partitions without a state znode yet."""
        return [tp for tp in self.assignments if tp not in self.states and tp not in self.unusable]

    def leader_of(self, tp: TopicPartition) -> int:
        state = self.states.get(tp)
        return state.leader if state else -1
