"""The simulated cluster: three broker processes, ZooKeeper, the network, the controller, a producer.

The world owns the lifecycles the faults act on (start, crash, restart,
ZooKeeper disconnection and session expiry, controller election) and the
periodic tasks a broker runs (ISR shrink check, high-watermark and
recovery-point checkpoints, flushes).  :mod:`tests.sim.simulation` drives it
step by step and checks the invariants after every step.
"""
from __future__ import annotations

import collections
import os
from typing import Any, Callable

import gevent
from kazoo.exceptions import ConnectionLoss, NodeExistsError, SessionExpiredError

from kafka_ha.log.config import LogConfig
from kafka_ha.model import LeaderAndIsr, TopicPartition
from tests.sim.broker import BrokerProcess
from tests.sim.controller import SimController
from tests.sim.network import SimNetwork
from tests.sim.params import SimParams
from tests.sim.scheduler import Process, Scheduler, Sleep
from tests.sim.zookeeper import SimZooKeeper

TOPIC = "sim"
REGISTER_RETRY_MS = 100


class ZkCall:
    """One ZooKeeper request of a broker process, as a scheduler operation (see ``World.zk_request``)."""

    def __init__(self, world: World, process: BrokerProcess, fn: Callable[[int], Any], what: str,
                 may_lose_reply: bool) -> None:
        self.world, self.process, self.fn, self.what = world, process, fn, what
        self.may_lose_reply = may_lose_reply

    def start(self, proc: Process) -> None:
        self.world.zk_request(self.process, self.fn, self.what, self.may_lose_reply, proc.resume)


class World:
    def __init__(self, params: SimParams, base_dir: str) -> None:
        self.params = params
        self.base_dir = base_dir
        self.sched = Scheduler(params.seed)
        self.rng = self.sched.rng
        self.zk = SimZooKeeper(self._brokers_changed, self._controller_gone, self._state_written)
        self.net = SimNetwork(self.sched, params.network, self.process_of)
        self.log_config = LogConfig(segment_bytes=params.segment_bytes, retention_ms=-1,
                                    flush_messages=params.flush_messages, index_interval_bytes=256)
        brokers = params.brokers
        self.assignments = {TopicPartition(TOPIC, i): tuple(brokers[(i + k) % len(brokers)]
                                                             for k in range(len(brokers)))
                            for i in range(params.partitions)}
        self.processes: dict[int, BrokerProcess | None] = {b: None for b in brokers}
        self.incarnations = {b: 0 for b in brokers}
        self.controller: SimController | None = None
        self.notes: list[str] = []
        self.on_state_written: list[Callable[[TopicPartition, LeaderAndIsr, str], None]] = []
        self.on_truncated: list[Callable[[BrokerProcess, TopicPartition, int], None]] = []
        self.on_crash: list[Callable[[BrokerProcess, dict], None]] = []
        self.greenlet_errors: list[str] = []
        self.stats: collections.Counter = collections.Counter()   # how often interesting cases came up

    # ---- helpers -----------------------------------------------------------------

    def note(self, text: str) -> None:
        self.notes.append(text)

    def process_of(self, broker: int) -> BrokerProcess | None:
        p = self.processes.get(broker)
        return p if p is not None and p.alive else None

    def up(self) -> list[BrokerProcess]:
        return [p for b in self.params.brokers if (p := self.process_of(b)) is not None]

    def zk_call(self, process: BrokerProcess, fn: Callable[[int], Any], what: str,
                may_lose_reply: bool = False) -> ZkCall:
        return ZkCall(self, process, fn, what, may_lose_reply)

    def zk_request(self, me: BrokerProcess, fn: Callable[[int], Any], what: str, may_lose_reply: bool,
                   reply_to: Callable[[Any], Any]) -> None:
        """Send ``fn(session)`` to ZooKeeper for ``me``; ``reply_to(result or exception)`` later.

        The request reaches the server after a short delay and is applied there;
        the answer comes back after another.  A broker cut off from ZooKeeper
        gets ConnectionLoss and nothing is applied; one that loses the connection
        while the request is out gets ConnectionLoss although the request may
        have been applied (as with a lost reply, which the zk-reply-loss fault
        also injects).  Nothing is answered to a process that died.
        """
        latency = lambda: self.rng.randint(0, self.params.zk_latency_max_ms)  # noqa: E731

        def answer(result: Any) -> Callable[[], Any]:
            return lambda: reply_to(result) if me.alive else "caller is gone"
        if not me.zk_connected:
            self.sched.at(latency(), answer(ConnectionLoss()), f"{me} ZooKeeper: not connected")
            return
        session = me.session

        def arrive() -> str:
            if not me.zk_connected:
                self.sched.at(latency(), answer(ConnectionLoss()), f"{me} ZooKeeper: connection lost")
                return f"{what}: not applied (disconnected)"
            try:
                result: Any = fn(session)
                said = f"{what}: done"
            except Exception as e:          # the request's outcome, delivered to the caller
                result, said = e, f"{what}: {type(e).__name__}"
            p = self.params.zk_reply_loss
            lose = may_lose_reply and p > 0 and self.rng.random() < p

            def reply() -> Any:
                if lose or not me.zk_connected:
                    return answer(ConnectionLoss())()
                return answer(result)()
            self.sched.at(latency(), reply, f"{me} ZooKeeper reply{' (lost)' if lose else ''}")
            return said
        self.sched.at(latency(), arrive, f"{me} ZooKeeper: {what}")

    def spawn_for(self, proc: BrokerProcess, task: Callable[[], Any]) -> None:
        """Run ``task`` on a greenlet of ``proc`` (it may block on ZooKeeper, as the broker's
        periodic tasks do); it runs when the step ends (``drain``)."""
        self.watch_greenlet(gevent.spawn(task), proc)

    def watch_greenlet(self, greenlet: gevent.Greenlet, proc: BrokerProcess) -> None:
        """An exception that ends a broker greenlet is a finding: it stops the run."""
        proc.greenlets.add(greenlet)
        greenlet.link_exception(lambda g: self.greenlet_errors.append(f"{proc}: {g.exception!r}"))

    @staticmethod
    def drain() -> None:
        """Let every greenlet that can run, run, until all wait for a simulated event again."""
        gevent.idle()

    def idle_fetch_delay(self) -> int:
        """An empty fetch answer: the follower's next fetch (a long poll, shortened)."""
        return self.rng.randint(1, self.params.idle_fetch_max_ms)

    def zk_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        return self.zk.read_state(tp) if tp in self.zk.states else None

    def _state_written(self, tp: TopicPartition, state: LeaderAndIsr, writer: str) -> None:
        self.note(f"ZooKeeper: {tp} state is now leader {state.leader} epoch {state.leader_epoch} "
                  f"isr {list(state.isr)} v{state.zk_version} (by {writer})")
        for hook in self.on_state_written:
            hook(tp, state, writer)
        if "controller" in writer:
            self.stats["leader epochs"] += 1

    # ---- broker lifecycle ------------------------------------------------------------

    def start_broker(self, broker: int) -> str:
        if self.process_of(broker) is not None:
            return f"B{broker} is already up"
        self.incarnations[broker] += 1
        proc = BrokerProcess(self, broker, self.incarnations[broker], os.path.join(self.base_dir, f"b{broker}"))
        self.processes[broker] = proc
        p = self.params
        self._every(proc, p.shrink_check_ms, lambda: self.spawn_for(proc, proc.rm._shrink_isrs),
                    "ISR shrink check")
        self._every(proc, p.hw_checkpoint_ms, proc.rm.checkpoint_high_watermarks, "HW checkpoint")
        self._every(proc, p.recovery_checkpoint_ms, proc.rm.checkpoint_recovery_points,
                    "recovery-point checkpoint")
        if p.flush_interval_ms is not None:
            self._every(proc, p.flush_interval_ms, proc.log_manager.flush_all, "flush")
        self._register(proc)
        logs = [(str(tp), lg.log_end_offset) for tp, lg in sorted(proc.log_manager.all_logs().items())]
        return f"{proc} started: logs {logs}"

    def _every(self, proc: BrokerProcess, interval_ms: int, task: Callable[[], None], what: str) -> None:
        def run() -> None:
            if proc.alive:
                task()
                self.sched.at(interval_ms, run, f"{proc} {what}")
        self.sched.at(self.rng.randint(1, interval_ms), run, f"{proc} {what}")

    def _register(self, proc: BrokerProcess) -> None:
        def register():
            while True:
                try:
                    proc.broker_epoch = yield self.zk_call(proc, lambda s: self.zk.register(s, proc.broker_id),
                                                           "register")
                    self.note(f"{proc} registered with broker epoch {proc.broker_epoch}")
                    break
                except (NodeExistsError, ConnectionLoss):
                    yield Sleep(REGISTER_RETRY_MS)    # the old session's node is still there
                except SessionExpiredError:
                    return                            # the next session registers
            if self.zk.controller is None:
                self._controller_gone()
        session = proc.session
        self.sched.spawn(register(), lambda: proc.alive and proc.session == session, f"{proc} registration")

    def crash_broker(self, broker: int, power_loss: bool) -> str:
        proc = self.process_of(broker)
        if proc is None:
            return f"B{broker} is already down"
        lost = proc.crash(power_loss, self.rng)
        for hook in self.on_crash:
            hook(proc, lost)
        # The server notices the missing heartbeats only after the session timeout.
        session = proc.session
        self.sched.at(self.params.session_timeout_ms, lambda: self._expire(session),
                      f"ZooKeeper: session of {proc} times out")
        kind = "loses power" if power_loss else "crashes"
        return f"{proc} {kind}" + (f"; lost unflushed data: {lost}" if lost else "")

    def controlled_shutdown(self, broker: int) -> str:
        """The broker asks the controller to move its leaderships, then stops cleanly."""
        proc = self.process_of(broker)
        if proc is None or self.controller is None or not self.controller.alive():
            return f"B{broker} cannot shut down in a controlled way now"
        self.controller.enqueue("controlled_shutdown", broker)
        return f"{proc} asks the controller for a controlled shutdown"

    def controlled_shutdown_answered(self, broker: int) -> None:
        proc = self.process_of(broker)
        if proc is None:
            return

        def stop() -> str:
            if not proc.alive:
                return "already gone"
            proc.shutdown_cleanly()
            self.zk.expire(proc.session)      # a closed session's ephemeral nodes go at once
            self.sched.at(self.rng.randint(50, 1000), lambda: self.start_broker(broker), f"restart B{broker}")
            return f"{proc} shut down cleanly"
        self.sched.at(self.net.delay(broker), stop, f"{proc} gets its controlled-shutdown answer")

    def _expire(self, session: int) -> str:
        return "expired" if self.zk.expire(session) else "already gone"

    def disconnect_zk(self, broker: int, duration_ms: int) -> str:
        proc = self.process_of(broker)
        if proc is None or not proc.zk_connected:
            return f"B{broker} is down or already disconnected"
        proc.zk_connected = False
        proc.disconnects += 1
        mark, session = proc.disconnects, proc.session

        def expire() -> str:
            if proc.alive and not proc.zk_connected and proc.disconnects == mark:
                return self._expire(session)
            return "reconnected in time"
        self.sched.at(self.params.session_timeout_ms, expire, f"ZooKeeper: session of {proc} times out")
        self.sched.at(duration_ms, lambda: self.reconnect_zk(proc, mark), f"{proc} reconnects to ZooKeeper")
        return f"{proc} loses its ZooKeeper connection for {duration_ms} ms"

    def reconnect_zk(self, proc: BrokerProcess, mark: int | None = None) -> str:
        if not proc.alive or proc.zk_connected or (mark is not None and proc.disconnects != mark):
            return "nothing to do"
        proc.zk_connected = True
        if self.zk.session_alive(proc.session):
            return f"{proc} reconnected, same session"
        # Session expired: the broker starts a new one and registers again; a
        # controller on it resigns (KafkaController._on_new_session).
        if self.controller is not None and self.controller.process is proc:
            self.controller.resign("its ZooKeeper session expired")
        proc.session = self.zk.new_session(proc.broker_id)
        proc.broker_epoch = -1
        self._register(proc)
        return f"{proc} reconnected with a new session (the old one expired)"

    # ---- controller --------------------------------------------------------------------

    def _brokers_changed(self) -> None:
        def fire() -> str:
            if self.controller is not None and self.controller.alive():
                self.controller.enqueue("brokers")
                return f"{self.controller} gets BrokerChange"
            return "no controller to tell"
        self.sched.at(self.rng.randint(1, self.params.watch_delay_max_ms), fire, "watch /brokers/ids")

    def _controller_gone(self) -> None:
        old = self.controller
        if old is not None and old.alive():
            self.sched.at(self.rng.randint(1, self.params.watch_delay_max_ms), lambda: old.enqueue("moved"),
                          f"watch /controller fires at {old}")
        self.sched.at(self.rng.randint(1, self.params.watch_delay_max_ms), self._elect_controller,
                      "controller election")

    def _elect_controller(self) -> str:
        if self.zk.controller is not None:
            return f"B{self.zk.controller[0]} is controller"
        candidates = [p for p in self.up() if p.zk_connected and p.broker_epoch >= 0
                      and self.zk.session_alive(p.session)]
        if not candidates:
            return "no candidate (a registering broker tries again)"
        proc = self.rng.choice(candidates)
        epoch, version = self.zk.elect_controller(proc.session, proc.broker_id)
        self.controller = SimController(self, proc, epoch, version)
        self.controller.enqueue("failover")
        return f"{proc} becomes controller with epoch {epoch}"

    def move_controller(self) -> str:
        """An operator deletes /controller: another election, the old one resigns when told."""
        return "deleted /controller" if self.zk.delete_controller() else "no controller to move"

    def isr_change_notification(self, proc: BrokerProcess, tp: TopicPartition) -> None:
        def fire() -> str:
            if self.controller is not None and self.controller.alive():
                self.controller.enqueue("isr_change", tp)
                return f"{self.controller} gets the ISR change of {tp}"
            return "no controller to tell"
        self.sched.at(self.rng.randint(50, self.params.notify_delay_max_ms), fire,
                      f"{proc} ISR change notification")
