"""Run the replication simulation: many seeds, one seed with its trace, or for a while.

    python -m tests.sim.run --seeds 300            # seeds 0..299
    python -m tests.sim.run --seeds 1000 --first 5000
    python -m tests.sim.run --seed 42              # one seed, its whole trace
    python -m tests.sim.run --minutes 10           # as many seeds as fit, from --first on
    python -m tests.sim.run --seeds 300 --faults -power,+zk-reply-loss

Prints every failing seed (invariant, message, how to replay it) and at the
end how many seeds ran, how many failed, and the rate in seeds per minute.
Exit status 1 if any seed failed.  A failing seed's trace is printed with
``--seed N`` (``--tail K`` prints only its last K steps).
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback

from tests.sim.params import ALL_FAULTS, DEFAULT_FAULTS, DEFAULT_STEPS
from tests.sim.simulation import SeedResult, run_seed


def parse_faults(spec: str | None) -> tuple[str, ...]:
    """``"crash,power"`` (exactly these), or ``"-power,+zk-reply-loss"`` (changes to the default)."""
    if not spec:
        return DEFAULT_FAULTS
    items = [s.strip() for s in spec.split(",") if s.strip()]
    relative = all(s[0] in "+-" for s in items)
    chosen = list(DEFAULT_FAULTS) if relative else []
    for item in items:
        name = item.lstrip("+-")
        if name not in ALL_FAULTS:
            raise SystemExit(f"unknown fault {name!r}; known: {', '.join(ALL_FAULTS)}")
        if item.startswith("-"):
            chosen = [f for f in chosen if f != name]
        elif name not in chosen:
            chosen.append(name)
    return tuple(f for f in ALL_FAULTS if f in chosen)


def run_one(seed: int, faults: tuple[str, ...], steps: int, trace: bool) -> SeedResult:
    try:
        return run_seed(seed, faults, steps, trace=trace)
    except Exception:
        # A crash of the simulated code itself (or of the project's code under it) is a failure too.
        result = SeedResult(seed, "", ok=False, invariant="error", message=traceback.format_exc())
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim.run", description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--seeds", type=int, help="run this many seeds")
    what.add_argument("--seed", type=int, help="run one seed and print its trace")
    what.add_argument("--minutes", type=float, help="run seeds for this long")
    parser.add_argument("--first", type=int, default=0, help="first seed of --seeds/--minutes (default 0)")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                        help=f"steps with faults per seed (default {DEFAULT_STEPS})")
    parser.add_argument("--faults", help=f"fault kinds: a list of {', '.join(ALL_FAULTS)}, "
                                         f"or +kind/-kind changes to the default")
    parser.add_argument("--tail", type=int, default=0, help="with --seed: print only the last K steps")
    parser.add_argument("--stop-on-failure", action="store_true", help="stop at the first failing seed")
    args = parser.parse_args(argv)
    faults = parse_faults(args.faults)

    if args.seed is not None:
        result = run_one(args.seed, faults, args.steps, trace=True)
        lines = result.trace
        if args.tail:
            starts = [i for i, line in enumerate(lines) if line.startswith("#")]
            lines = lines[starts[-args.tail]:] if len(starts) >= args.tail else lines
        print("\n".join(lines))
        print(f"\nsettings: {result.params}")
        print(result.summary())
        if not result.ok:
            print(f"VIOLATION {result.invariant}: {result.message}")
        return 0 if result.ok else 1

    started, cpu_started = time.monotonic(), time.process_time()
    deadline = None if args.minutes is None else started + args.minutes * 60
    seed, ran, failed = args.first, 0, []
    stats: dict[str, int] = {}
    while (deadline is None and ran < args.seeds) or (deadline is not None and time.monotonic() < deadline):
        result = run_one(seed, faults, args.steps, trace=False)
        ran += 1
        for key, n in result.stats.items():
            stats[key] = stats.get(key, 0) + n
        if not result.ok:
            failed.append(seed)
            print(f"{result.summary()}\n    {result.invariant}: {result.message}\n"
                  f"    replay: python -m tests.sim.run --seed {seed}"
                  f"{' --faults ' + args.faults if args.faults else ''}"
                  f"{' --steps ' + str(args.steps) if args.steps != DEFAULT_STEPS else ''}", flush=True)
            if args.stop_on_failure:
                break
        seed += 1
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_started
    rate = ran / elapsed * 60 if elapsed > 0 else float("inf")
    if stats:
        print("cases reached: " + ", ".join(f"{k} {n}" for k, n in sorted(stats.items())))
    print(f"{ran} seeds ({args.first}..{seed - 1}), {len(failed)} failed"
          f"{' ' + str(failed[:20]) if failed else ''}; {elapsed:.1f} s, {rate:.0f} seeds per minute "
          f"({cpu / max(ran, 1) * 1000:.0f} ms of CPU per seed)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
