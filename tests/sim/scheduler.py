"""The simulation's one clock, one random source and one queue of timed events.

Everything that happens in a simulated run is an event popped from here, in
(time, insertion order): the same seed gives the same run, byte for byte.
Multi-step activities (a leader's ISR write, a controller's election with its
conditional writes) are generators: they ``yield`` an operation object whose
``start(resume)`` arranges for ``resume(value_or_exception)`` to be called by a
later event, so a write's request, its application at ZooKeeper and its reply
are separate steps that other events can interleave with.

The project's code reads the wall clock through ``kafka_ha.clock.now_ms``
(imported by name into a few modules); :func:`patched_runtime` points those names
at the simulated clock for the duration of a run.
"""
from __future__ import annotations

import contextlib
import heapq
import random
from typing import Any, Callable, Generator, Iterator

# Simulated wall-clock time starts here (ms since the epoch), so timestamps look like real ones
# and a FollowerState's "never caught up" (0) is far in the past, as on a real broker.
EPOCH_BASE_MS = 1_600_000_000_000

# Modules that imported the clock functions by name: (module, attribute).
_CLOCK_USERS = (
    ("kafka_ha.broker.partition", "now_ms"),
    ("kafka_ha.broker.partition", "monotonic_ms"),
    ("kafka_ha.broker.data_apis", "now_ms"),
    ("kafka_ha.broker.replica_manager", "monotonic_ms"),
    ("kafka_ha.broker.replica_log_tasks", "now_ms"),
    ("kafka_ha.broker.replica_log_tasks", "monotonic_ms"),
)


class Scheduler:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = 0                       # ms since the start of the run
        self._queue: list[tuple[int, int, Callable[[], Any], str]] = []
        self._seq = 0
        self.current = ""

    @property
    def wall_ms(self) -> int:
        return EPOCH_BASE_MS + self.now

    def at(self, delay_ms: int, fn: Callable[[], Any], label: str) -> None:
        """Run ``fn`` ``delay_ms`` from now; its return value (a string) describes the step."""
        self._seq += 1
        heapq.heappush(self._queue, (self.now + max(0, int(delay_ms)), self._seq, fn, label))

    def pending(self) -> int:
        return len(self._queue)

    def step(self) -> str | None:
        """Run the next event; returns what happened (None when the queue is empty)."""
        if not self._queue:
            return None
        when, _, fn, label = heapq.heappop(self._queue)
        self.now = when
        self.current = label              # what is running, should it end the run
        said = fn()
        return f"{label}: {said}" if isinstance(said, str) and said else label

    # ---- processes -------------------------------------------------------------

    def spawn(self, gen: Generator, alive: Callable[[], bool], label: str,
              on_exit: Callable[[], None] | None = None) -> None:
        """Run ``gen`` now, up to its first operation; it is resumed by later events
        and silently abandoned once ``alive()`` is False (its owner died)."""
        Process(self, gen, alive, label, on_exit).resume(None)


class Process:
    def __init__(self, sched: Scheduler, gen: Generator, alive: Callable[[], bool], label: str,
                 on_exit: Callable[[], None] | None) -> None:
        self.sched, self.gen, self.alive, self.label, self.on_exit = sched, gen, alive, label, on_exit

    def resume(self, value: Any) -> str | None:
        if not self.alive():
            self.gen.close()
            return "abandoned (its owner is gone)"
        try:
            op = self.gen.throw(value) if isinstance(value, BaseException) else self.gen.send(value)
        except StopIteration:
            if self.on_exit is not None:
                self.on_exit()
            return None
        op.start(self)
        return None


class Sleep:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def start(self, proc: Process) -> None:
        proc.sched.at(self.ms, lambda: proc.resume(None), f"{proc.label} wakes")


@contextlib.contextmanager
def patched_runtime(sched: Scheduler, replacements: dict[tuple[str, str], Any]) -> Iterator[None]:
    """The project's clock readers see the simulated clock; ``replacements`` maps more
    (module, attribute) pairs to what they should be during the run."""
    import importlib
    saved = []
    patches = {**{key: (lambda: sched.wall_ms) for key in _CLOCK_USERS}, **replacements}
    for (module_name, attr), value in patches.items():
        module = importlib.import_module(module_name)
        saved.append((module, attr, getattr(module, attr)))
        setattr(module, attr, value)
    try:
        yield
    finally:
        for module, attr, original in saved:
            setattr(module, attr, original)
