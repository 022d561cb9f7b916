"""Partition reassignment (the 0.8.2-2.3 algorithm, docs/design.md §7).

Per partition, with OAR the old and RAR the requested replicas:
start: AR := OAR + new replicas in ZooKeeper, leader epoch +1 and LeaderAndIsr
to all of them, so the new replicas start fetching; then wait until RAR is
in the ISR (the leader reports ISR growth through ISR change notifications);
finish: move leadership into RAR if needed, shrink the ISR to RAR, stop and
delete the old replicas, write AR := RAR (last: until then ZooKeeper holds
OAR, so a new controller can resume), and remove the partition from
``/admin/reassign_partitions`` (deleted when empty).

A cancel (KIP-455) is a new target equal to the replicas the partition had when
the reassignment was taken up (its origin): not started yet, or with nothing
added, the reassignment is simply dropped; otherwise it finishes towards the
origin, which stops and deletes the replicas it had added.  After a controller
failover the origin is the assignment as found (old + new replicas), so a cancel
then keeps every replica.
"""
from __future__ import annotations

import logging
from typing import Callable

from kafka_ha.controller import election, events as ev
from kafka_ha.controller.context import ControllerContext
from kafka_ha.controller.term import ControllerTerm
from kafka_ha.model import LeaderAndIsr, PartitionStateInfo, TopicPartition
from kafka_ha.zk import admin_znodes as azn
from kafka_ha.zk.controller_store import ControllerStore
from kafka_ha.zk.errors import MalformedZnode

log = logging.getLogger("kafka_ha.controller")
PATH = azn.ReassignPartitionsZNode.PATH


class Reassignment:
    def __init__(self, store: ControllerStore, read_request: Callable,
                 on_finished: Callable[[ControllerTerm], None]) -> None:
        """``read_request`` is the controller's ``read_admin_request``; ``on_finished(term)``
        runs when reassignments have completed (deletions waiting for them may go on)."""
        self.store = store
        self._read_request = read_request
        self._on_finished = on_finished

    # ---- requests -------------------------------------------------------

    def on_request(self, term: ControllerTerm, _event: object = None) -> None:
        ctx = term.ctx
        wanted = self._read_request(PATH, azn.ReassignPartitionsZNode.decode,
                                    ev.PartitionReassignment(), "partition reassignment")
        if wanted is None:
            return
        rejected = []
        for tp, replicas in wanted.items():
            if tp in ctx.reassignments:
                if tuple(replicas) != ctx.reassignments[tp] and \
                        tuple(replicas) == ctx.reassignment_origins.get(tp):
                    if self._cancel(term, tp, tuple(replicas)):
                        rejected.append(tp)   # dropped: off the znode
                continue
            problem = self._problem(ctx, tp, tuple(replicas))
            if problem:
                log.error("Rejecting reassignment of partition %s to %s: %s", tp, list(replicas), problem)
                rejected.append(tp)
            else:
                ctx.reassignments[tp] = tuple(replicas)
                ctx.reassignment_origins[tp] = ctx.assignments[tp]
                log.info("Reassignment of partition %s from %s to %s requested", tp,
                         list(ctx.assignments[tp]), list(replicas))
        self._remove_from_znode(rejected)
        self.progress(term)

    @staticmethod
    def _cancel(term: ControllerTerm, tp: TopicPartition, origin: tuple[int, ...]) -> bool:
        """Turn ``tp``'s reassignment back to ``origin``; True if that drops it at once."""
        ctx = term.ctx
        log.info("Reassignment of partition %s to %s cancelled: back to %s", tp,
                 list(ctx.reassignments[tp]), list(origin))
        if origin == ctx.assignments[tp]:
            del ctx.reassignments[tp]
            ctx.reassignment_origins.pop(tp, None)
            term.reassignments_started.discard(tp)
            return True
        ctx.reassignments[tp] = origin
        return False

    @staticmethod
    def _problem(ctx: ControllerContext, tp: TopicPartition, replicas: tuple[int, ...]) -> str | None:
        if tp.topic not in ctx.topics:
            return f"topic {tp.topic} doesn't exist"
        if tp not in ctx.assignments:
            return "the partition doesn't exist"
        if tp.topic in ctx.deleting_topics:
            return f"topic {tp.topic} is being deleted"
        if not replicas or len(set(replicas)) != len(replicas) or min(replicas) < 0:
            return "the replica list is empty, has duplicates or negative ids"
        if replicas == ctx.assignments[tp]:
            return "it equals the current assignment"
        return None

    # ---- progress -----------------------------------------------------------

    def progress(self, term: ControllerTerm) -> None:
        """Advance every reassignment as far as it can go now (called on each relevant event)."""
        ctx = term.ctx
        finished = []
        for tp, rar in list(ctx.reassignments.items()):
            if tp not in ctx.states:
                continue
            unregistered = [b for b in rar if b not in ctx.live_brokers]
            if tp not in term.reassignments_started:
                if unregistered:
                    log.info("Reassignment of %s waits for brokers %s to register", tp, unregistered)
                    continue
                self._start(term, tp, rar)
            elif set(rar) <= set(ctx.states[tp].isr) and not unregistered and self._finish(term, tp, rar):
                finished.append(tp)
        if finished:
            self._remove_from_znode(finished)
            self._on_finished(term)

    def _start(self, term: ControllerTerm, tp: TopicPartition, rar: tuple[int, ...]) -> None:
        oar = term.ctx.assignments[tp]
        union = oar + tuple(r for r in rar if r not in oar)
        if union != oar:
            self._write_assignment(term.ctx, tp, union)
        # Epoch +1 with AR = OAR + RAR: the new replicas start following.
        term.change_states([tp], lambda tp_, cur: election.Outcome(
            LeaderAndIsr(cur.leader, cur.leader_epoch + 1, cur.isr, term.epoch),
            f"reassignment to {list(rar)} started: replicas {list(union)}"))
        term.reassignments_started.add(tp)

    def _finish(self, term: ControllerTerm, tp: TopicPartition, rar: tuple[int, ...]) -> bool:
        """Complete the reassignment; False while none of the new replicas can lead."""
        ctx = term.ctx
        old = [r for r in ctx.assignments[tp] if r not in rar]
        live = ctx.live_broker_ids
        state = ctx.states[tp]
        # The leader moves into RAR while AR still holds OAR + RAR (a leader from
        # OAR is legal until then).
        if state.leader not in rar or state.leader not in live:
            term.change_states([tp], lambda tp_, cur: election.reassignment_election(cur, rar, live,
                                                                                     term.epoch))
            state = ctx.states.get(tp)
            if state is None or state.leader not in rar or state.leader not in live:
                # Going on would shrink the ISR to RAR under a leader outside it and
                # delete the old replicas: wait for a new replica that can lead.
                log.info("Reassignment of partition %s waits: none of the new replicas %s can "
                         "lead (live, not shutting down, and in the ISR %s)", tp, list(rar),
                         list(state.isr) if state else "unknown")
                return False
        # Then AR := RAR and the ISR shrinks to it with a new epoch: the
        # LeaderAndIsr names only RAR, so old replicas cannot rejoin the ISR.
        ctx.set_assignment(tp, rar)
        term.change_states([tp], lambda tp_, cur: election.Outcome(
            LeaderAndIsr(cur.leader, cur.leader_epoch + 1, tuple(r for r in cur.isr if r in rar),
                         term.epoch), f"reassignment: old replicas {old} leave the ISR"))
        self._write_assignment(ctx, tp, rar)
        batch = term.new_batch()
        for b in old:
            batch.add_stop_replica([b], tp, delete=True)
        # Step 12: every broker's metadata shows the new replica list.
        batch.add_update_metadata(ctx.live_brokers, [PartitionStateInfo.of(tp, ctx.states[tp], rar)])
        batch.send(term.channel)
        term.reassignments_started.discard(tp)
        del ctx.reassignments[tp]
        ctx.reassignment_origins.pop(tp, None)
        log.info("Reassignment of partition %s to %s completed", tp, list(rar))
        return True

    def _write_assignment(self, ctx: ControllerContext, tp: TopicPartition,
                          replicas: tuple[int, ...]) -> None:
        ctx.set_assignment(tp, replicas)
        partitions = {p.partition: ctx.assignments[p] for p in ctx.partitions_of(tp.topic)}
        self.store.write_assignment(tp.topic, partitions)

    def _remove_from_znode(self, done: list[TopicPartition]) -> None:
        if not done:
            return
        try:
            current, _ = self.store.read_admin_znode(PATH, azn.ReassignPartitionsZNode.decode)
        except MalformedZnode:
            current = None
        remaining = {tp: r for tp, r in (current or {}).items() if tp not in done}
        if remaining:
            self.store.fenced_set(PATH, azn.ReassignPartitionsZNode.encode(remaining))
        elif current is not None:
            self.store.fenced_delete(PATH)
