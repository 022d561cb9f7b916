"""The project's real ``IsrWriter``, with its ZooKeeper calls and sleeps on the simulated clock.

A leader's ISR writes are the real ``kafka_ha.broker.isr_writer.IsrWriter``
(conditional write on the cached zkVersion, the re-read after a conflict, what
it does when the answer is lost, the partition's ISR lock), so a change there
is what the simulation tests.  It runs on greenlets, as on a broker, but the
greenlets only ever run when the simulation lets them: each ZooKeeper call
(:class:`SimBrokerStore`) and each ``gevent.sleep`` of the writer blocks its greenlet until a scheduled event answers it, and after every step the
simulation runs every greenlet that can run until all are blocked again
(``gevent.idle``), in gevent's deterministic FIFO order.  No real timer or
socket is involved, so a seed still replays exactly.

The writer's own notification loop is not run: an ISR change it records
(``_record``) reaches the controller as a simulated ISR-change notification.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import gevent
from gevent.event import AsyncResult

from kafka_ha.broker.isr_writer import IsrWriter
from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.zk import znodes as zn
from kafka_ha.zk.errors import translated_error

if TYPE_CHECKING:
    from tests.sim.broker import BrokerProcess
    from tests.sim.world import World


def _path(tp: TopicPartition) -> str:
    return zn.TopicPartitionStateZNode.path(*tp)


class SimBrokerStore:
    """The part of ``kafka_ha.zk.broker_store.BrokerStore`` that ``IsrWriter`` uses, against the
    simulated ZooKeeper.  As the real store (through ``MappedClient``), it encodes and decodes
    the state znode with the project's codec and raises the project's errors
    (``kafka_ha.zk.errors``: ZkBadVersion, ZkNoNode, ZkConnectionLost...)."""

    def __init__(self, world: World, process: BrokerProcess) -> None:
        self.world = world
        self.process = process

    @property
    def connected(self) -> bool:
        return self.process.alive and self.process.zk_connected

    def write_partition_state(self, tp: TopicPartition, state: LeaderAndIsr, version: int) -> int:
        zk, writer = self.world.zk, f"leader B{self.process.broker_id}"
        data = zn.TopicPartitionStateZNode.encode(state)
        return self._call(lambda s: zk.set_raw(s, tp, data, version, writer),
                          f"set {_path(tp)} at version {version}", may_lose_reply=True)

    def partition_state(self, tp: TopicPartition) -> LeaderAndIsr:
        data, version = self._call(lambda s: self.world.zk.get_raw(s, tp), f"get {_path(tp)}")
        return zn.TopicPartitionStateZNode.decode(data, _path(tp), zk_version=version)

    def notify_isr_change(self, partitions) -> str:
        raise AssertionError("not used: SimIsrWriter._record notifies the controller")

    def _call(self, fn: Callable[[int], Any], what: str, may_lose_reply: bool = False) -> Any:
        answer = AsyncResult()
        self.process.greenlets.add(gevent.getcurrent())

        def reply(result: Any) -> None:
            if isinstance(result, BaseException):
                answer.set_exception(translated_error(result))
            else:
                answer.set(result)
        self.world.zk_request(self.process, fn, what, may_lose_reply, reply)
        return answer.get()


class SimGevent:
    """What ``kafka_ha.broker.isr_writer`` sees as ``gevent`` during a run: its sleeps
    wait for simulated time, and its greenlets belong to the writer's broker process."""

    def __init__(self, world: World) -> None:
        self._world = world

    def spawn(self, fn: Callable, *args: Any) -> gevent.Greenlet:
        greenlet = gevent.spawn(fn, *args)
        owner = getattr(getattr(fn, "__self__", None), "process", None)
        if owner is not None:
            self._world.watch_greenlet(greenlet, owner)
        return greenlet

    def sleep(self, seconds: float) -> None:
        woken = AsyncResult()
        self._world.sched.at(int(seconds * 1000), lambda: woken.set(None), "ISR writer wakes up")
        woken.get()

    def __getattr__(self, name: str) -> Any:
        return getattr(gevent, name)


class SimIsrWriter(IsrWriter):
    def __init__(self, process: BrokerProcess) -> None:
        self.process = process                   # before the base class spawns anything
        super().__init__(SimBrokerStore(process.world, process), process.broker_id)
        self._notifier.kill(block=False)         # notifications: see _record

    def _record(self, tp: TopicPartition) -> None:
        self.process.world.isr_change_notification(self.process, tp)
