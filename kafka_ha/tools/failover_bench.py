"""``kafka-failover-bench.sh``: the unavailability window after kill -9, as a client sees it.

For each size (one topic of N partitions, RF 3 over 3 brokers, min.insync.replicas 2,
a real 3-node ZooKeeper ensemble and real broker processes):

1. the topic is created (its znode written directly) and every partition gets one
   acks=all record from the producer (``--client``: the project's own or
   confluent-kafka); an ApiVersions probe to every broker
   every ``--probe-interval-ms`` measures how long each broker's event loop stalls
   while it creates the partitions and while it takes those first writes;
2. two producer processes (acks=all and acks=1, Kafka's producer defaults: retries
   without end, 100 ms backoff, ``--request-timeout-ms``) load metadata and wait;
3. the broker (not the controller) that leads the most partitions is killed with
   SIGKILL; at once both producers send one record to each partition it led, and
   each records when its record was acknowledged;
   Before the kill the brokers settle: the bench waits until each has used less than
   a fifth of a core for 2 s (at most 90 s).  Right after the first writes they still
   replicate and write the epoch checkpoints that creation deferred (10-15 s at 10k
   partitions, both cores busy), and a kill in the middle of that measured the leftover
   work as much as the failover;
4. the brokers' logs give the timeline in between: registration deleted (session expiry,
   seen by a ZooKeeper watch), the controller's event and state writes, LeaderAndIsr applied
   on each survivor, follower truncation done, the new leader's high watermark at its
   epoch's start (the ISR confirmed it), the first acks=all acknowledgement;
   With ``--scenario shutdown`` the victim is stopped with SIGTERM instead: a controlled
   shutdown, in which the controller moves its leaderships before it exits; the phases are
   then the victim's and the controller's shutdown lines and the process's exit.  With
   ``shutdown-all`` the topic is created with that broker first in every replica list, so
   the broker stopped leads every partition (Kafka 1.1's target is for a broker leading 10k);
5. the floor, in the same run: ``zookeeper.session.timeout.ms`` plus the time
   ZooKeeper takes to rewrite the same state znodes unchanged in pipelined multis
   (``BenchStore.rewrite_unchanged``; after everything else, since it bumps their
   versions).

Results go to ``--json`` (default bench-results/failover.json, see kafka_ha/bench_results.py)
and, as Markdown tables, to stdout.
"""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from kafka_ha.admin.assignment import assign_replicas
from kafka_ha.bench_results import Run, add_output_options, print_summary, scratch_dir
from kafka_ha.model import LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.tools import failover_timeline as tl
from kafka_ha.tools.failover_report import (CLIENT_NAMES, SCENARIOS, by_sigterm, median_run, method,
                                             plots, ratios, tables)
from kafka_ha.tools.availability_probes import LoopProbe
from kafka_ha.tools.controller_bench import (ZK_CONNECTION_TIMEOUT_MS, ZK_SESSION_TIMEOUT_MS,
                                             Bench as ControllerBench, free_ports, progress,
                                             start_ensemble, wait_for)
from kafka_ha.tools.local_cluster import LocalCluster
from kafka_ha.tools.processes import process_cpu_seconds
from kafka_ha.tools.zk_ensemble import Ensemble
from kafka_ha.zk.bench_store import BenchStore

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "failover"
# Settled: every broker under this share of a core for SETTLE_S, waited for SETTLE_MAX_S at most.
SETTLED_CPU = 0.2
SETTLE_S = 2.0
SETTLE_MAX_S = 90.0


class ProducerProcess:
    """``availability_probes produce`` in a child process: ready once it has metadata."""

    def __init__(self, bootstrap: str, partitions: list[int], acks: str, request_timeout_ms: int,
                 client: str = "kafka_ha", log_leader_moves: Path | None = None) -> None:
        # librdkafka's debug log (stamped by its own clock) goes to that file
        self.stderr = open(log_leader_moves, "w") if log_leader_moves else None  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafka_ha.tools.availability_probes", "produce", "--bootstrap",
             bootstrap, "--topic", TOPIC, "--partitions", ",".join(map(str, partitions)), "--acks", acks,
             "--request-timeout-ms", str(request_timeout_ms), "--delivery-timeout-ms", "300000",
             "--client", client] + (["--log-leader-moves"] if log_leader_moves else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True, cwd=ROOT)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the acks={acks} producer did not start")

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self, timeout_s: float) -> dict:
        out, _ = self.proc.communicate(timeout=timeout_s)
        data = json.loads(out.strip().splitlines()[-1])
        data["acked"] = {int(p): t for p, t in data["acked"].items()}
        data["leader_learned"] = {}
        if self.stderr is not None:
            self.stderr.close()
            text = Path(self.stderr.name).read_text(errors="replace")
            data["leader_learned"] = tl.leader_moves(text, TOPIC, data["started"])
            data["leader_first_learned"] = tl.leader_moves(text, TOPIC, data["started"], first=True)
        return data


def log_text(cluster: LocalCluster, broker: int, name: str) -> str:
    path = cluster.broker_dir(broker) / "logs" / name
    return path.read_text(errors="replace") if path.exists() else ""


def settled_log_text(cluster: LocalCluster, broker: int, name: str, found: Callable[[str], object],
                     timeout_s: float = 15.0) -> str:
    """The log's text once ``found(text)`` is not None, or as it is after ``timeout_s`` (the
    phase is then reported as missing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = log_text(cluster, broker, name)
        if found(text) is not None or time.monotonic() >= deadline:
            return text
        time.sleep(0.2)


class FailoverBench:
    def __init__(self, args: argparse.Namespace, ensemble: Ensemble) -> None:
        self.args = args
        self.ensemble = ensemble

    def cluster(self, name: str) -> tuple[LocalCluster, BenchStore]:
        connect = f"{self.ensemble.connect_string}/{name}-{int(time.time())}"
        # Connecting creates the chroot, before the brokers start.
        zk = BenchStore.connect(connect, ZK_SESSION_TIMEOUT_MS, ZK_CONNECTION_TIMEOUT_MS)
        try:
            cluster = LocalCluster(Path(self.args.dir) / name, brokers=3, zk_connect=connect,
                                   zk_session_timeout_ms=self.args.session_timeout_ms,
                                   broker_ports=free_ports(3),
                                   overrides={"auto.leader.rebalance.enable": False,
                                              "min.insync.replicas": 2,
                                              # one line per UpdateMetadata, for its phase
                                              "logger.levels": "state.change.logger=DEBUG"})
            cluster.start()
            wait_for(lambda: len(zk.live_broker_ids()) == 3, 60, "3 registered brokers")
            wait_for(lambda: zk.controller_id() is not None, 60, "a controller")
        except BaseException:
            zk.close()
            raise
        return cluster, zk

    @staticmethod
    def states(zk: BenchStore, n: int) -> dict[int, LeaderAndIsr]:
        """The state of each of the topic's partitions that has one."""
        return {tp.partition: state for tp, state in
                zk.partition_states(TopicPartition(TOPIC, p) for p in range(n)).items()}

    def produce_all(self, bootstrap: str, partitions: list[int], acks: str) -> dict:
        producer = ProducerProcess(bootstrap, partitions, acks, self.args.request_timeout_ms,
                                   self.args.client)
        producer.go()
        return producer.result(timeout_s=400)

    def run_size(self, n: int, scenario: str = "kill", run_suffix: str = "") -> dict:
        print(f"# {n} partitions, {scenario}", file=sys.stderr, flush=True)
        # Each repeat gets a directory of its own: a kept one would hand its logs to the next.
        cluster, zk = self.cluster(f"{scenario}-{n}{run_suffix}")
        row: dict = {"partitions": n, "scenario": scenario, "client": self.args.client,
                     "session_timeout_ms": self.args.session_timeout_ms,
                     "request_timeout_ms": self.args.request_timeout_ms}
        probe = LoopProbe({b: cluster.port(b) for b in cluster.broker_ids},
                          self.args.probe_interval_ms / 1000)
        try:
            with probe:
                row.update(self.create_and_write(cluster, zk, n, probe, scenario))
                row.update(self.settle(cluster))
                row.update(self.failover(cluster, zk, n, probe, scenario))
            row["floor_write_ms"] = ControllerBench.floor(None, zk, [TopicPartition(TOPIC, p)
                                                                     for p in range(n)])
            row["floor_s"] = self.args.session_timeout_ms / 1000 + row["floor_write_ms"] / 1000
        finally:
            zk.close()
            cluster.stop()
            if not self.args.keep:
                shutil.rmtree(cluster.dir, ignore_errors=True)
        return row

    @staticmethod
    def assignment(zk: BenchStore, n: int, scenario: str) -> dict[int, tuple[int, ...]]:
        """Kafka's round robin; for shutdown-all, one broker other than the controller first in
        every replica list (the others alternate behind it).

        >>> class Zk:
        ...     controller_id = staticmethod(lambda: 1)
        >>> FailoverBench.assignment(Zk(), 3, "shutdown-all")
        {0: (2, 3, 1), 1: (2, 1, 3), 2: (2, 3, 1)}
        """
        if scenario != "shutdown-all":
            return assign_replicas([1, 2, 3], n, 3)
        leader, *others = sorted({1, 2, 3} - {zk.controller_id()}) + [zk.controller_id()]
        return {p: (leader, *(others if p % 2 == 0 else others[::-1])) for p in range(n)}

    def create_and_write(self, cluster: LocalCluster, zk: BenchStore, n: int, probe: LoopProbe,
                         scenario: str) -> dict:
        started = time.time()
        zk.create_assignments([TopicAssignment(TOPIC, self.assignment(zk, n, scenario))])
        wait_for(lambda: len(self.states(zk, n)) == n, 600, f"{n} state znodes")
        progress(f"controller created {n} partitions in {time.time() - started:.2f} s")
        # The brokers take LeaderAndIsr for every partition; wait until each answers
        # metadata for all of them (the producer's partitions_for does).
        time.sleep(2)
        created = time.time()
        first = self.produce_all(cluster.bootstrap_servers, list(range(n)), "all")
        if first["failed"] or len(first["acked"]) != n:
            raise RuntimeError(f"first writes: {len(first['acked'])} of {n} acknowledged, "
                               f"failures: {list(first['failed'].items())[:3]}")
        written = time.time()
        progress(f"first acks=all write to every partition took {written - first['started']:.2f} s")
        return {"create_s": created - started, "first_write_s": written - first["started"],
                "stall_create": probe.summary(started, created),
                "stall_first_write": probe.summary(created, written)}

    @staticmethod
    def settle(cluster: LocalCluster) -> dict:
        """Wait until every broker used under ``SETTLED_CPU`` of a core for ``SETTLE_S``
        (at most ``SETTLE_MAX_S``); how long that took and each broker's last share."""
        started = time.time()
        pids = {b: cluster.broker_pid(b) for b in cluster.broker_ids}
        shares: dict[int, float] = {}
        while time.time() - started < SETTLE_MAX_S:
            before = {b: process_cpu_seconds(pid) for b, pid in pids.items()}
            time.sleep(SETTLE_S)
            shares = {b: (process_cpu_seconds(pid) - before[b]) / SETTLE_S for b, pid in pids.items()}
            if max(shares.values()) < SETTLED_CPU:
                break
        waited = time.time() - started
        progress(f"brokers settled after {waited:.1f} s (CPU {', '.join(f'{v:.2f}' for v in shares.values())})")
        return {"settle_s": round(waited, 1), "settled_cpu": {b: round(v, 3) for b, v in shares.items()}}

    def failover(self, cluster: LocalCluster, zk: BenchStore, n: int, probe: LoopProbe,
                 scenario: str) -> dict:
        controller = zk.controller_id()
        states = self.states(zk, n)
        led = {b: [p for p, s in states.items() if s.leader == b] for b in cluster.broker_ids}
        victim = max((b for b in cluster.broker_ids if b != controller), key=lambda b: len(led[b]))
        partitions = sorted(led[victim])
        survivors = [b for b in cluster.broker_ids if b != victim]
        # Only the acks=all producer logs its leader moves (the timeline reads no other): at
        # 10k partitions librdkafka's topic debug log is over 100 MB a run, and writing it
        # took the producer process up to a core in the window, beside the brokers and
        # ZooKeeper on two cores.
        producers = {acks: ProducerProcess(cluster.bootstrap_of(survivors) + "," +
                                           cluster.bootstrap_of([victim]), partitions, acks,
                                           self.args.request_timeout_ms, self.args.client,
                                           log_leader_moves=(cluster.dir / f"client-acks-{acks}.log"
                                                             if self.args.client == "confluent"
                                                             and acks == "all" else None))
                     for acks in ("all", "1")}
        deleted = threading.Event()
        deleted_at: list[float] = []

        def watch(_event) -> None:
            deleted_at.append(time.time())
            deleted.set()
        zk.watch_registration(victim, watch)
        victim_stall = probe.summary(time.time() - 10)
        probe.stop_broker(victim)
        killed_at = time.time()
        if by_sigterm(scenario):
            cluster.kill_broker(victim, signal.SIGTERM, wait=False)
        else:
            cluster.kill_broker(victim)
        for p in producers.values():
            p.go()
        progress(f"{'stopped' if by_sigterm(scenario) else 'killed'} broker {victim} "
                 f"(leader of {len(partitions)}); controller is {controller}")
        results = {acks: p.result(timeout_s=400) for acks, p in producers.items()}
        if not deleted.wait(120):
            raise TimeoutError("the victim's registration did not go away")
        exited_at = wait_for(lambda: time.time() if cluster.broker_pid(victim) is None else None,
                             120, "the victim's exit")
        done = time.time()
        row = {"victim": victim, "controller": controller, "led": len(partitions),
               "victim_stall_before_kill": victim_stall,
               "registration_deleted_s": deleted_at[0] - killed_at,
               "exited_s": exited_at - killed_at,
               "stall_failover": probe.summary(killed_at, done)}
        for acks, r in results.items():
            row[f"acks_{acks}"] = tl.percentiles([t - killed_at for t in r["acked"].values()])
            row[f"acks_{acks}_failed"] = len(r["failed"])
        row["phases"] = self.timeline(cluster, victim, controller, survivors, partitions, killed_at,
                                      deleted_at[0], results["all"])
        if by_sigterm(scenario):
            rel = (lambda t: None if t is None else round(t - killed_at, 3))
            succeeded = tl.last_match(tl.SHUTDOWN_SUCCEEDED, log_text(cluster, victim, "server.log"),
                                      killed_at)
            row["shutdown_s"] = rel(succeeded)
            row["phases"] = {
                "controller: controlled shutdown handled (last)": rel(tl.last_match(
                    tl.SHUTDOWN_HANDLED, log_text(cluster, controller, "controller.log"), killed_at)),
                "victim: controlled shutdown succeeded": rel(succeeded),
                "victim: registration deleted": rel(deleted_at[0]),
                "victim: process exited": rel(exited_at),
                **{k: v for k, v in row["phases"].items() if k.startswith("broker ")
                   or k.startswith("new leader") or k.startswith("first") or k.startswith("ISR")}}
        return row

    def timeline(self, cluster: LocalCluster, victim: int, controller: int, survivors: list[int],
                 partitions: list[int], killed_at: float, deleted_at: float, acks_all: dict) -> dict:
        tps = {f"[{TOPIC},{p}]" for p in partitions}
        rel = (lambda t: None if t is None else round(t - killed_at, 3))
        handled = tl.controller_failure_handled(log_text(cluster, controller, "controller.log"), victim,
                                                killed_at) or {}
        phases = {"session expiry: registration deleted": rel(deleted_at),
                  "controller event started": rel(handled.get("event_started")),
                  "controller: new leaders written and sent": rel(handled.get("leaders_written")),
                  "controller states written": rel(handled.get("states_written")),
                  "controller: LeaderAndIsr acknowledged": rel(handled.get("leader_and_isr_acked"))}
        updated_after = handled.get("new_states_from", deleted_at)
        for b in survivors:
            # The controller may send the UpdateMetadata after the LeaderAndIsr has made every
            # partition writable, so its line can come after the producers are done: wait for it.
            changes = settled_log_text(cluster, b, "state-change.log",
                                       lambda text: tl.first_update_metadata(text, updated_after))
            applied = tl.first_per_partition(tl.LEADER_AND_ISR_DONE, changes, killed_at, tps)
            phases[f"broker {b}: LeaderAndIsr applied (last)"] = rel(max(applied.values(), default=None))
            phases[f"broker {b}: UpdateMetadata with the new states received"] = rel(
                tl.first_update_metadata(changes, updated_after))
            server = log_text(cluster, b, "server.log")
            phases[f"broker {b}: truncation round done (last)"] = rel(
                tl.last_match(tl.TRUNCATED, server, killed_at))
        hw = {}
        shrinks = expands = 0
        for b in survivors:
            server = log_text(cluster, b, "server.log")
            hw.update(tl.first_per_partition(tl.ISR_AT_EPOCH_START, server, killed_at, tps))
            shrinks += tl.count_after(tl.SHRINKING, server, killed_at)
            expands += tl.count_after(tl.EXPANDING, server, killed_at)
        phases["new leader: every ISR follower fetched from the epoch start"] = tl.percentiles(
            [t - killed_at for t in hw.values()])
        if acks_all.get("leader_learned"):
            # librdkafka's debug log: the metadata answer that named the new leader
            phases["client: new leader learned from metadata (acks=all producer)"] = tl.percentiles(
                [acks_all["leader_learned"][p] - killed_at for p in partitions
                 if p in acks_all["leader_learned"]])
            first, last = acks_all.get("leader_first_learned", {}), acks_all["leader_learned"]
            phases["client: new leader learned, dropped and learned again"] = (   # librdkafka's race
                f"{sum(first.get(p, t) < t for p, t in last.items())} partitions")
        phases["first acks=all accepted"] = tl.percentiles(
            [t - killed_at for t in acks_all["acked"].values()])
        phases["ISR shrinks / expands logged by leaders"] = f"{shrinks} / {expands}"
        return phases


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka-failover-bench.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", default="3000", help="sizes, comma list (default 3000)")
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    p.add_argument("--request-timeout-ms", type=int, default=30000, help="the producers' (Kafka's default)")
    p.add_argument("--probe-interval-ms", type=int, default=50, help="ApiVersions loop probe interval")
    p.add_argument("--scenario", default="kill",
                   help="comma list of kill (kill -9 of the victim), shutdown (SIGTERM: a "
                        "controlled shutdown) and shutdown-all (the same, of a broker that leads "
                        "every partition); default kill")
    p.add_argument("--client", choices=sorted(CLIENT_NAMES), default="kafka_ha",
                   help="the producers: the project's own or confluent-kafka (librdkafka)")
    add_output_options(p, "failover", "--output")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs per size and scenario; the run with the median acks=all window is "
                        "reported, with every run's window beside it (default 1)")
    p.add_argument("--dir", help="working directory (default: a new temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the brokers' directories and logs")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    scenarios = [x for x in args.scenario.split(",") if x]
    for scenario in scenarios:
        if scenario not in SCENARIOS:
            p.error(f"unknown scenario {scenario!r}: {', '.join(SCENARIOS)}")
    sizes = [int(x) for x in args.partitions.split(",") if x]
    # Runs are kept apart by directory name (scenario and size): listed twice, the second
    # cluster would start on the first one's logs.
    for name, listed in (("--scenario", scenarios), ("--partitions", sizes)):
        twice = sorted({str(x) for x in listed if listed.count(x) > 1})
        if twice:
            p.error(f"{name} lists {', '.join(twice)} twice; use --repeat for more runs")
    args.dir = args.dir or scratch_dir("kafka-ha-failover-")
    run = Run("failover", "Availability after kill -9 of a leader", "bin/kafka-failover-bench.sh",
              argv)
    ensemble = start_ensemble(Path(args.dir) / "zk")
    rows = []
    try:
        for scenario in scenarios:
            for n in sizes:
                rows.append(median_run([FailoverBench(args, ensemble).run_size(
                    n, scenario, f"-run{i + 1}" if args.repeat > 1 else "") for i in range(args.repeat)]))
    finally:
        ensemble.stop()
    data = run.write(args.json, method=method(args), results={"runs": rows}, ratios=ratios(rows),
                     tables=tables(rows), plots=plots(rows), note=args.note)
    print_summary(data, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
