"""The readable trace of a run: per step, what happened and the state of every replica.

One block per step::

    #0042  t=1234ms  B2#1 fetcher sim-0: +2 -> LEO 12, HW 10 (leader HW 10)
        . ZooKeeper: sim-0 state is now leader 1 epoch 3 isr [1, 2] v7 (by leader B1)
        zk sim-0: leader 1 epoch 3 isr [1,2] v7 | controller B3 epoch 2
        B1#1 LEADER e3 LEO 14 HW 12 isr [1,2] epochs 0@0 3@9
        B2#1 follower e3 LEO 12 HW 10 epochs 0@0 3@9 | fetching from B1
        B3 down

Lines starting with ``.`` are what the step caused (notes); the rest is the
state after it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.sim.world import World


def _epochs(log) -> str:
    return " ".join(f"{e.epoch}@{e.start_offset}" for e in log.epoch_cache.entries()) or "-"


def replica_line(world: World, broker: int, tp) -> str:
    proc = world.process_of(broker)
    if proc is None:
        return f"B{broker} down"
    zk = "" if proc.zk_connected else " (no ZooKeeper)"
    p = proc.partition(tp)
    if p is None:
        lg = proc.log_manager.get_log(tp)
        leo = "-" if lg is None else lg.log_end_offset
        return f"{proc}{zk} no partition yet, LEO {leo}"
    role = "LEADER" if p.is_leader else "follower"
    line = (f"{proc}{zk} {role} e{p.leader_epoch} LEO {p.log.log_end_offset} HW {p.high_watermark} "
            f"epochs {_epochs(p.log)}")
    if p.is_leader:
        positions = ",".join(f"{r}:{f.log_end_offset}" for r, f in sorted(p.followers.items()))
        line += f" isr {list(p.isr)} followers@{positions}"
        if p.joining:
            line += f" joining {sorted(p.joining)}"
    fetcher = proc.fetchers.get(tp)
    if fetcher is not None and fetcher.state != "idle":
        line += f" | {fetcher.state} from B{fetcher.leader}"
    return line


def state_lines(world: World) -> list[str]:
    lines = []
    controller = world.controller
    ctl = (f"controller B{controller.process.broker_id} epoch {controller.epoch}"
           if controller is not None and controller.alive() else "no active controller")
    for tp in sorted(world.assignments):
        s = world.zk_state(tp)
        zk = ("no state" if s is None
              else f"leader {s.leader} epoch {s.leader_epoch} isr {list(s.isr)} v{s.zk_version}")
        lines.append(f"zk {tp}: {zk} | {ctl}")
        for b in world.params.brokers:
            lines.append(f"  {replica_line(world, b, tp)}")
    return lines


def step_block(step: int, world: World, what: str, notes: list[str]) -> list[str]:
    block = [f"#{step:04d}  t={world.sched.now}ms  {what}"]
    block += [f"    . {n}" for n in notes]
    block += [f"    {line}" for line in state_lines(world)]
    return block
