"""One controller term: what the controller holds from winning an election until it resigns.

The controller makes a ``ControllerTerm`` when it wins ``/controller`` and
drops it when it resigns, for whatever reason (its session expired, another
broker took over, the broker shuts down).  Everything that belongs to one term
lives here and nowhere else: the epoch, the cluster view, the channel to the
brokers, the partition state machine, the reassignments it started, the
deletions waiting for StopReplica answers and its timers.  So nothing of a term
outlives it, and the next term starts from what ZooKeeper holds: a deletion
still waiting for answers that the old term's channel will never bring would
stall for good, and a timer or sender greenlet of the old term would act in the
next one.  The version of ``/controller_epoch`` that the election wrote, which
fences every write of the term, stays in the store from ``try_elect`` until
``resign``.

The handlers (controller.py and its helpers) get the term as an argument; only
the controller's event loop touches it, so it needs no locks.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

import gevent

from kafka_ha.controller import election
from kafka_ha.controller.channel import ControllerChannel
from kafka_ha.controller.context import ControllerContext
from kafka_ha.controller.partition_state_machine import Decide, PartitionStateMachine
from kafka_ha.controller.request_batch import RequestBatch
from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.zk.controller_store import ControllerStore, Election
from kafka_ha.zk.errors import MalformedZnode

log = logging.getLogger("kafka_ha.controller")


class ControllerTerm:
    def __init__(self, controller_id: int, won: Election, store: ControllerStore,
                 channel: ControllerChannel) -> None:
        self.controller_id = controller_id
        self.epoch = won.epoch
        self.store = store
        self.ctx = ControllerContext()
        self.channel = channel
        self.psm = PartitionStateMachine(self.ctx, store, controller_id, self.epoch)
        # Partitions whose reassignment this term has started (AR = OAR + RAR sent).
        self.reassignments_started: set[TopicPartition] = set()
        # Topic being deleted -> brokers whose StopReplica(delete) of this term is unanswered.
        self.deletions_waiting: dict[str, set[int]] = {}
        self._timers: list[gevent.Greenlet] = []

    def load_topics(self, topics: list[str], watch_for: Callable[[str], Callable]
                    ) -> list[TopicPartition]:
        """Read the assignments, configs and states of these topics into the term's view,
        with ``watch_for(topic)`` set on each assignment; returns the partitions new to it."""
        ctx = self.ctx
        assignments = self.store.topic_assignments(topics, watch_for=watch_for)
        configs = self.store.topic_configs(t for t, a in assignments.items() if a is not None)
        added = []
        for topic, assignment in assignments.items():
            if assignment is None:
                continue
            ctx.topic_configs[topic] = configs.get(topic, {})
            for p, replicas in assignment.partitions.items():
                tp = TopicPartition(topic, p)
                if tp not in ctx.assignments:
                    ctx.set_assignment(tp, replicas)
                    added.append(tp)
        self.load_states(added)
        return added

    def load_states(self, partitions: list[TopicPartition]) -> None:
        """Read these partitions' states into the term's view; one that is malformed or
        contradicts its assignment is set aside as unusable (and logged)."""
        for tp, stored in self.store.partition_states(partitions).items():
            if stored is None:
                continue  # New: the state is created when a replica is live
            problem = (str(stored) if isinstance(stored, MalformedZnode)
                       else election.validate_against_assignment(stored, self.ctx.assignments[tp]))
            if problem:
                log.error("Skipping partition %s: its state znode is unusable: %s", tp, problem)
                self.ctx.unusable.add(tp)
                continue
            self.ctx.states[tp] = stored

    def new_batch(self) -> RequestBatch:
        """A batch for the requests of one event, sent under this term's epoch."""
        return RequestBatch(self.controller_id, self.epoch, self.ctx.live_brokers)

    def change_states(self, partitions: Iterable[TopicPartition],
                      decide: Decide) -> dict[TopicPartition, LeaderAndIsr]:
        """Apply ``decide`` to the partitions' states and send the requests the changes need;
        returns the states written."""
        batch = self.new_batch()
        changed = self.psm.change(partitions, decide, batch)
        batch.send(self.channel)
        return changed

    def every(self, first_s: float, interval_s: float, tick: Callable[[], None]) -> None:
        """Call ``tick`` (which must not block) after ``first_s``, then every ``interval_s``,
        until the term ends."""
        def repeat() -> None:
            gevent.sleep(first_s)
            while True:
                tick()
                gevent.sleep(interval_s)
        self._timers.append(gevent.spawn(repeat))

    def end(self) -> None:
        """Stop the term's timers and its channel (its requests not yet sent are dropped)."""
        for timer in self._timers:
            # Waits (briefly: a tick only queues an event) so that no tick comes after the end.
            timer.kill()
        self._timers.clear()
        self.channel.stop()
