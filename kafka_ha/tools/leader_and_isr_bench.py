"""How long one broker takes to apply a LeaderAndIsr for N new partitions, in process.

``python -m kafka_ha.tools.leader_and_isr_bench --partitions 3000 10000``

For each N: a real :class:`ReplicaManager` over a real :class:`LogManager` in a
temporary directory, no ZooKeeper and no network (the leaders this broker
follows have no address, so no fetcher connects).  One LeaderAndIsr carries N
partitions that are new to the broker, RF 3, this broker the leader of a third
of them and a follower of the rest, as after creating a topic of N partitions
on three brokers.  Then one batch is written to every partition (untimed), and
a failover follows: one LeaderAndIsr makes this broker the leader of all N, at
the next leader epoch.  Measured:

- the apply time: the call, from the request to the answer;
- the event loop's longest stall meanwhile: a probe greenlet sleeps 5 ms at a
  time and records the longest it waited beyond that (what the request's
  cooperative slices leave to everyone else);
- the disk work the request deferred (new logs' directories, new leaders'
  epoch checkpoints), done as the broker's periodic pass does it right after,
  and the loop's longest stall during that pass;
- where the time goes: the first request applied again on a fresh directory
  under cProfile, the cumulative time of the broker's steps (creating logs,
  becoming leader or follower, the state-change log) and the functions that
  cost most of their own time.  The profiler slows everything, so the
  shares matter here, not the times;
- the baseline, in the same run: creating N empty directories and writing one
  small file in each (``mkdir`` + ``open``/``write``/``close``), the least a
  broker pays that creates each log on disk while it applies the request.

The operator logs go to files in the temporary directory at INFO, as a broker
writes them.  Results go to bench-results/leader-and-isr.json.
"""
from __future__ import annotations

import argparse
import cProfile
import logging
import os
import pstats
import shutil
import tempfile
import time
from pathlib import Path

import gevent

from kafka_ha.bench_results import Run, Table, add_output_options, default_path, print_summary, ratio
from kafka_ha.broker import logging_setup
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol.partition_states import to_wire
from kafka_ha.records import Record, build_v2_batch

ME = 1
BROKERS = (1, 2, 3)
TOPIC = "lai-bench"
PROBE_S = 0.005

# The broker's steps as cProfile names them: (file suffix, function) -> what the table calls it.
STEPS = [
    (("replica_manager.py", "_leader_and_isr"), "the whole request"),
    (("log_manager.py", "get_or_create_log"), "creating the logs"),
    (("partition.py", "make_leader"), "becoming leader"),
    (("partition.py", "make_follower"), "becoming follower"),
    (("epoch_cache.py", "flush"), "leader-epoch checkpoint writes"),
    (("epoch_cache.py", "flush_pending"), "leader-epoch checkpoint writes, batched"),
    (("replica_manager.py", "_fetch_from"), "adding the followed partitions to fetchers"),
    (("state_change_log.py", "emit"), "the state-change log"),
    (("cooperative.py", "yield_to_io"), "yielding to the loop"),
]


def request(partitions: int, leader_epoch: int = 1, leader: int | None = None) -> dict:
    """LeaderAndIsr for ``partitions`` partitions of one topic, leaders round-robin over 3 brokers
    (or all ``leader``)."""
    states = []
    for p in range(partitions):
        replicas = tuple(BROKERS[(p + i) % len(BROKERS)] for i in range(len(BROKERS)))
        states.append(to_wire(PartitionStateInfo(TopicPartition(TOPIC, p), 1, leader or replicas[0],
                                                 leader_epoch, replicas, 0, replicas)))
    return {"controller_id": 2, "controller_epoch": 1, "partition_states": states, "live_leaders": []}


def replica_manager(log_dir: str) -> ReplicaManager:
    config = BrokerConfig({"broker.id": ME, "zookeeper.connect": "127.0.0.1:1", "log.dirs": log_dir})
    logs = LogManager([log_dir], LogConfig())
    return ReplicaManager(config, logs, None, lambda _topic: 2, lambda _topic: LogConfig(), lambda _b: None)


class StallProbe:
    """A greenlet that sleeps ``PROBE_S`` at a time; the longest it overslept is the loop's
    longest stall (what an ApiVersions request would have waited at worst)."""

    def __init__(self) -> None:
        self.longest_s = 0.0
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            before = time.perf_counter()
            gevent.sleep(PROBE_S)
            self.longest_s = max(self.longest_s, time.perf_counter() - before - PROBE_S)

    def stop(self) -> float:
        self._greenlet.kill()
        return self.longest_s


def timed(fn, profile: cProfile.Profile | None = None) -> tuple[float, float, object]:
    """``(seconds, the loop's longest stall meanwhile, fn's result)``."""
    probe = StallProbe()
    gevent.sleep(0.02)                       # let the probe start
    start = time.perf_counter()
    if profile is not None:
        profile.enable()
    result = fn()
    if profile is not None:
        profile.disable()
    seconds = time.perf_counter() - start
    gevent.sleep(0.02)
    return seconds, probe.stop(), result


def apply(rm: ReplicaManager, req: dict, correlation_id: int,
          profile: cProfile.Profile | None = None) -> tuple[float, float, float, float]:
    """Apply ``req``, then the deferred disk work; the times and longest stalls of both."""
    seconds, stall, response = timed(lambda: rm.leader_and_isr(req, correlation_id), profile)
    errors = sum(1 for e in response["partition_errors"] if e["error_code"])
    if errors:
        raise RuntimeError(f"{errors} partitions failed")
    # What the broker's periodic pass does next (absent before the deferral: nothing to do).
    finish = getattr(rm, "finish_deferred_writes", lambda: None)
    deferred_s, deferred_stall, _ = timed(finish)
    return seconds, stall, deferred_s, deferred_stall


def first_write(rm: ReplicaManager) -> None:
    """One small batch in every partition, as a leader or as its follower would append it
    (untimed: a producer's first write to every partition before the failover)."""
    batch = build_v2_batch([Record(None, b"x" * 100)], partition_leader_epoch=1)
    for partition in rm.partitions.values():
        if partition.is_leader:
            partition.append_as_leader(batch, acks=1)
        else:
            partition.append_as_follower(batch)
    getattr(rm, "finish_deferred_writes", lambda: None)()


def apply_once(root: str, partitions: int, profile: cProfile.Profile | None = None) -> dict:
    """The new partitions' LeaderAndIsr, then a failover: this broker becomes the leader of
    every partition it followed (their logs exist now), at the next leader epoch."""
    log_dir = os.path.join(root, "data")
    rm = replica_manager(log_dir)
    new = apply(rm, request(partitions), 1, profile)
    waiting = sum(1 for lg in rm.log_manager.all_logs().values() if not getattr(lg, "on_disk", True))
    if waiting:
        raise RuntimeError(f"{waiting} of {partitions} logs still wait for their directory after the pass")
    led = len(rm.led_partitions())
    first_write(rm)
    failover = apply(rm, request(partitions, 2, leader=ME), 2)
    if len(rm.led_partitions()) != partitions:
        raise RuntimeError("the failover did not make this broker the leader of every partition")
    settle = time.perf_counter()
    rm.shutdown()                            # flush and checkpoint, as a clean stop would
    shutdown_s = time.perf_counter() - settle
    shutil.rmtree(log_dir)
    return {"led": led, "followed": partitions - led, "shutdown_ms": shutdown_s * 1000,
            **{f"{key}_ms": value * 1000 for key, value in zip(
                ("apply", "longest_stall", "deferred_pass", "deferred_pass_longest_stall"), new)},
            **{f"failover_{key}_ms": value * 1000 for key, value in zip(
                ("apply", "longest_stall", "deferred_pass", "deferred_pass_longest_stall"), failover)}}


def baseline(root: str, partitions: int) -> float:
    """Seconds to create ``partitions`` directories with one small file each."""
    base = os.path.join(root, "baseline")
    os.makedirs(base)
    start = time.perf_counter()
    for p in range(partitions):
        d = os.path.join(base, f"{TOPIC}-{p}")
        os.mkdir(d)
        with open(os.path.join(d, "file"), "w") as f:
            f.write("0\n")
    seconds = time.perf_counter() - start
    shutil.rmtree(base)
    return seconds


def breakdown(profile: cProfile.Profile, top: int) -> tuple[list[list], list[list]]:
    """``[[step, cumulative s, share]]`` for :data:`STEPS`, and the ``top`` functions by own time."""
    stats = pstats.Stats(profile).stats         # (file, line, name) -> (cc, nc, tt, ct, callers)
    cumulative: dict[str, float] = {}
    for (path, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.items():
        for (suffix, func), step in STEPS:
            if name == func and path.endswith(suffix):
                cumulative[step] = cumulative.get(step, 0.0) + ct
    total = cumulative.get("the whole request", 0.0) or 1e-9
    steps = [[step, cumulative[step], 100 * cumulative[step] / total]
             for _, step in STEPS if step in cumulative]
    own = sorted(((tt, nc, f"{os.path.basename(path)}:{line} {name}")
                  for (path, line, name), (_cc, nc, tt, _ct, _callers) in stats.items()), reverse=True)
    return steps, [[where, calls, tt, 100 * tt / total] for tt, calls, where in own[:top]]


def measure(root: str, partitions: int, top: int) -> dict:
    baseline_s = baseline(root, partitions)
    plain = apply_once(root, partitions)
    profile = cProfile.Profile()
    apply_once(root, partitions, profile)
    steps, own = breakdown(profile, top)
    print(f"{partitions} partitions: applied in {plain['apply_ms']:.0f} ms, longest loop stall "
          f"{plain['longest_stall_ms']:.0f} ms; failover applied in {plain['failover_apply_ms']:.0f} ms; "
          f"baseline (mkdir + one small file each) {baseline_s * 1000:.0f} ms")
    return {"partitions": partitions, **plain, "baseline_ms": baseline_s * 1000,
            "profile_steps": steps, "profile_own_time": own}


METHOD = (
    "In one process, no ZooKeeper and no network: a real ReplicaManager over a real LogManager in a "
    "temporary directory applies one LeaderAndIsr for N partitions new to it (RF 3 over 3 brokers, "
    "this broker the leader of a third and a follower of the rest), then one that makes it the "
    "leader of all N at the next epoch (a failover, after one batch was written to every partition), "
    "with the operator logs written "
    "to files at INFO. Apply time is the call's wall time; the longest loop stall is the most a "
    "greenlet sleeping 5 ms at a time overslept meanwhile; the same for the broker's pass over the "
    "disk work the request deferred (directories, epoch checkpoints), run right after it. The "
    "breakdown comes from a second, profiled apply on a fresh directory (shares, not times: the "
    "profiler slows everything). Baseline in the same run: creating N directories with one small "
    "file each.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kafka_ha.tools.leader_and_isr_bench",
                                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, nargs="+", default=[3000, 10000])
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    parser.add_argument("--top", type=int, default=12, help="functions listed by own time")
    add_output_options(parser, "leader-and-isr")
    args = parser.parse_args(argv)
    run = Run("leader-and-isr", "Broker: applying one LeaderAndIsr for N new partitions", parser.prog, argv)
    root = tempfile.mkdtemp(prefix="kafka-ha-lai-bench-", dir=args.dir)
    _log_to_files(root)
    try:
        results = [measure(root, n, args.top) for n in args.partitions]
    finally:
        logging.getLogger().handlers.clear()
        shutil.rmtree(root, ignore_errors=True)
    tables = [Table("Applying one LeaderAndIsr for N new partitions",
                    [("partitions", "", 0), ("apply", "ms", 0), ("longest loop stall", "ms", 0),
                     ("deferred pass after it", "ms", 0), ("its longest loop stall", "ms", 0),
                     ("baseline: mkdir + one file each", "ms", 0)],
                    [[r["partitions"], r["apply_ms"], r["longest_stall_ms"], r["deferred_pass_ms"],
                      r["deferred_pass_longest_stall_ms"], r["baseline_ms"]] for r in results]),
              Table("Failover: becoming the leader of N existing partitions (a third led before)",
                    [("partitions", "", 0), ("apply", "ms", 0), ("longest loop stall", "ms", 0),
                     ("deferred pass after it", "ms", 0), ("its longest loop stall", "ms", 0)],
                    [[r["partitions"], r["failover_apply_ms"], r["failover_longest_stall_ms"],
                      r["failover_deferred_pass_ms"], r["failover_deferred_pass_longest_stall_ms"]]
                     for r in results])]
    for r in results:
        tables.append(Table(f"Where the time goes, {r['partitions']} partitions (profiled)",
                            [("step", "", 0), ("cumulative", "s", 2), ("share", "%", 0)], r["profile_steps"]))
        tables.append(Table(f"Own time by function, {r['partitions']} partitions (profiled)",
                            [("function", "", 0), ("calls", "", 0), ("own", "s", 2), ("share", "%", 0)],
                            r["profile_own_time"]))
    ratios = [ratio(f"LeaderAndIsr for {r['partitions']} new partitions applied", r["apply_ms"],
                    "mkdir + one small file per partition", r["baseline_ms"], "ms",
                    "<= 1500 ms at 10k" if r["partitions"] == 10000 else None) for r in results]
    path = args.json or default_path("leader-and-isr")
    data = run.write(path, method=METHOD, results={"runs": results}, ratios=ratios, tables=tables,
                     note=args.note)
    print_summary(data, path)


def _log_to_files(root: str) -> None:
    logging_setup.configure(Path(root) / "logs")
    root_logger = logging.getLogger()
    for handler in list(root_logger.handlers):      # the files only, not the console
        if not isinstance(handler, logging.FileHandler):
            root_logger.removeHandler(handler)


if __name__ == "__main__":
    main()
