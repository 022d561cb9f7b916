"""The invariants checked after every step, and what "converged" means at the end.

Terms.  The *established leader* of a partition is the live broker whose
Partition leads at exactly the leader epoch ZooKeeper's state names, with
ZooKeeper naming it leader.  An *acknowledged* record is one a leader answered
acks=all for (:mod:`tests.sim.producer`).  A broker is *amnesiac* from a power
loss that cut unflushed data from its log until it is in no ISR any more
(neither ZooKeeper's nor a leading replica's): Kafka does not fsync, so such a
replica's log is not what it acknowledged to its leader, and Kafka keeps data
safe only as long as one in-sync replica keeps its log (the fault injector
never lets an amnesiac replica be the one).  Amnesiac replicas are left out of
the per-member checks below; a replica that rejoins an ISR afterwards is
checked again.

1. Committed prefix: every acknowledged record is in the established leader's
   log at its offset, byte for byte, after every step.  (A new leader learns
   the HW from its followers' fetches, KAFKA-2334, so "below the HW" is
   checked once the replicas converge, see 5.)
2. ISR agreement: every live, non-amnesiac member of the ISR in ZooKeeper (the
   one elections pick from) holds the established leader's bytes of every entry
   below the leader's HW.  (The leader's own copy of the ISR only makes its HW
   more cautious, and may come from a stale LeaderAndIsr, e.g. after a restart
   whose HW came back from the checkpoint; what it acknowledges is checked by 1
   and 4.)
3. Monotonic epochs and HW: ZooKeeper's leader epoch of a partition never goes
   down; a broker process's leader epoch of a partition never goes down; while
   a broker process leads a partition without interruption, its HW never goes
   down (a new leader may start below its predecessor's HW, KAFKA-2334).
4. A deposed leader's acknowledgements never count: whenever any leader
   acknowledges, deposed or not, every non-amnesiac ISR member that ZooKeeper
   names at that moment already holds the record at its offset (in its log,
   or in its files if it is down).  An
   acknowledgement by a leader whose epoch ZooKeeper has replaced therefore
   only ever covers a record the new leadership keeps; it is also subject to 1.
5. Convergence: once faults stop (all brokers up and connected, no loss, no
   cut links), all replicas end with identical logs, HW = LEO everywhere, the
   ISR holding every replica, and every acknowledged record below the HW.
6. Truncation (an early form of 2 and 5): when a follower has finished
   truncating against the established leader of its own leader epoch, its
   log is a prefix of the leader's, byte for byte.  (Logs that hold the same
   epoch at the same offset hold the same records; that is what KIP-101/279
   truncation relies on.)

With unclean leader election enabled (a quarter of the seeds), a replica
outside the ISR may be elected and acknowledged records may be lost: Kafka
promises nothing else then.  Those runs check 2, 3 and 5 but not 1 and 4, and
not the "acknowledged records below the HW" part of 5: the replicas must still
agree with their leader and converge, which is what a follower that keeps a
divergent suffix breaks.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kafka_ha.model import TopicPartition
from kafka_ha.records.shallow import iter_entries
from tests.sim.broker import BrokerProcess, log_bytes
from tests.sim.producer import Ack

if TYPE_CHECKING:
    from tests.sim.world import World


def _epochs(log) -> str:
    return " ".join(f"{e.epoch}@{e.start_offset}" for e in log.epoch_cache.entries()) or "-"


class Violation(Exception):
    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(f"{invariant}: {message}")
        self.invariant, self.message = invariant, message


class LogView:
    """A replica's log as bytes, with the byte range of each entry by first offset."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.entries: dict[int, tuple[int, int, int]] = {}      # first offset -> (start, end, last)
        self.ordered: list[tuple[int, int, int, int]] = []      # (first, last, start, end)
        for e in iter_entries(data):
            first = e.first_offset if e.first_offset is not None else e.last_offset
            self.entries[first] = (e.position, e.position + e.size, e.last_offset)
            self.ordered.append((first, e.last_offset, e.position, e.position + e.size))

    def entry(self, first_offset: int) -> bytes | None:
        span = self.entries.get(first_offset)
        return None if span is None else self.data[span[0]:span[1]]

    def prefix_end(self, offset: int) -> int:
        """Bytes of the entries wholly below ``offset``."""
        end = 0
        for _, last, _, stop in self.ordered:
            if last >= offset:
                break
            end = stop
        return end

    def first_offset_at(self, position: int) -> int:
        for first, _, start, stop in self.ordered:
            if start <= position < stop:
                return first
        return -1


class Checker:
    def __init__(self, world: World) -> None:
        self.world = world
        self.zk_epochs: dict[TopicPartition, int] = {}
        self.replica_epochs: dict[tuple[int, int, TopicPartition], int] = {}
        self.leading_hw: dict[tuple[int, int, TopicPartition], int] = {}
        self.amnesiac: dict[int, set[TopicPartition]] = {}
        self.forgetful_processes: dict[int, list] = {}   # the processes that lost data, per broker
        self.acked: list[Ack] = []
        self.deposed_acks = 0
        self._views: dict[tuple, LogView] = {}
        world.on_state_written.append(self._on_zk_write)
        world.on_crash.append(self._on_crash)
        world.on_truncated.append(self._on_truncated)

    # ---- hooks -----------------------------------------------------------------------

    def _on_zk_write(self, tp: TopicPartition, state, writer: str) -> None:
        last = self.zk_epochs.get(tp, -1)
        if state.leader_epoch < last:
            raise Violation("3 epochs", f"ZooKeeper's leader epoch of {tp} went from {last} to "
                                        f"{state.leader_epoch} (written by {writer})")
        self.zk_epochs[tp] = state.leader_epoch

    def _on_crash(self, proc: BrokerProcess, lost: dict) -> None:
        if lost:
            self.amnesiac.setdefault(proc.broker_id, set()).update(lost)
            self.forgetful_processes.setdefault(proc.broker_id, []).append(proc)

    def _on_truncated(self, follower: BrokerProcess, tp: TopicPartition, leader_id: int) -> None:
        leader = self.established_leader(tp)
        fp = follower.partition(tp)
        if leader is None or leader.broker_id != leader_id or fp is None \
                or leader.partition(tp).leader_epoch != fp.leader_epoch:
            return                        # it truncated against a leader that is not (yet) established
        mine, theirs = self.view(follower, tp), self.view(leader, tp)
        if theirs.data[:len(mine.data)] != mine.data:
            at = next(i for i in range(len(mine.data))
                      if i >= len(theirs.data) or mine.data[i] != theirs.data[i])
            raise Violation("6 truncation", f"{follower} finished truncating against leader {leader} "
                            f"(epoch {fp.leader_epoch}) at LEO {fp.log.log_end_offset}, but its log differs "
                            f"from the leader's from the entry at offset {mine.first_offset_at(at)} "
                            f"(epochs: follower {_epochs(fp.log)}, leader {_epochs(leader.partition(tp).log)})")

    def is_amnesiac(self, broker: int, tp: TopicPartition) -> bool:
        return tp in self.amnesiac.get(broker, ())

    # ---- views -------------------------------------------------------------------

    def view(self, proc: BrokerProcess, tp: TopicPartition) -> LogView | None:
        p = proc.partition(tp)
        lg = p.log if p is not None else proc.log_manager.get_log(tp)
        if lg is None:
            return None
        key = (proc.broker_id, proc.number, tp, lg.log_start_offset, lg.log_end_offset,
               p.truncations if p is not None else -1)
        if key not in self._views:
            if len(self._views) > 64:
                self._views.clear()
            self._views[key] = LogView(log_bytes(lg.dir))
        return self._views[key]

    def disk_view(self, broker: int, tp: TopicPartition) -> LogView | None:
        """The log a broker that is down left in its directory."""
        path = os.path.join(self.world.base_dir, f"b{broker}", f"{tp.topic}-{tp.partition}")
        return LogView(log_bytes(path)) if os.path.isdir(path) else None

    def established_leader(self, tp: TopicPartition) -> BrokerProcess | None:
        state = self.world.zk_state(tp)
        if state is None or state.leader < 0:
            return None
        proc = self.world.process_of(state.leader)
        p = proc.partition(tp) if proc is not None else None
        if p is None or not p.is_leader or p.leader_epoch != state.leader_epoch:
            return None
        return proc

    def holds_all_acks(self, proc: BrokerProcess, tp: TopicPartition) -> bool:
        view = self.view(proc, tp)
        return view is not None and all(view.entry(a.first_offset) == a.data for a in self.acked if a.tp == tp)

    # ---- after every step ------------------------------------------------------------

    def after_step(self, new_acks: list[Ack]) -> None:
        world = self.world
        for ack in new_acks:
            self._check_ack(ack)
            self.acked.append(ack)
        for tp in sorted(world.assignments):
            for proc in world.up():
                self._check_monotonic(proc, tp)
            leader = self.established_leader(tp)
            if leader is not None:
                self._check_leader(leader, tp)
            self._forget_amnesia(tp)

    def _check_ack(self, ack: Ack) -> None:
        if ack.deposed:
            self.deposed_acks += 1
        if self.world.params.unclean:
            return
        state = self.world.zk_state(ack.tp)
        for member in state.isr if state is not None else ():
            if self.is_amnesiac(member, ack.tp):
                continue
            proc = self.world.process_of(member)
            # A member that is down (a crash keeps what was written) counts with its files.
            view = self.view(proc, ack.tp) if proc is not None else self.disk_view(member, ack.tp)
            if view is None or view.entry(ack.first_offset) != ack.data:
                raise Violation("4 acknowledgement", f"{ack}, but ISR member B{member} (ZooKeeper: "
                                f"leader {state.leader} epoch {state.leader_epoch} isr {list(state.isr)}) "
                                f"does not hold it at offset {ack.first_offset}")

    def _check_monotonic(self, proc: BrokerProcess, tp: TopicPartition) -> None:
        p = proc.partition(tp)
        if p is None:
            return
        key = (proc.broker_id, proc.number, tp)
        last = self.replica_epochs.get(key, -1)
        if p.leader_epoch < last:
            raise Violation("3 epochs", f"{proc}'s leader epoch of {tp} went from {last} to {p.leader_epoch}")
        self.replica_epochs[key] = p.leader_epoch
        if p.is_leader:
            last_hw = self.leading_hw.get(key)
            if last_hw is not None and p.high_watermark < last_hw:
                raise Violation("3 high watermark", f"leader {proc}'s HW of {tp} went from {last_hw} to "
                                                    f"{p.high_watermark} (epoch {p.leader_epoch})")
            self.leading_hw[key] = p.high_watermark
        else:
            self.leading_hw.pop(key, None)

    def _check_leader(self, leader: BrokerProcess, tp: TopicPartition) -> None:
        p = leader.partition(tp)
        view = self.view(leader, tp)
        for ack in self.acked if not self.world.params.unclean else ():
            if ack.tp == tp and view.entry(ack.first_offset) != ack.data:
                raise Violation("1 committed prefix", f"{ack} is not in the log of the leader {leader} "
                                f"(epoch {p.leader_epoch}, LEO {p.log.log_end_offset}) at offset "
                                f"{ack.first_offset}")
        state = self.world.zk_state(tp)
        members = set(state.isr)          # the ISR elections use (the leader's own copy may be stale)
        end = view.prefix_end(p.high_watermark)
        for member in sorted(members - {leader.broker_id}):
            proc = self.world.process_of(member)
            if proc is None or self.is_amnesiac(member, tp):
                continue
            other = self.view(proc, tp)
            theirs = other.data[:end] if other is not None else b""
            if theirs != view.data[:end]:
                at = next((i for i in range(min(len(theirs), end)) if theirs[i] != view.data[i]),
                          min(len(theirs), end))
                raise Violation("2 ISR agreement", f"ISR member {proc} differs from leader {leader} below "
                                f"the HW {p.high_watermark} of {tp}: from the entry at offset "
                                f"{view.first_offset_at(at)} (byte {at}; it has {len(theirs)} of the "
                                f"{end} bytes below the HW)")

    def _forget_amnesia(self, tp: TopicPartition) -> None:
        """An amnesiac broker counts again once it is in no ISR of the partition."""
        state = self.world.zk_state(tp)
        for broker in [b for b, tps in self.amnesiac.items() if tp in tps]:
            # A fetch the lost process sent before the power went may still arrive and
            # bring it into an ISR with what it no longer has (seed 828).
            if any(self.world.net.in_flight.get(proc, 0) for proc in self.forgetful_processes[broker]):
                continue
            in_isr = state is not None and broker in state.isr
            for proc in self.world.up():
                p = proc.partition(tp)
                # A leader's ISR expansion that is still being written counts: it was
                # decided on fetches the broker made before it lost its unflushed data,
                # and lands in ZooKeeper after (seed 828).
                in_isr |= p is not None and p.is_leader and (broker in p.isr or broker in p.joining)
            if not in_isr:
                self.amnesiac[broker].discard(tp)
                if not self.amnesiac[broker]:
                    del self.amnesiac[broker]
                    del self.forgetful_processes[broker]

    # ---- the end ------------------------------------------------------------------

    def not_converged(self) -> str | None:
        """Why the replicas have not converged yet (None: they have)."""
        world = self.world
        for b in world.params.brokers:
            proc = world.process_of(b)
            if proc is None or not proc.zk_connected or proc.broker_epoch < 0:
                return f"B{b} is not up and registered"
        for tp, replicas in sorted(world.assignments.items()):
            leader = self.established_leader(tp)
            if leader is None:
                return f"{tp} has no established leader"
            p = leader.partition(tp)
            state = world.zk_state(tp)
            if sorted(p.isr) != sorted(replicas) or sorted(state.isr) != sorted(replicas):
                return f"{tp}: ISR is {list(p.isr)} (ZooKeeper {list(state.isr)}), not all replicas"
            view = self.view(leader, tp)
            for b in replicas:
                fp = world.process_of(b).partition(tp)
                leo = p.log.log_end_offset
                if fp is None or fp.log.log_end_offset != leo or fp.high_watermark != leo:
                    return (f"{tp}: B{b} is at LEO {fp and fp.log.log_end_offset}, HW "
                            f"{fp and fp.high_watermark}; leader LEO {leo}")
                if self.view(world.process_of(b), tp).data != view.data:
                    return f"{tp}: B{b}'s log differs from the leader's"
            for ack in self.acked if not world.params.unclean else ():
                if ack.tp == tp and ack.last_offset >= p.high_watermark:
                    return f"{ack} is not below the HW {p.high_watermark}"
        return None
