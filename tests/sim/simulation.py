"""One seeded run: a fault phase, then a quiet phase, with the invariants checked after every step.

``run_seed(seed)`` builds the world from the seed, starts the three brokers and
the producer, and alternates: maybe inject a fault (a step of its own), then
run the next scheduled event (a step).  After ``fault_steps`` steps the faults
stop, everything heals, the producer stops shortly after, and the run goes on
until the replicas have converged (invariant 5) or the quiet phase times out.
Any violated invariant ends the run.  With ``trace=True`` every step is
recorded (:mod:`tests.sim.trace`); the same seed replays the same run.
"""
from __future__ import annotations

import collections
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field

from tests.sim.faults import FaultInjector
from tests.sim.invariants import Checker, Violation
from tests.sim.params import DEFAULT_FAULTS, DEFAULT_STEPS, draw_params
from tests.sim.producer import Producer
from tests.sim.isr_writer import SimGevent
from tests.sim.scheduler import patched_runtime
from tests.sim.trace import step_block
from tests.sim.world import World

PRODUCE_INTO_QUIET_MS = 300


@dataclass
class SeedResult:
    seed: int
    params: str
    ok: bool = True
    invariant: str = ""
    message: str = ""
    steps: int = 0
    sim_ms: int = 0
    appended: int = 0
    acked: int = 0
    deposed_acks: int = 0
    truncation_rounds: int = 0
    faults: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)

    def summary(self) -> str:
        faults = ", ".join(f"{k} x{n}" for k, n in sorted(self.faults.items())) or "none"
        head = "ok" if self.ok else f"FAILED invariant {self.invariant}"
        return (f"seed {self.seed}: {head} after {self.steps} steps ({self.sim_ms} simulated ms); "
                f"{self.appended} appends, {self.acked} acknowledged ({self.deposed_acks} by deposed "
                f"leaders); faults: {faults}")


def _scratch_root() -> str | None:
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def run_seed(seed: int, faults: tuple[str, ...] = DEFAULT_FAULTS, fault_steps: int = DEFAULT_STEPS,
             trace: bool = False) -> SeedResult:
    params = draw_params(seed, faults, fault_steps)
    result = SeedResult(seed, params.describe())
    base = tempfile.mkdtemp(prefix=f"kafka-ha-sim-{seed}-", dir=_scratch_root())
    logging.disable(logging.CRITICAL)     # the brokers' own logs: the trace says what matters
    world = World(params, base)
    try:
        # replica_reads slices its loop over partitions by the real clock (cooperative.yielding)
        # and would then yield to the hub mid-request: with one partition per fetch that takes a
        # 50 ms stall of this process, but a seed must replay whatever the machine's load.
        with patched_runtime(world.sched, {("kafka_ha.broker.isr_writer", "gevent"): SimGevent(world),
                                           ("kafka_ha.broker.replica_reads", "yielding"): iter}):
            _run(world, result, trace)
    finally:
        logging.disable(logging.NOTSET)
        for proc in world.up():
            for greenlet in proc.greenlets:
                greenlet.kill(block=False)
            for lg in proc.log_manager.all_logs().values():
                lg.close()
        world.drain()
        shutil.rmtree(base, ignore_errors=True)
    return result


def _run(world: World, result: SeedResult, trace: bool) -> None:
    checker = Checker(world)
    producer = Producer(world)
    injector = FaultInjector(world, checker)
    for b in world.params.brokers:
        world.start_broker(b)
    producer.start()

    def finish(what: str) -> None:
        world.drain()
        if world.greenlet_errors:
            raise Violation("error", f"a broker greenlet failed: {world.greenlet_errors[0]}")
        checker.after_step(producer.poll())
        result.steps += 1
        if trace:
            result.trace.extend(step_block(result.steps, world, what, world.notes))
        world.notes = []

    what = "start"
    try:
        while result.steps < world.params.fault_steps:
            what = "FAULT"
            said = injector.maybe_inject()
            if said:
                what = f"FAULT {said}"
                finish(what)
            what = ""
            what = world.sched.step() or "nothing scheduled"
            finish(what)
        what = f"QUIET {injector.stop_and_heal()}"
        finish(what)
        quiet_start = world.sched.now
        while True:
            if producer.active and world.sched.now - quiet_start > PRODUCE_INTO_QUIET_MS:
                producer.active = False
            if not producer.active and not producer.pending:
                reason = checker.not_converged()
                if reason is None:
                    break
                if world.sched.now - quiet_start > world.params.quiet_max_ms:
                    raise Violation("5 convergence", f"not converged {world.params.quiet_max_ms} ms "
                                                     f"after the faults stopped: {reason}")
            what = ""
            what = world.sched.step() or "nothing scheduled"
            finish(what)
    except Violation as v:
        result.ok, result.invariant, result.message = False, v.invariant, v.message
        if trace:
            result.steps += 1
            what = what or f"{world.sched.current} (stopped while handling it)"
            result.trace.extend(step_block(result.steps, world, f"{what}  <-- VIOLATION", world.notes))
    finally:
        result.sim_ms = world.sched.now
        result.appended = producer.appended
        result.acked = len(checker.acked)
        result.deposed_acks = checker.deposed_acks
        result.faults = dict(collections.Counter(injector.injected))
        result.stats = dict(world.stats)
        result.truncation_rounds = sum(f.truncation_rounds for b in world.params.brokers
                                       if (p := world.processes[b]) is not None for f in p.fetchers.values())
