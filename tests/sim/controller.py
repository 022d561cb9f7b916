"""The active controller of one controller epoch, reduced to what replication needs.

Decisions are the project's pure election functions (``initial_state``,
``on_brokers_changed``, ``preferred_election``); the rest follows
``KafkaController`` and ``PartitionStateMachine``:

- events are handled one at a time, in order, on the controller's own queue;
- a broker change compares the registered brokers with the known ones; a
  broker gone or re-registered with a new czxid (bounced, KIP-380) is handled
  as failed, then a new or bounced one as started;
- decisions start from the cached states; each is written with a conditional
  write fenced by the controller epoch's version (a multi), a state left as it
  is gets a version check instead, and a version conflict of either re-reads
  the znode and decides again (at most 10 attempts, as the
  real state machine); a re-read that shows our own write is taken as written
  (KAFKA-1382), one written by a newer controller epoch ends this controller;
- the states it wrote go to the live replicas as LeaderAndIsr, and everyone
  live gets UpdateMetadata; per broker the requests travel in order, one at a
  time, and are retried until delivered while that broker stays live.

Every ZooKeeper read and write is a :class:`~tests.sim.world.ZkCall`: a step to
the server and a step back, so leaders' ISR writes interleave with it.
"""
from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable

from kazoo.exceptions import BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError, SessionExpiredError

from kafka_ha.broker.controller_requests import stale_broker_epoch
from kafka_ha.controller import election
from kafka_ha.model import LeaderAndIsr, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.partition_states import to_wire
from tests.sim.scheduler import Sleep
from tests.sim.zookeeper import ControllerFenced

if TYPE_CHECKING:
    from tests.sim.broker import BrokerProcess
    from tests.sim.world import World

MAX_ATTEMPTS = 10            # PartitionStateMachine.MAX_ATTEMPTS
RETRY_MS = 100


class SimController:
    def __init__(self, world: World, process: BrokerProcess, epoch: int, epoch_version: int) -> None:
        self.world = world
        self.process = process
        self.epoch = epoch
        self.epoch_version = epoch_version
        self.session = process.session          # the term's session: every request is bound to it
        self.active = True
        self.live: dict[int, int] = {}                          # broker -> czxid
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self.shutting_down: set[int] = set()
        self._queue: deque = deque()
        self._busy = False
        self._channels: dict[int, deque] = {}
        self._sending: set[int] = set()
        self._correlation = 0

    def __repr__(self) -> str:
        return f"controller B{self.process.broker_id} epoch {self.epoch}"

    def alive(self) -> bool:
        return self.active and self.process.alive

    def resign(self, why: str) -> None:
        if self.active:
            self.active = False
            self.world.note(f"{self} resigns: {why}")

    def idle(self) -> bool:
        """Nothing to handle and nothing on its way to a broker."""
        return not (self._busy or self._queue or self._sending or any(self._channels.values()))

    # ---- the event queue ------------------------------------------------------

    def enqueue(self, kind: str, arg: object = None) -> None:
        if self.alive():
            self._queue.append((kind, arg))
            self._pump()

    def _pump(self) -> None:
        if self._busy or not self._queue or not self.alive():
            return
        event = self._queue.popleft()
        self._busy = True

        def done() -> None:
            self._busy = False
            self._pump()
        self.world.sched.spawn(self._handle(event), self.alive, f"{self} {event[0]}", on_exit=done)

    def _handle(self, event):
        kind, arg = event
        try:
            yield from getattr(self, f"_on_{kind}")(arg)
        except (ControllerFenced, SessionExpiredError) as e:
            self.resign(f"{type(e).__name__} {e}")

    def _zk(self, fn: Callable, what: str):
        """A request of this controller's session, sent again after a connection loss until
        that session ends (``kafka_ha.zk.session_bound``); use with ``yield from``."""
        session = self.session
        while True:
            try:
                return (yield self.world.zk_call(self.process, lambda _current: fn(session), f"{self}: {what}"))
            except ConnectionLoss:
                yield Sleep(RETRY_MS)

    # ---- handlers ------------------------------------------------------------------

    def _on_failover(self, _arg):
        zk = self.world.zk
        self.live = yield from self._zk(zk.get_live_brokers, "read brokers")
        for tp, replicas in sorted(self.world.assignments.items()):
            try:
                self.states[tp] = yield from self._zk(lambda s, tp=tp: zk.get_state(s, tp), f"read {tp}")
            except NoNodeError:
                first = election.initial_state(replicas, set(self.live), self.epoch)
                if first is not None:
                    try:
                        version = yield from self._write(tp, first, -1)
                        self.states[tp] = first.with_zk_version(version)
                        self.world.note(f"{self} created {tp}: {_fmt(self.states[tp])}")
                    except NodeExistsError:      # our create whose reply was lost
                        self.states[tp] = yield from self._zk(lambda s, tp=tp: zk.get_state(s, tp),
                                                              f"read {tp}")
        self._send_all(self.states, to=set(self.live), metadata_to=set(self.live))
        offline = [tp for tp, s in sorted(self.states.items()) if s.leader not in self.live]
        written = yield from self._change(offline, self._decide_for(set(self.live)))
        self._send_all(written, to=set(self.live), metadata_to=set(self.live))

    def _on_brokers(self, _arg):
        zk = self.world.zk
        current = yield from self._zk(zk.get_live_brokers, "read brokers")
        dead = set(self.live) - set(current)
        new = set(current) - set(self.live)
        bounced = {b for b in set(self.live) & set(current) if self.live[b] != current[b]}
        if not (dead or new or bounced):
            return
        self.world.note(f"{self}: broker change: new {sorted(new)}, dead {sorted(dead)}, "
                        f"bounced {sorted(bounced)}")
        self.live = current
        self.shutting_down -= dead | new | bounced
        failed = dead | bounced
        if failed:
            affected = [tp for tp, r in sorted(self.world.assignments.items()) if failed & set(r)]
            live = set(current) - failed
            written = yield from self._change(affected, self._decide_for(live))
            self._send_all(written, to=live, metadata_to=live)
        started = new | bounced
        if started:
            # The new brokers learn everything; their replicas their current role.
            self._send_all(self.states, to=started, metadata_to=set(current))
            offline = [tp for tp, s in sorted(self.states.items()) if s.leader not in current]
            written = yield from self._change(offline, self._decide_for(set(current)))
            self._send_all(written, to=set(current), metadata_to=set(current))

    def _on_isr_change(self, tp: TopicPartition):
        zk = self.world.zk
        self.states[tp] = yield from self._zk(lambda s: zk.get_state(s, tp), f"re-read {tp}")
        self._send_all({}, to=set(), metadata_to=set(self.live), extra_metadata={tp: self.states[tp]})

    def _on_preferred(self, tp: TopicPartition):
        replicas = self.world.assignments[tp]
        written = yield from self._change(
            [tp], lambda _tp, cur: election.preferred_election(cur, replicas, set(self.live), self.epoch))
        self._send_all(written, to=set(self.live), metadata_to=set(self.live))

    def _on_controlled_shutdown(self, broker: int):
        """A broker asks to shut down: its leaderships move to other live ISR members and it
        leaves the ISRs (election.controlled_shutdown_election); then it stops."""
        self.shutting_down.add(broker)
        affected = [tp for tp, r in sorted(self.world.assignments.items()) if broker in r]
        decide = lambda tp, cur: election.controlled_shutdown_election(  # noqa: E731
            cur, self.world.assignments[tp], set(self.live), self.shutting_down, self.epoch)
        written = yield from self._change(affected, decide)
        self._send_all(written, to=set(self.live), metadata_to=set(self.live))
        self.world.controlled_shutdown_answered(broker)

    def _on_moved(self, _arg):
        owner, epoch = yield from self._zk(self.world.zk.get_controller, "read /controller")
        if owner is None or epoch != self.epoch:
            self.resign(f"/controller is now {owner} with controller epoch {epoch}")

    # ---- state changes (PartitionStateMachine.change) ------------------------------

    def _decide_for(self, live: set[int]):
        def decide(tp: TopicPartition, current: LeaderAndIsr) -> election.Outcome:
            return election.on_brokers_changed(current, self.world.assignments[tp], live,
                                               self.world.params.unclean, self.epoch)
        return decide

    def _write(self, tp: TopicPartition, state: LeaderAndIsr, version: int):
        zk, epoch_version = self.world.zk, self.epoch_version
        return self._zk(lambda s: zk.controller_write(s, epoch_version, tp, state, version, repr(self)),
                        f"write {tp} {_fmt(state)} at version {version}")

    def _check(self, tp: TopicPartition, version: int):
        zk, epoch_version = self.world.zk, self.epoch_version
        return self._zk(lambda s: zk.controller_check(s, epoch_version, tp, version),
                        f"check {tp} is at version {version}")

    def _change(self, tps: list[TopicPartition], decide):
        zk = self.world.zk
        pending = {tp: self.states[tp] for tp in tps if tp in self.states}
        written: dict[TopicPartition, LeaderAndIsr] = {}
        for attempt in range(1, MAX_ATTEMPTS + 1):
            conflicts = []
            for tp, current in sorted(pending.items()):
                outcome = decide(tp, current)
                if outcome.decision is None:
                    # Left as it is, but only if the cached version is current: leaders change
                    # ISRs on their own, and a stale cache must be re-read and decided again.
                    try:
                        yield from self._check(tp, current.zk_version)
                    except BadVersionError:
                        conflicts.append((tp, None))
                    continue
                try:
                    version = yield from self._write(tp, outcome.decision, current.zk_version)
                except BadVersionError:
                    conflicts.append((tp, outcome.decision))
                    continue
                self.states[tp] = written[tp] = outcome.decision.with_zk_version(version)
                self.world.note(f"{self} changed {tp} to {_fmt(written[tp])}: {outcome.reason}")
            pending = {}
            for tp, decision in conflicts:
                stored = yield from self._zk(lambda s, tp=tp: zk.get_state(s, tp), f"re-read {tp}")
                if stored.controller_epoch > self.epoch:
                    raise ControllerFenced(f"{tp} was written by controller epoch {stored.controller_epoch}")
                self.states[tp] = stored
                if decision is not None and stored.same_content(decision):
                    written[tp] = stored              # our write went through (KAFKA-1382)
                else:
                    pending[tp] = stored
            if not pending:
                break
            self.world.note(f"{self}: {len(pending)} states changed underneath (attempt {attempt})")
        else:
            self.world.note(f"{self}: gave up on {sorted(pending)} after {MAX_ATTEMPTS} attempts")
        return written

    # ---- requests to brokers ------------------------------------------------------------

    def _send_all(self, states: dict, to: set[int], metadata_to: set[int],
                  extra_metadata: dict | None = None) -> None:
        infos = {tp: PartitionStateInfo.of(tp, s, self.world.assignments[tp]) for tp, s in states.items()}
        for b in sorted(to):
            mine = [to_wire(i) for tp, i in sorted(infos.items()) if b in i.replicas]
            if mine:
                self._send(b, "LeaderAndIsr", {"partition_states": mine, "live_leaders": [
                    {"id": i.leader, "host": "sim", "port": 9000 + i.leader}
                    for _, i in sorted(infos.items()) if i.leader >= 0]})
        meta = {**infos, **{tp: PartitionStateInfo.of(tp, s, self.world.assignments[tp])
                            for tp, s in (extra_metadata or {}).items()}}
        live = [{"id": b, "host": "sim", "port": 9000 + b} for b in sorted(self.live)]
        for b in sorted(metadata_to):
            self._send(b, "UpdateMetadata", {"live_brokers": live,
                                             "partition_states": [to_wire(i) for _, i in sorted(meta.items())]})

    def _send(self, broker: int, kind: str, body: dict) -> None:
        self._correlation += 1
        body = {"controller_id": self.process.broker_id, "controller_epoch": self.epoch,
                "broker_epoch": self.live.get(broker, -1), **body}
        self._channels.setdefault(broker, deque()).append((kind, body, self._correlation))
        self._drain(broker)

    def _drain(self, broker: int) -> None:
        """Send the head of the channel; the next one goes once it is delivered."""
        queue = self._channels.get(broker)
        if broker in self._sending or not queue:
            return
        if not self.alive() or broker not in self.live:
            queue.clear()                  # the real channel is removed with the broker
            return
        self._sending.add(broker)
        kind, body, correlation = queue[0]
        world = self.world

        def deliver() -> str:
            self._sending.discard(broker)
            target = world.process_of(broker)
            cut = frozenset((self.process.broker_id, broker)) in world.net.params.cut
            if target is None or cut:
                world.sched.at(RETRY_MS, lambda: self._drain(broker), f"{self} retries B{broker}")
                return f"{kind} to B{broker} not delivered; will retry"
            # KIP-380, as the broker's request guard: it waits until it has registered,
            # and refuses a request addressed to an older registration of its id.
            addressed = body["broker_epoch"]
            if addressed >= 0 and target.broker_epoch < 0:
                world.sched.at(RETRY_MS, lambda: self._drain(broker), f"{self} retries B{broker}")
                return f"{kind} to {target} waits: not registered yet"
            queue.popleft()
            if stale_broker_epoch(addressed, target.broker_epoch):
                world.stats["requests refused for an older broker epoch"] += 1
                self._drain(broker)
                return (f"{target} refuses {kind} with STALE_BROKER_EPOCH: addressed to broker epoch "
                        f"{addressed}, its own is {target.broker_epoch}")
            if kind == "LeaderAndIsr":
                answer = target.rm.leader_and_isr(body, correlation)
                errors = [e["error_code"] for e in answer["partition_errors"]]
                states = [_fmt_wire(s) for s in body["partition_states"]]
                said = f"LeaderAndIsr {states} -> {errors or answer['error_code']}"
            else:
                target.metadata.update(body, 0, correlation)
                said = f"UpdateMetadata live {[b['id'] for b in body['live_brokers']]}"
            self._drain(broker)
            return f"B{broker} handles {said} from controller epoch {body['controller_epoch']}"
        world.sched.at(world.net.delay(broker, control=True, src=self.process.broker_id), deliver,
                       f"{self} -> B{broker} {kind}")


def _fmt(s: LeaderAndIsr) -> str:
    return f"(leader {s.leader}, epoch {s.leader_epoch}, isr {list(s.isr)}, v{s.zk_version})"


def _fmt_wire(s: dict) -> str:
    return f"{s['topic']}-{s['partition']}: leader {s['leader']} epoch {s['leader_epoch']} isr {s['isr']}"
