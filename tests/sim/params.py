"""The knobs of one simulated run, drawn from its seed.

Times are simulated milliseconds.  They are scaled down from a real cluster's
(session timeout 600 ms instead of 6 s, replica lag 500 ms instead of 10 s)
but keep their ratios: followers fetch many times per lag interval, a session
expires after several missed heartbeats, a controller reacts within
milliseconds.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from tests.sim.network import NetworkParams

# Every kind of fault the injector knows (tests.sim.faults); "net" is message loss,
# slow messages and reordering on every connection.
ALL_FAULTS = ("net", "busy", "crash", "power", "zk-disconnect", "partition", "controller-move",
              "preferred", "controlled-shutdown", "leader-burst", "conflict", "zk-reply-loss")
# zk-reply-loss is off unless asked for: it exercises the ZooKeeper connection-loss path of the
# leader's ISR write (issue 18 defect 4), which tests.sim.isr_writer mirrors from today's writer.
DEFAULT_FAULTS = tuple(f for f in ALL_FAULTS if f != "zk-reply-loss")
# Steps with faults per seed.  A step is one event (a message delivered, a timer, a fault), so
# this is about three simulated seconds: a few hundred fetches and a handful of leader changes.
DEFAULT_STEPS = 1000


@dataclass
class SimParams:
    seed: int
    faults: tuple[str, ...] = DEFAULT_FAULTS
    brokers: tuple[int, ...] = (1, 2, 3)
    partitions: int = 1
    min_isr: int = 2
    unclean: bool = False             # unclean.leader.election.enable
    lag_time_max_ms: int = 500
    shrink_check_ms: int = 250
    session_timeout_ms: int = 600
    request_timeout_ms: int = 300
    idle_fetch_max_ms: int = 40
    produce_interval_max_ms: int = 40
    hw_checkpoint_ms: int = 500
    recovery_checkpoint_ms: int = 1000
    flush_messages: int | None = None
    flush_interval_ms: int | None = None
    segment_bytes: int = 1 << 20
    zk_latency_max_ms: int = 3
    watch_delay_max_ms: int = 10
    notify_delay_max_ms: int = 500
    zk_reply_loss: float = 0.0
    fault_rate: float = 0.02          # probability of a fault before each step
    fault_steps: int = DEFAULT_STEPS
    quiet_max_ms: int = 30_000
    network: NetworkParams = field(default_factory=NetworkParams)

    def describe(self) -> str:
        n = self.network
        return (f"partitions={self.partitions} min.insync={self.min_isr} unclean={self.unclean} "
                f"flush.messages={self.flush_messages} "
                f"flush every={self.flush_interval_ms} segment={self.segment_bytes} "
                f"loss={n.loss} slow={n.tail} (<= {n.tail_max_ms} ms) fault rate={self.fault_rate:.3f} "
                f"zk reply loss={self.zk_reply_loss} faults={','.join(self.faults)}")


def draw_params(seed: int, faults: tuple[str, ...] = DEFAULT_FAULTS,
                fault_steps: int = DEFAULT_STEPS) -> SimParams:
    """The run's settings, from its own random stream (so adding a knob changes no run's faults)."""
    rng = random.Random(f"params-{seed}")
    p = SimParams(seed=seed, faults=tuple(faults), fault_steps=fault_steps)
    p.partitions = rng.choice((1, 1, 2))
    p.min_isr = rng.choice((1, 2, 2))
    p.unclean = rng.random() < 0.25
    p.flush_messages = rng.choice((None, None, 1, 4))
    p.flush_interval_ms = rng.choice((None, 200, 1000))
    p.segment_bytes = rng.choice((1 << 20, 1 << 20, 2048))
    p.produce_interval_max_ms = rng.choice((20, 40, 80))
    p.fault_rate = rng.uniform(0.01, 0.04)
    if "net" in faults:
        p.network = NetworkParams(loss=rng.choice((0.0, 0.01, 0.05)), tail=rng.choice((0.0, 0.02, 0.1)),
                                  tail_max_ms=rng.choice((100, 300, 800)))
    if "zk-reply-loss" in faults:
        p.zk_reply_loss = rng.choice((0.05, 0.2))
    return p
