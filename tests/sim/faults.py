"""The fault injector: before each step, with the run's fault rate, one fault from the enabled kinds.

Kinds (names as in ``--faults``):

- ``net``: on top of the run's standing message loss and slow messages, a
  slow spell (most messages slow for a while), which reorders a lot;
- ``busy``: a broker is slow for a while: either its data requests (fetches, produce,
  epoch queries) wait up to some extra time (a slow disk, a backed-up request queue)
  while the controller's requests, on their own connection, do not; or the other way
  round, the controller's requests to it are backed up;
- ``crash``: kill -9 of a broker, restarted after a while (nothing written is lost);
- ``power``: a broker loses power: unflushed data is cut (see ``tests.sim.broker``);
- ``zk-disconnect``: a broker loses ZooKeeper for a while, shorter or longer than
  the session timeout (then its session expires while it keeps serving);
- ``partition``: two brokers cannot talk, or talk slowly, for a while (a follower cut
  off from its leader, but not from ZooKeeper; a degraded link);
- ``controller-move``: ``/controller`` is deleted; a new controller (epoch + 1) takes
  over while the old one may still be writing;
- ``preferred``: a preferred-replica election (leadership moves without a failure);
- ``controlled-shutdown``: a broker has the controller move its leaderships away and
  leave the ISRs, then stops cleanly (flush, clean-shutdown marker) and restarts later;
- ``leader-burst``: the leader fails (crash or session expiry) and, a moment later,
  whoever leads then fails or is moved too: two leader changes in quick succession;
- ``conflict``: ZooKeeper answers slowly for a while, so the leaders' ISR writes and
  the controller's state writes overlap and their conditional writes conflict
  (re-read, adopt or re-decide);
- ``zk-reply-loss`` (off by default): a leader's ISR write is applied but its reply
  is lost (ConnectionLoss), with a per-run probability.

Targets lean towards the current leader.  What Kafka promises about power
loss is the limit of the ``power`` fault: acknowledged data survives as long as
one in-sync replica keeps its log.  So a broker loses power only if, for every
partition whose ISR names it, another ISR member is up, connected and holds
every acknowledged record, and it is not the controller's broker; and while
any broker is amnesiac (``tests.sim.invariants``) no other broker fails, loses
its session or its controller, and no leadership is moved, since any of these
could make the controller pick the amnesiac replica, which Kafka would do too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from tests.sim.invariants import Checker

if TYPE_CHECKING:
    from tests.sim.world import World

WEIGHTS = {"net": 2, "busy": 3, "crash": 3, "power": 3, "zk-disconnect": 3, "partition": 3,
           "controller-move": 1, "preferred": 3, "controlled-shutdown": 3, "leader-burst": 5,
           "conflict": 2}
DISRUPTIVE = {"crash", "power", "controller-move", "preferred", "controlled-shutdown", "leader-burst"}


class FaultInjector:
    def __init__(self, world: World, checker: Checker) -> None:
        self.world = world
        self.checker = checker
        self.enabled = [k for k in WEIGHTS if k in world.params.faults]
        self.injected: list[str] = []
        self.active = True

    @property
    def rng(self):
        return self.world.rng

    def frozen(self) -> bool:
        """A broker lost data that an ISR may still count on: no more failures for now."""
        return bool(self.checker.amnesiac)

    def maybe_inject(self) -> str | None:
        if not self.active or not self.enabled or self.rng.random() >= self.world.params.fault_rate:
            return None
        kind = self.rng.choices(self.enabled, [WEIGHTS[k] for k in self.enabled])[0]
        if kind in DISRUPTIVE and self.frozen():
            return None
        said = getattr(self, "_" + kind.replace("-", "_"))()
        if said:
            self.injected.append(kind)
        return said

    # ---- targets -------------------------------------------------------------------

    def _tp(self):
        return self.rng.choice(sorted(self.world.assignments))

    def _leader_or_any(self) -> int:
        state = self.world.zk_state(self._tp())
        if state is not None and state.leader >= 0 and self.rng.random() < 0.6:
            return state.leader
        return self.rng.choice(self.world.params.brokers)

    def _restart_later(self, broker: int) -> None:
        self.world.sched.at(self.rng.randint(50, 1500), lambda: self.world.start_broker(broker),
                            f"restart B{broker}")

    # ---- kinds ----------------------------------------------------------------------

    def _net(self) -> str:
        params = self.world.net.params
        before, params.tail = params.tail, 0.6
        duration = self.rng.randint(100, 800)

        def end() -> str:
            params.tail = before if self.active else 0.0
            return "slow spell over"
        self.world.sched.at(duration, end, "network")
        return f"slow spell: most messages take up to {params.tail_max_ms} ms for {duration} ms"

    def _busy(self, broker: int | None = None, control: bool | None = None) -> str:
        broker = self._leader_or_any() if broker is None else broker
        control = self.rng.random() < 0.5 if control is None else control
        lags = self.world.net.params.control_lag if control else self.world.net.params.busy
        lags[broker] = extra = self.rng.choice((50, 200, 600, 1500) if control else (50, 200, 600))
        duration = self.rng.randint(200, 1500)

        def end() -> str:
            if lags.get(broker) == extra:
                lags.pop(broker, None)
            return f"B{broker} keeps up again"
        self.world.sched.at(duration, end, "network")
        if control:
            return f"the controller's requests to B{broker} are backed up: up to {extra} ms, for {duration} ms"
        return f"B{broker} is busy: messages to it wait up to {extra} ms more, for {duration} ms"

    def _controlled_shutdown(self) -> str | None:
        broker = self._leader_or_any()
        if self.world.process_of(broker) is None:
            return None
        return self.world.controlled_shutdown(broker)

    def _crash(self) -> str | None:
        broker = self._leader_or_any()
        if self.world.process_of(broker) is None:
            return None
        said = self.world.crash_broker(broker, power_loss=False)
        self._restart_later(broker)
        return said

    def _power(self) -> str | None:
        broker = self._leader_or_any()
        if not self.power_loss_allowed(broker):
            return None
        said = self.world.crash_broker(broker, power_loss=True)
        self._restart_later(broker)
        return said

    def power_loss_allowed(self, broker: int) -> bool:
        world = self.world
        proc = world.process_of(broker)
        if proc is None or self.frozen() or not self.settled():
            return False
        if world.controller.process is proc:
            return False
        for tp in sorted(world.assignments):
            state = world.zk_state(tp)
            if state is None or broker not in state.isr:
                continue
            keepers = [m for m in state.isr if m != broker and (p := world.process_of(m)) is not None
                       and p.zk_connected and world.zk.session_alive(p.session)
                       and self.checker.holds_all_acks(p, tp)]
            if not keepers:
                return False
        return True

    def settled(self) -> bool:
        """Every broker up and registered, every partition led, the controller idle and up to date.

        A power loss is only injected then: a LeaderAndIsr already on its way would
        reach the restarted process (control requests carry no broker epoch here),
        and one that makes it leader would let it lead with the log it lost.
        """
        world = self.world
        for b in world.params.brokers:
            proc = world.process_of(b)
            if proc is None or not proc.zk_connected or proc.broker_epoch < 0 \
                    or not world.zk.session_alive(proc.session):
                return False
        controller = world.controller
        if controller is None or not controller.alive() or not controller.idle() \
                or world.zk.controller != (controller.process.broker_id, controller.session) \
                or world.zk.controller_epoch != controller.epoch \
                or controller.live != world.zk.live_brokers():
            return False
        return all(self.checker.established_leader(tp) is not None for tp in world.assignments)

    def _zk_disconnect(self) -> str | None:
        broker = self._leader_or_any()
        expires = self.rng.random() < 0.5
        if expires and self.frozen():
            return None
        timeout = self.world.params.session_timeout_ms
        duration = (self.rng.randint(timeout + 50, 3 * timeout) if expires
                    else self.rng.randint(20, timeout - 100))
        return self.world.disconnect_zk(broker, duration)

    def _partition(self, a: int | None = None, b: int | None = None) -> str:
        a = self._leader_or_any() if a is None else a
        b = self.rng.choice([x for x in self.world.params.brokers if x != a]) if b is None else b
        pair = frozenset((a, b))
        params = self.world.net.params
        duration = self.rng.randint(100, 1500)
        if self.rng.random() < 0.5:
            params.slow_links[pair] = extra = self.rng.choice((100, 300, 800))

            def recover() -> str:
                if params.slow_links.get(pair) == extra:
                    params.slow_links.pop(pair, None)
                return f"the link between B{a} and B{b} is fast again"
            self.world.sched.at(duration, recover, "network")
            return f"the link between B{a} and B{b} is slow (up to {extra} ms more) for {duration} ms"
        params.cut.add(pair)

        def heal() -> str:
            params.cut.discard(pair)
            return f"B{a} and B{b} can talk again"
        self.world.sched.at(duration, heal, "network")
        return f"B{a} and B{b} cannot talk for {duration} ms"

    def _controller_move(self) -> str:
        return self.world.move_controller()

    def _preferred(self) -> str | None:
        controller = self.world.controller
        if controller is None or not controller.alive():
            return None
        tp = self._tp()
        controller.enqueue("preferred", tp)
        return f"preferred-replica election of {tp} requested"

    def _leader_burst(self) -> str | None:
        """Two leader changes in quick succession, while some brokers lag behind the controller.

        Either change is a crash, a session expiry, a preferred-replica election or a
        controlled shutdown of whoever leads then; often the leader, or another broker, is
        busy meanwhile, so that brokers learn of the two changes in different orders.
        """
        tp = self._tp()
        state = self.world.zk_state(tp)
        if state is None or state.leader < 0:
            return None
        said = []
        roll = self.rng.random()
        others = [b for b in self.world.params.brokers if b != state.leader]
        if roll < 0.3:           # a follower hears the controller late: it keeps following the old leader
            said.append(self._busy(self.rng.choice(others), control=True))
        elif roll < 0.6:         # the leader's data requests are slow: fetches in flight for long
            said.append(self._busy(state.leader, control=False))
        elif roll < 0.8:         # a slow link to the leader, often from its preferred replica
            preferred = self.world.assignments[tp][0]
            said.append(self._partition(state.leader, preferred if preferred != state.leader
                                        and self.rng.random() < 0.5 else None))
        said.append(self._move_leadership(tp, state.leader))

        def second() -> str | None:
            if not self.active or self.frozen():
                return "skipped"
            now = self.world.zk_state(tp)
            if now is None or now.leader < 0:
                return "no leader to move"
            return "then " + self._move_leadership(tp, now.leader)
        gap = self.rng.randint(5, 400) if self.rng.random() < 0.6 else self.rng.randint(400, 1200)
        self.world.sched.at(gap, second, f"leader burst on {tp}")
        return f"leader burst on {tp}: " + "; ".join(said)

    def _move_leadership(self, tp, leader: int) -> str:
        """Mostly what operators do (rolling restarts: controlled shutdowns, preferred-replica
        elections), sometimes a failure."""
        roll = self.rng.random()
        if leader != self.world.assignments[tp][0] and self.rng.random() < 0.7:
            roll = 0.0       # away from its preferred replica: usually an operator moves it back
        if roll < 0.25 and self.world.controller is not None and self.world.controller.alive():
            self.world.controller.enqueue("preferred", tp)
            return f"a preferred-replica election of {tp}"
        if roll < 0.65:
            return self.world.controlled_shutdown(leader)
        if roll < 0.8:
            said = self.world.crash_broker(leader, power_loss=False)
            self._restart_later(leader)
            return said
        timeout = self.world.params.session_timeout_ms
        return self.world.disconnect_zk(leader, self.rng.randint(timeout + 50, 3 * timeout))

    def _conflict(self) -> str:
        params = self.world.params
        before, params.zk_latency_max_ms = params.zk_latency_max_ms, self.rng.choice((30, 100, 250))
        duration = self.rng.randint(200, 1500)

        def end() -> str:
            params.zk_latency_max_ms = before
            return "ZooKeeper is fast again"
        self.world.sched.at(duration, end, "ZooKeeper")
        return (f"ZooKeeper slows down to {params.zk_latency_max_ms} ms per request leg for {duration} ms: "
                f"leaders' and the controller's conditional writes overlap")

    # ---- the quiet phase ----------------------------------------------------------------

    def stop_and_heal(self) -> str:
        """No more faults: no loss, no slow messages, no cuts; every broker up and connected."""
        self.active = False
        world = self.world
        params = world.net.params
        params.loss, params.tail = 0.0, 0.0
        params.cut.clear()
        params.busy.clear()
        params.control_lag.clear()
        params.slow_links.clear()
        world.params.zk_reply_loss = 0.0
        for b in world.params.brokers:
            proc = world.process_of(b)
            if proc is None:
                world.sched.at(1, lambda b=b: world.start_broker(b), f"restart B{b}")
            elif not proc.zk_connected:
                world.sched.at(1, lambda proc=proc: world.reconnect_zk(proc), f"{proc} reconnects")
        return "faults stop: the network heals, every broker comes back"
