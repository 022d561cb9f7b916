"""A leader's ISR writes through the simulated ZooKeeper, as scheduled steps instead of greenlets.

It follows ``kafka_ha.broker.isr_writer.IsrWriter._write`` step for step, with
the request, its application at ZooKeeper and the reply as separate events
(so a LeaderAndIsr can be handled while a write is on its way, as on a real
broker):

- changes of one partition queue behind each other (the partition's ISR lock),
  and each computes its new ISR from the partition's ISR when its turn comes;
- nothing is written when this broker no longer leads or the ISR would not change;
- the write is conditional on the partition's cached ``zk_version``; on a
  version conflict the znode is re-read: the same content means our earlier
  write went through (KAFKA-1382) and its version is adopted, anything else
  means the controller changed the partition, and the write is dropped;
- a ZooKeeper connection error drops the change ("will retry" by the next fetch
  or shrink check);
- on success the partition adopts the ISR and version (``Partition.set_isr``)
  and the controller hears of it through an ISR-change notification.

Keep it in step with the real writer when that changes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from kazoo.exceptions import BadVersionError, ConnectionLoss, KazooException

from kafka_ha.broker.partition import Partition

if TYPE_CHECKING:
    from tests.sim.broker import BrokerProcess


class SimIsrWriter:
    def __init__(self, process: BrokerProcess) -> None:
        self.process = process
        self._busy: set = set()                                  # partitions whose lock is held
        self._waiting: dict = {}                                 # tp -> queued writes

    # ---- the interface Partition uses --------------------------------------------

    def spawn_change(self, partition: Partition, new_isr: tuple[int, ...], reason: str,
                     on_done=None) -> None:
        self.change(partition, new_isr, reason, on_done)

    def change(self, partition: Partition, new_isr: tuple[int, ...], reason: str, on_done=None) -> bool:
        joining = [r for r in new_isr if r not in partition.isr]
        self._queue(partition, lambda isr: isr + tuple(r for r in joining if r not in isr), reason, on_done)
        return False     # the outcome comes later, through set_isr

    def remove(self, partition: Partition, leaving: list[int], reason: str) -> bool:
        self._queue(partition, lambda isr: tuple(r for r in isr if r not in leaving), reason, None)
        return False

    # ---- the write ---------------------------------------------------------------

    def _queue(self, partition: Partition, new_isr_from: Callable, reason: str, on_done) -> None:
        tp = partition.tp
        self._waiting.setdefault(tp, []).append((partition, new_isr_from, reason, on_done))
        self._pump(tp)

    def _pump(self, tp) -> None:
        if tp in self._busy or not self._waiting.get(tp):
            return
        partition, new_isr_from, reason, on_done = self._waiting[tp].pop(0)
        self._busy.add(tp)

        def finished() -> None:
            self._busy.discard(tp)
            if on_done is not None:
                on_done()
            self._pump(tp)
        world = self.process.world
        world.sched.spawn(self._write(partition, new_isr_from, reason, finished),
                          lambda: self.process.alive, f"B{self.process.broker_id} ISR write {tp}")

    def _write(self, partition: Partition, new_isr_from: Callable, reason: str, finished: Callable):
        world, proc = self.process.world, self.process
        try:
            old_isr = partition.isr
            new_isr = new_isr_from(old_isr)
            if not partition.is_leader or set(new_isr) == set(old_isr) or not new_isr:
                return
            desired = partition.state_for_zk(new_isr)
            cached = partition.zk_version
            try:
                version = yield world.zk_call(proc, lambda s: world.zk.set_state(
                    s, partition.tp, desired, cached, f"leader B{proc.broker_id}"),
                    f"set ISR {list(new_isr)} at version {cached}", may_lose_reply=True)
            except BadVersionError:
                try:
                    stored = yield world.zk_call(proc, lambda s: world.zk.get_state(s, partition.tp),
                                                 "re-read after a version conflict")
                except KazooException:
                    return
                if not stored.same_content(desired):
                    world.note(f"B{proc.broker_id}: Cached zkVersion [{cached}] not equal to that in "
                               f"zookeeper (version {stored.zk_version}), skip updating ISR")
                    return
                version = stored.zk_version
            except (ConnectionLoss, KazooException):
                world.note(f"B{proc.broker_id}: could not write ISR {list(new_isr)} (connection); will retry")
                return
            verb = "Expanding" if len(new_isr) > len(old_isr) else "Shrinking"
            world.note(f"B{proc.broker_id}: {verb} ISR of {partition.tp} from {list(old_isr)} to "
                       f"{list(new_isr)}: {reason}")
            partition.set_isr(tuple(new_isr), version)
            world.isr_change_notification(proc, partition.tp)
        finally:
            finished()
