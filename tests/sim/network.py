"""The simulated network between brokers (and from the producer): delay, loss, cut links.

A request is a message to the destination broker's current process; the
handler runs there when (and if) it arrives, and its answer travels back the
same way.  A connection belongs to two processes: a message addressed to a
process that died (or was replaced by a restart) is lost, as a reset TCP
connection loses it.  Delays are random per message, with a heavy tail, so
messages of different connections overtake each other; a lost message or
answer surfaces to the sender as a timeout, as it would on a real socket.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tests.sim.scheduler import Scheduler


@dataclass
class NetworkParams:
    loss: float = 0.0              # probability that one message is lost
    tail: float = 0.0              # probability that one message is slow
    tail_max_ms: int = 300         # a slow message takes up to this long
    base_max_ms: int = 4           # an ordinary one up to this long
    cut: set[frozenset[int]] = field(default_factory=set)   # broker pairs that cannot talk
    busy: dict[int, int] = field(default_factory=dict)      # broker -> extra ms its data requests wait
    control_lag: dict[int, int] = field(default_factory=dict)   # broker -> extra ms for controller requests
    slow_links: dict[frozenset[int], int] = field(default_factory=dict)   # broker pair -> extra ms


class SimNetwork:
    def __init__(self, sched: Scheduler, params: NetworkParams,
                 process_of: Callable[[int], Any]) -> None:
        self.sched = sched
        self.params = params
        self._process_of = process_of       # broker id -> its current process (or None when down)
        self.sent = 0
        self.dropped = 0
        # Requests each broker process sent that have not arrived (or been lost) yet:
        # a process that lost power may still act through them (tests.sim.invariants).
        self.in_flight: dict[Any, int] = {}

    def delay(self, dst: int | None = None, control: bool = False, src: int | None = None) -> int:
        """A message's time from ``src`` to ``dst``: a busy broker's data requests (fetches,
        produce) wait, while the controller's requests, on a connection of their own, do not;
        the controller's requests to a broker whose channel is backed up wait longer; a
        degraded link between two brokers is slow both ways."""
        rng, p = self.sched.rng, self.params
        extra = rng.randint(0, p.busy[dst]) if dst in p.busy and not control else 0
        link = frozenset((src, dst))
        if src is not None and link in p.slow_links:
            extra += rng.randint(p.slow_links[link] // 2, p.slow_links[link])
        if control and dst in p.control_lag:
            extra += rng.randint(p.control_lag[dst] // 2, p.control_lag[dst])
        if p.tail and rng.random() < p.tail:
            return extra + rng.randint(p.base_max_ms, p.tail_max_ms)
        return extra + rng.randint(0, p.base_max_ms)

    def _lost(self, src: int | None, dst: int) -> bool:
        p = self.params
        if src is not None and frozenset((src, dst)) in p.cut:
            return True
        return bool(p.loss) and self.sched.rng.random() < p.loss

    def request(self, src_process: Any, dst: int, handle: Callable[[Any], Any],
                on_response: Callable[[Any], str | None], on_failure: Callable[[], str | None],
                timeout_ms: int, what: str) -> None:
        """Send ``what`` from ``src_process`` (None: the producer) to broker ``dst``.

        ``handle(dst_process)`` computes the answer at arrival; exactly one of
        ``on_response(answer)`` and ``on_failure()`` runs at the sender, unless
        the sender's process died first.
        """
        self.sent += 1
        src = None if src_process is None else src_process.broker_id
        done = [False]

        def sender_alive() -> bool:
            return src_process is None or src_process.alive

        def finish(fn: Callable[[], str | None]) -> str | None:
            if done[0] or not sender_alive():
                return "ignored (already answered or sender gone)"
            done[0] = True
            return fn()

        target = self._process_of(dst)
        if target is None:
            self.sched.at(self.delay(), lambda: finish(on_failure), f"{what} to B{dst}: refused")
            return
        if self._lost(src, dst):
            self.dropped += 1
            self.sched.at(timeout_ms, lambda: finish(on_failure), f"{what} to B{dst}: timed out")
            return

        self.in_flight[src_process] = self.in_flight.get(src_process, 0) + 1

        def arrive() -> str:
            self.in_flight[src_process] -= 1
            if not target.alive:
                self.dropped += 1
                self.sched.at(timeout_ms, lambda: finish(on_failure), f"{what} to B{dst}: timed out")
                return "lost (destination restarted or died)"
            answer = handle(target)
            if self._lost(dst, src) if src is not None else self._lost(None, dst):
                self.dropped += 1
                self.sched.at(timeout_ms, lambda: finish(on_failure), f"{what} to B{dst}: timed out")
                return "handled, answer lost"
            self.sched.at(self.delay(src, src=dst), lambda: finish(lambda: on_response(answer)),
                          f"{what} answer from B{dst}")
            return "handled"
        self.sched.at(self.delay(dst, src=src), arrive, f"{what} arrives at B{dst}")
