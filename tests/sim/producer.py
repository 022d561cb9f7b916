"""An acks=all producer and the acknowledgements the leaders give it.

It sends small v2 batches, mostly to the leader ZooKeeper names, sometimes to
any broker (so a deposed leader that still believes it leads gets writes too).
The broker appends with the real ``Partition.append_as_leader``.  Whether a
write is acknowledged is decided after every step by the real
``Partition.wait_for_acks`` with a zero timeout, which answers at once: NONE
(the HW passed the batch while this broker still leads, without a truncation
since the append, and the ISR is large enough), an error, or "not yet".  A
real waiter wakes on the same conditions, no earlier than the step that made
them true, so checking after every step sees every acknowledgement a broker
could give.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_ha.broker.partition import AppendResult, Partition
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode, KafkaProtocolError, error_name
from kafka_ha.records import Record, build_v2_batch

if TYPE_CHECKING:
    from tests.sim.broker import BrokerProcess
    from tests.sim.world import World

ACK_TIMEOUT_MS = 1500        # the producer's request.timeout.ms, scaled down


@dataclass(frozen=True)
class Ack:
    tp: TopicPartition
    first_offset: int
    last_offset: int
    data: bytes                 # the entry as the leader stored it
    leader: int
    leader_epoch: int
    at_ms: int
    deposed: bool               # the leader's epoch was no longer ZooKeeper's when it acknowledged

    def __str__(self) -> str:
        who = "deposed leader" if self.deposed else "leader"
        return (f"offsets {self.first_offset}..{self.last_offset} of {self.tp}, acknowledged at "
                f"{self.at_ms} ms by {who} B{self.leader} in epoch {self.leader_epoch}")


@dataclass
class Pending:
    process: BrokerProcess
    partition: Partition
    result: AppendResult
    data: bytes
    sent_ms: int


class Producer:
    def __init__(self, world: World) -> None:
        self.world = world
        self.active = True
        self.sequence = 0
        self.pending: list[Pending] = []
        self.acked: list[Ack] = []
        self.appended = 0

    def start(self) -> None:
        self.world.sched.at(1, self._tick, "producer")

    def _tick(self) -> str | None:
        world = self.world
        if not self.active:
            return "producer stopped"
        world.sched.at(world.rng.randint(1, world.params.produce_interval_max_ms), self._tick, "producer")
        tp = world.rng.choice(sorted(world.assignments))
        state = world.zk_state(tp)
        if state is not None and state.leader >= 0 and world.rng.random() < 0.8:
            target = state.leader
        else:
            target = world.rng.choice(world.params.brokers)
        self.sequence += 1
        count = world.rng.randint(1, 3)
        batch = build_v2_batch([Record(None, f"s{world.params.seed}-m{self.sequence}-{i}".encode(),
                                       world.sched.wall_ms) for i in range(count)])
        world.net.request(None, target, lambda proc: self._append(proc, tp, batch),
                          lambda said: f"producer hears: {said}", lambda: "producer: no answer",
                          world.params.request_timeout_ms, f"Produce({tp}, {count} records)")
        return f"sends {count} records of {tp} to B{target}"

    def _append(self, proc: BrokerProcess, tp: TopicPartition, batch: bytes) -> str:
        p = proc.partition(tp)
        if p is None or not p.is_leader:
            return "NOT_LEADER_FOR_PARTITION"
        try:
            result = p.append_as_leader(batch, -1)
        except KafkaProtocolError as e:
            return error_name(e.code)
        data = p.log.read(result.first_offset, len(batch)).to_bytes()
        self.pending.append(Pending(proc, p, result, data, self.world.sched.now))
        self.appended += 1
        self.world.note(f"{proc} appended offsets {result.first_offset}..{result.last_offset} of {tp} "
                        f"in epoch {p.leader_epoch}")
        return f"appended at {result.first_offset}"

    def poll(self) -> list[Ack]:
        """Acknowledgements given since the last poll."""
        world, now, new = self.world, self.world.sched.now, []
        still = []
        for w in self.pending:
            if not w.process.alive or w.process.partition(w.partition.tp) is not w.partition:
                continue                               # the connection went with the process
            code = w.partition.wait_for_acks(w.result, 0)
            if code == ErrorCode.NONE:
                state = world.zk_state(w.partition.tp)
                deposed = state is None or state.leader_epoch != w.partition.leader_epoch
                ack = Ack(w.partition.tp, w.result.first_offset, w.result.last_offset, w.data,
                          w.process.broker_id, w.partition.leader_epoch, now, deposed)
                new.append(ack)
                self.acked.append(ack)
                world.note(f"ACK {ack}")
            elif code == ErrorCode.REQUEST_TIMED_OUT and now - w.sent_ms < ACK_TIMEOUT_MS:
                still.append(w)
        self.pending = still
        return new
