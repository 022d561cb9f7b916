"""Partition state changes: decide (pure) -> conditional batch write -> cache -> requests.

This is the failover loop of docs/design.md §3 (steps 5-7) generalised: for a set of partitions, apply a
pure decision to each cached state, write all decisions with conditional
writes batched into fenced multis, and for the partitions whose znode changed
underneath (version conflict) re-read, re-decide and write again.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from gevent import sleep

from kafka_ha import metrics
from kafka_ha.controller import election
from kafka_ha.cooperative import controller_slices
from kafka_ha.controller.context import ControllerContext
from kafka_ha.controller.request_batch import RequestBatch
from kafka_ha.model import LeaderAndIsr, PartitionStateInfo, TopicPartition
from kafka_ha.state_change_log import StateChangeBatch
from kafka_ha.zk.controller_store import ControllerStore
from kafka_ha.zk.errors import MalformedZnode
from kafka_ha.zk.state_writes import MULTI_CHUNK, ControllerMoved

log = logging.getLogger("kafka_ha.controller")

Decide = Callable[[TopicPartition, LeaderAndIsr], election.Outcome]


def conflict_backoff_s(round_: int) -> float:
    """Seconds to wait after the ``round_``-th round of conflicts before writing again.

    Whoever keeps changing the states (leaders shrinking ISRs) gets time to finish;
    the controller never gives up, because a partition left behind keeps a dead
    leader or a dead ISR member until some later event happens to touch it.

    >>> [conflict_backoff_s(n) for n in (1, 2, 3, 7, 8, 30)]
    [0.01, 0.02, 0.04, 0.64, 1.0, 1.0]
    """
    return min(0.01 * 2 ** (round_ - 1), 1.0)


def _fmt(s: LeaderAndIsr) -> str:
    return f"(leader {s.leader}, leader_epoch {s.leader_epoch}, isr {list(s.isr)})"


class PartitionStateMachine:
    def __init__(self, ctx: ControllerContext, store: ControllerStore, controller_id: int,
                 epoch: int) -> None:
        self.ctx = ctx
        self.store = store
        self.controller_id = controller_id
        self.epoch = epoch  # the controller term's, written into every state
        self.zk_writes = 0

    def change(self, partitions: Iterable[TopicPartition], decide: Decide,
               batch: RequestBatch) -> dict[TopicPartition, LeaderAndIsr]:
        """Apply ``decide`` to every partition's current state; returns the states written.

        Decisions start from the cached states, and every partition goes into
        the batched multis: a changed one as a conditional write, an unchanged
        one as a version check.  Leaders change ISRs on their own, so the cache
        may be stale; a stale version fails either op, and only those
        partitions are re-read and decided again.  (Reading every state first
        costs a round of reads per event; a check costs nothing extra.)
        """
        pending = {tp: self.ctx.states[tp] for tp in partitions if tp in self.ctx.states}
        changed: dict[TopicPartition, LeaderAndIsr] = {}
        lines = StateChangeBatch()
        conflict_round = 0
        # Until every write lands; a lost controllership ends it (ControllerMoved).
        while True:
            decisions: dict[TopicPartition, LeaderAndIsr] = {}
            reasons: dict[TopicPartition, election.Outcome] = {}
            submissions = []
            items = list(pending.items())
            # Decide and send slice by slice so that ZooKeeper applies one
            # multi while the next slice is being decided.
            for start in range(0, len(items), MULTI_CHUNK):
                slice_decisions, unchanged = {}, {}
                # The loop shares the broker's event loop: it yields to it now and then.
                for tp, current in controller_slices(items[start:start + MULTI_CHUNK]):
                    outcome = decide(tp, current)
                    if outcome.decision is None:
                        unchanged[tp] = current
                        continue
                    slice_decisions[tp] = outcome.decision.with_zk_version(current.zk_version)
                    reasons[tp] = outcome
                if slice_decisions or unchanged:
                    submissions.append(self.store.submit_updates(slice_decisions, checks=unchanged))
                    decisions.update(slice_decisions)
            if not submissions:
                break
            result = self.store.collect(submissions)
            self.zk_writes += len(decisions)
            for tp, written in controller_slices(result.written.items()):
                if tp in decisions:  # not a passed version check
                    self._record(tp, written, reasons[tp], batch, lines)
                    changed[tp] = written
            for tp, why in result.failed.items():
                log.error("Failed to write the state of partition %s: %s", tp, why)
            if not result.conflicts:
                break
            pending = self._reread_conflicts(result.conflicts, decisions, reasons, batch, changed,
                                             lines)
            if not pending:
                break
            conflict_round += 1
            delay = conflict_backoff_s(conflict_round)
            log.info("%d partition states changed underneath (conflict round %d, e.g. %s); "
                     "re-deciding them in %.0f ms", len(pending), conflict_round,
                     ", ".join(str(tp) for tp in sorted(pending)[:5]), delay * 1000)
            sleep(delay)
        lines.emit()
        return changed

    def _reread_conflicts(self, conflicts: list[TopicPartition],
                          decisions: dict[TopicPartition, LeaderAndIsr],
                          reasons: dict[TopicPartition, election.Outcome], batch: RequestBatch,
                          changed: dict[TopicPartition, LeaderAndIsr],
                          lines: StateChangeBatch) -> dict[TopicPartition, LeaderAndIsr]:
        pending = {}
        for tp, stored in self.store.partition_states(conflicts).items():
            if not isinstance(stored, LeaderAndIsr):
                self._skip_unreadable(tp, stored)
                continue
            problem = election.validate_against_assignment(stored, self.ctx.assignments[tp])
            if problem and not (tp in self.ctx.reassignments and stored.leader in self.ctx.assignments[tp]):
                # (mid-reassignment the ISR may still name old replicas)
                self._skip_unreadable(tp, problem)
                continue
            if stored.controller_epoch > self.epoch:
                raise ControllerMoved(f"partition {tp} was written by controller epoch "
                                      f"{stored.controller_epoch} > ours {self.epoch}")
            if tp in decisions and stored.same_content(decisions[tp]):
                # Our write went through but its reply was lost (KAFKA-1382).
                self._record(tp, stored, reasons[tp], batch, lines)
                changed[tp] = stored
                continue
            self.ctx.states[tp] = stored
            pending[tp] = stored
        return pending

    def _skip_unreadable(self, tp: TopicPartition, stored: MalformedZnode | str | None) -> None:
        if stored is None:
            log.error("State znode of partition %s disappeared; skipping it", tp)
        else:
            log.error("Skipping partition %s: its state znode is unusable: %s", tp, stored)
            self.ctx.unusable.add(tp)
        self.ctx.states.pop(tp, None)

    def _record(self, tp: TopicPartition, written: LeaderAndIsr, outcome: election.Outcome,
                batch: RequestBatch, lines: StateChangeBatch) -> None:
        old = self.ctx.states.get(tp)
        self.ctx.states[tp] = written
        text = (f"Controller {self.controller_id} epoch {self.epoch} changed partition {tp} "
                f"from {_fmt(old) if old else 'NewPartition'} to {_fmt(written)}: {outcome.reason}")
        if outcome.unclean:
            metrics.count(metrics.UNCLEAN_ELECTIONS)
            lines.warning(text)
            log.warning("Unclean leader election for partition %s: %s", tp, outcome.reason)
        else:
            lines.info(text)
        replicas = self.ctx.assignments[tp]
        batch.add_leader_and_isr(replicas, PartitionStateInfo.of(tp, written, replicas))

    def create(self, partitions: Iterable[TopicPartition], batch: RequestBatch) -> None:
        """New -> Online: write the first state of partitions that have a live replica."""
        live = self.ctx.live_broker_ids
        creates = {}
        for tp in controller_slices(partitions):
            state = election.initial_state(self.ctx.assignments[tp], live, self.epoch)
            if state is None:
                log.info("Partition %s has no live replica among %s; it stays new", tp,
                         list(self.ctx.assignments[tp]))
                continue
            creates[tp] = state
        if not creates:
            return
        result = self.store.create_states(creates)
        self.zk_writes += len(creates)
        written = dict(result.written)
        for tp, why in result.failed.items():
            log.error("Failed to create the state of partition %s: %s", tp, why)
        if result.conflicts:
            for tp, stored in self.store.partition_states(result.conflicts).items():
                if isinstance(stored, LeaderAndIsr) and stored.same_content(creates[tp]):
                    written[tp] = stored  # ours: a create sent again after its reply was lost
                elif isinstance(stored, LeaderAndIsr):
                    self.ctx.states[tp] = stored  # an earlier controller created it: adopt it
                else:
                    self._skip_unreadable(tp, stored)
        lines = StateChangeBatch()
        for tp, state in controller_slices(written.items()):
            self._record(tp, state, election.Outcome(state, "new partition online"), batch, lines)
        lines.emit()
