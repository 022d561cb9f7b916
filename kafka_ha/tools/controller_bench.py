"""``kafka-controller-bench.sh``: controller failover and load times against a floor.

For each cluster size (partitions over topics of ``--partitions-per-topic``,
RF 3 over 3 brokers, real ZooKeeper ensemble, real broker processes):

1. creation: topic znodes are written directly; time until the controller has
   created every state znode;
2. re-election: kill -9 a broker that is not the controller; time from its
   ephemeral node's deletion to new states written for every partition it
   led and to LeaderAndIsr acknowledged (from the controller's log line);
3. the floor, in the same run: raw kazoo conditionally rewriting the same
   number of state znodes with batched, pipelined multis;
4. load: kill -9 the controller; the new controller's own load and
   failover times.

Then the ZooKeeper watch count for 1,000 topics x 3 partitions (``wchs``).  Results go
to ``--json`` (default bench-results/controller.json) and, as Markdown, to stdout.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from kafka_ha.admin.assignment import assign_replicas
from kafka_ha.broker import stack_dumps
from kafka_ha.bench_results import Run, Table, add_output_options, print_summary, ratio, scratch_dir
from kafka_ha.model import TopicAssignment, TopicPartition
from kafka_ha.tools.local_cluster import LocalCluster
from kafka_ha.tools.zk_ensemble import Ensemble, EnsembleError
from kafka_ha.zk.bench_store import BenchStore
from kafka_ha.zk.errors import ZkBadVersion, ZkRolledBack

ZK_SESSION_TIMEOUT_MS = 10000
ZK_CONNECTION_TIMEOUT_MS = 15000
HANDLED = re.compile(r"^\[(?P<ts>[\d-]+ [\d:]+,\d+)\] INFO Broker failure \[(?P<dead>[\d, ]+)\] "
                     r"handled: (?P<affected>\d+) partitions affected, (?P<written>\d+) state znodes "
                     r"written .* in (?P<write_ms>\d+) ms; LeaderAndIsr acknowledged (?P<ack_ms>\d+) ms",
                     re.M)
LOADED = re.compile(r"Controller (?P<id>\d+) epoch (?P<epoch>\d+): loaded \d+ brokers, \d+ topics, "
                    r"(?P<partitions>\d+) partitions in (?P<load_ms>\d+) ms; "
                    r"(?:first UpdateMetadata sent at (?P<announced_ms>\d+) ms; )?failover done in "
                    r"(?P<failover_ms>\d+) ms")


def log_time(ts: str) -> float:
    return datetime.strptime(ts, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def controller_log(cluster: LocalCluster, broker: int) -> str:
    path = cluster.broker_dir(broker) / "logs" / "controller.log"
    return path.read_text(errors="replace") if path.exists() else ""


def wait_for(predicate, timeout: float, what: str, sleep=time.sleep, poll_s: float = 0.05):
    """``predicate()``'s first true value, polled every ``poll_s`` with ``sleep`` (gevent.sleep
    where greenlets must run meanwhile); TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        sleep(poll_s)
    raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, args: argparse.Namespace, ensemble: Ensemble) -> None:
        self.args = args
        self.ensemble = ensemble
        self.rows: list[dict] = []

    def cluster(self, name: str) -> tuple[LocalCluster, BenchStore]:
        connect = f"{self.ensemble.connect_string}/{name}-{int(time.time())}"
        # Connecting creates the chroot, before the brokers start.
        zk = BenchStore.connect(connect, ZK_SESSION_TIMEOUT_MS, ZK_CONNECTION_TIMEOUT_MS)
        try:
            return self._start_cluster(name, connect, zk), zk
        except BaseException:
            zk.close()
            raise

    def _start_cluster(self, name: str, connect: str, zk: BenchStore) -> LocalCluster:
        cluster = LocalCluster(Path(self.args.dir) / name, brokers=3, zk_connect=connect,
                               zk_session_timeout_ms=self.args.session_timeout_ms,
                               broker_ports=free_ports(3),
                               overrides={"auto.leader.rebalance.enable": False})
        cluster.start()
        wait_for(lambda: len(zk.live_broker_ids()) == 3, 60, "3 registered brokers")
        wait_for(lambda: zk.controller_id() is not None, 60, "a controller")
        return cluster

    def create_topics(self, zk: BenchStore, partitions: int) -> tuple[list[TopicPartition], float]:
        per_topic = min(self.args.partitions_per_topic, partitions)
        topics = [f"bench-{t}" for t in range(partitions // per_topic)]
        started = time.monotonic()
        zk.create_assignments(TopicAssignment(t, assign_replicas([1, 2, 3], per_topic, 3))
                              for t in topics)
        tps = [TopicPartition(t, p) for t in topics for p in range(per_topic)]
        wait_for(lambda: zk.partition_states(tps[-1:]) and len(zk.partition_states(tps)) == len(tps),
                 600, f"{len(tps)} state znodes")
        return tps, time.monotonic() - started

    def controller_id(self, zk: BenchStore) -> int:
        controller = zk.controller_id()
        if controller is None:
            raise RuntimeError("no controller is registered")
        return controller

    def reelection(self, cluster: LocalCluster, zk: BenchStore, tps: list) -> dict:
        controller = self.controller_id(zk)
        victim = next(b for b in (1, 2, 3) if b != controller)
        states = {tp: s for tp, s in zk.partition_states(tps).items()}
        led = [tp for tp, s in states.items() if s.leader == victim]
        # every partition with a replica on the victim gets a new state: new leader or smaller ISR
        affected = [tp for tp, s in states.items() if victim in s.isr]
        deleted_at = []
        gone = threading.Event()

        def watch(event):
            deleted_at.append(time.time())
            gone.set()
        zk.watch_registration(victim, watch)
        cluster.kill_broker(victim)
        if not gone.wait(self.args.session_timeout_ms / 1000 + 30):
            raise TimeoutError("the victim's registration did not expire")
        match = wait_for(lambda: HANDLED.search(controller_log(cluster, controller)), 600,
                         "the controller's broker-failure line")
        done_at = log_time(match["ts"])
        ack_ms, write_ms = int(match["ack_ms"]), int(match["write_ms"])
        started_at = done_at - ack_ms / 1000
        after = zk.partition_states(led)
        assert all(after[tp].leader not in (victim, -1) for tp in led), "not every partition moved"
        cluster.start_broker(victim)
        return {"led": len(led), "written_ms": (started_at + write_ms / 1000 - deleted_at[0]) * 1000,
                "acked_ms": (done_at - deleted_at[0]) * 1000, "event_write_ms": write_ms,
                "affected": int(match["affected"]), "written": int(match["written"]), "victim": victim,
                "affected_tps": affected}

    def floor(self, zk: BenchStore, tps: list) -> float:
        """Raw kazoo: conditional rewrite of these state znodes in pipelined 1000-op multis."""
        for attempt in range(5):
            snapshot = zk.snapshot_states(tps)
            started = time.monotonic()
            try:
                zk.rewrite_unchanged(snapshot)
            except (ZkRolledBack, ZkBadVersion):
                # A leader changed an ISR between the read and the write (the
                # cluster still runs): read again; only a clean pass is timed.
                progress(f"floor: a state changed underneath (attempt {attempt + 1}); again")
                continue
            return (time.monotonic() - started) * 1000
        raise RuntimeError("the floor's rewrite met a changing state five times")

    def load(self, cluster: LocalCluster, zk: BenchStore) -> dict:
        wait_for(lambda: len(zk.live_broker_ids()) == 3, 120, "3 live brokers")
        old = self.controller_id(zk)
        cluster.kill_broker(old)

        def new_controller_line():
            for b in (1, 2, 3):
                if b != old:
                    for m in LOADED.finditer(controller_log(cluster, b)):
                        if int(m["epoch"]) > 1 and int(m["id"]) == b:
                            return m
            return None
        survivors = [b for b in (1, 2, 3) if b != old]
        try:
            m = wait_for(new_controller_line, self.args.session_timeout_ms / 1000 + 600,
                         "a new controller")
        except TimeoutError as e:
            # A failover that never ends: say where each survivor waits before teardown.
            raise TimeoutError(f"{e}; stack dumps in {', '.join(map(str, dump_stacks(cluster, survivors)))}"
                               ) from e
        return {"load_ms": int(m["load_ms"]), "failover_ms": int(m["failover_ms"]),
                "first_update_metadata_ms": int(m["announced_ms"]) if m["announced_ms"] else None,
                "partitions": int(m["partitions"])}

    def run_size(self, partitions: int, reelect: bool) -> None:
        print(f"# {partitions} partitions", file=sys.stderr, flush=True)
        cluster, zk = self.cluster(f"bench-{partitions}")
        finished = False
        try:
            tps, create_s = self.create_topics(zk, partitions)
            progress(f"controller created {len(tps)} partitions in {create_s:.2f} s")
            row = {"partitions": len(tps), "create_s": create_s}
            if reelect:
                r = self.reelection(cluster, zk, tps)
                progress(f"re-election of {r['led']} partitions: written {r['written_ms']:.0f} ms, "
                         f"acked {r['acked_ms']:.0f} ms after the deletion")
                affected_tps = r.pop("affected_tps")
                floor_ms = self.floor(zk, affected_tps)
                progress(f"floor: raw kazoo rewrote {len(affected_tps)} state znodes in "
                         f"{floor_ms:.0f} ms; the controller wrote {r['written']} in "
                         f"{r['event_write_ms']} ms")
                row.update(r, floor_ms=floor_ms)
            row.update(self.load(cluster, zk))
            progress(f"new controller loaded {row['partitions']} partitions in {row['load_ms']} ms, "
                     f"failover done in {row['failover_ms']} ms")
            self.rows.append(row)
            finished = True
        finally:
            zk.close()
            cluster.stop()
            if finished:
                shutil.rmtree(cluster.dir, ignore_errors=True)
            else:
                progress(f"kept {cluster.dir}: the brokers' logs and stack dumps of the failed run")

    def watches(self, topics: int) -> int:
        print(f"# watches for {topics} topics x 3 partitions", file=sys.stderr, flush=True)
        cluster, zk = self.cluster("bench-watches")
        try:
            old = self.args.partitions_per_topic
            self.args.partitions_per_topic = 3
            self.create_topics(zk, topics * 3)
            self.args.partitions_per_topic = old
            time.sleep(2)
            return sum(wchs(self.ensemble.client_port(i)) for i in self.ensemble.ids)
        finally:
            zk.close()
            cluster.stop()
            shutil.rmtree(cluster.dir, ignore_errors=True)


def dump_stacks(cluster, brokers: list[int], wait_s: float = 10.0) -> list[Path]:
    """Ask each live broker of ``brokers`` for its greenlets' stacks (SIGUSR1,
    broker/stack_dumps.py) and return the stacks.log files that got a whole new dump within
    ``wait_s``."""
    asked = []
    for b in brokers:
        pid = cluster.broker_pid(b)
        if pid is None:
            continue
        path = cluster.broker_dir(b) / "logs" / stack_dumps.FILE_NAME
        asked.append((path, path.stat().st_size if path.exists() else 0))
        os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + wait_s
    grown: list[Path] = []
    while asked and time.monotonic() < deadline:
        grown = [p for p, size in asked if p.exists() and p.stat().st_size > size
                 and _read_from(p, size).endswith(stack_dumps.END_MARKER)]
        if len(grown) == len(asked):
            break
        time.sleep(0.1)
    return grown


def _read_from(path: Path, offset: int) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        f.seek(offset)
        return f.read()


def wchs(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"wchs")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    m = re.search(rb"Total watches:\s*(\d+)", data)
    return int(m.group(1)) if m else 0


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def start_ensemble(path: Path, attempts: int = 5) -> Ensemble:
    """A 3-node ensemble on free ports: a port range found free can be taken before
    ZooKeeper binds it on a machine shared with other runs, so try a few."""
    for attempt in range(attempts):
        ensemble = Ensemble(path, nodes=3, zk_port=free_ports(1)[0] // 10 * 10)
        try:
            ensemble.start()
            return ensemble
        except EnsembleError:
            ensemble.stop()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def bench_cluster(work: Path, chroot: str, brokers: int = 3, overrides: dict | None = None):
    """A real 3-node ZooKeeper ensemble and ``brokers`` broker processes (under ``work``,
    the brokers in the chroot ``/<chroot>``), started for a benchmark and stopped after it."""
    ensemble = start_ensemble(work / "zk")
    cluster = None
    try:
        cluster = LocalCluster(work / "cluster", brokers=brokers,
                               zk_connect=f"{ensemble.connect_string}/{chroot}",
                               broker_ports=free_ports(brokers), overrides=overrides)
        cluster.start()
        yield cluster
    finally:
        if cluster is not None:
            cluster.stop()
        ensemble.stop()


def method(args: argparse.Namespace) -> str:
    return (f"Per size: topics of {args.partitions_per_topic} partitions, RF 3 over 3 brokers, a "
            f"real 3-node ZooKeeper ensemble and real broker processes, session timeout "
            f"{args.session_timeout_ms} ms; the topic znodes are written directly and the "
            f"controller creates every partition's state. Re-election: kill -9 of a broker that is "
            f"not the controller; from the deletion of its registration (seen by a watch in the "
            f"bench) the controller's own log line gives the time to write every new state and "
            f"until every LeaderAndIsr was answered. The baseline, in the same run, is the floor: "
            f"raw kazoo conditionally rewriting the same state znodes in pipelined multis of 1,000 "
            f"ops, the least any controller on kazoo can do. Load: kill -9 of the controller; the "
            f"new controller's own measure of reading the cluster and of its whole failover. "
            f"Watches: ZooKeeper's watch count (wchs, summed over the ensemble) for "
            f"{args.watch_topics} topics of 3 partitions.")


def tables(rows: list[dict], watches: dict | None) -> list[Table]:
    main = Table("Creation, re-election after a broker's kill -9, and a new controller's load",
                 [("partitions", "", 0), ("controller creates all", "s", 2),
                  ("led by the dead broker", "", 0), ("states rewritten", "", 0),
                  ("deletion -> states written", "ms", 0), ("deletion -> LeaderAndIsr acked", "ms", 0),
                  ("controller write time", "ms", 0), ("floor: raw kazoo multis", "ms", 0),
                  ("new controller load", "ms", 0), ("first UpdateMetadata sent", "ms", 0),
                  ("failover done", "ms", 0)],
                 note="A new controller's times run from its election win (Kafka 1.1's target: "
                      "failover at 100k partitions, to the first UpdateMetadata, in 8 s or less).")
    for r in rows:
        main.rows.append([r["partitions"], r["create_s"], r.get("led"), r.get("written"),
                          r.get("written_ms"), r.get("acked_ms"), r.get("event_write_ms"),
                          r.get("floor_ms"), r["load_ms"], r.get("first_update_metadata_ms"),
                          r["failover_ms"]])
    out = [main]
    if watches:
        out.append(Table("ZooKeeper watches on 3 brokers (wchs, summed over the ensemble)",
                         [("topics", "", 0), ("partitions per topic", "", 0), ("watches", "", 0)],
                         [[watches["topics"], watches["partitions_per_topic"], watches["count"]]]))
    return out


def ratios(rows: list[dict]) -> list[dict]:
    return [ratio(f"controller's state writes after a broker failure, {r['partitions']} partitions",
                  r["event_write_ms"], "floor: raw kazoo multis, same znodes", r["floor_ms"], "ms",
                  goal="at most 1.5x" if r["partitions"] >= 10000 else None)
            for r in rows if "floor_ms" in r]


def plots(rows: list[dict]) -> list[dict]:
    reelected = [r for r in rows if "floor_ms" in r]
    if not reelected:
        return []
    return [{"file": "controller-writes", "kind": "bar",
             "title": "State writes after a broker failure: controller against the ZooKeeper floor",
             "x_label": "partitions (every one gets a new state)", "y_label": "milliseconds",
             "x": [r["partitions"] for r in reelected],
             "series": {"controller write time": [r["event_write_ms"] for r in reelected],
                        "floor: raw kazoo multis": [r["floor_ms"] for r in reelected]}}]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka-controller-bench.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", help="working directory (default: a new temporary one)")
    p.add_argument("--partitions", default="1000,10000", help="sizes with re-election (comma list)")
    p.add_argument("--load-partitions", default="100000", help="sizes measured for load only")
    p.add_argument("--partitions-per-topic", type=int, default=100)
    p.add_argument("--watch-topics", type=int, default=1000, help="0 skips the watch count")
    p.add_argument("--zk-port", type=int, default=0, help="first ZooKeeper client port (0: free)")
    p.add_argument("--session-timeout-ms", type=int, default=4000)
    add_output_options(p, "controller")
    args = p.parse_args(argv)
    run = Run("controller", "Controller: re-election, load, watches", "bin/kafka-controller-bench.sh",
              argv)
    args.dir = args.dir or scratch_dir("kafka-ha-bench-")
    if args.zk_port:
        ensemble = Ensemble(Path(args.dir) / "zk", nodes=3, zk_port=args.zk_port)
        ensemble.start()
    else:
        ensemble = start_ensemble(Path(args.dir) / "zk")
    bench = Bench(args, ensemble)
    try:
        for n in [int(x) for x in args.partitions.split(",") if x]:
            bench.run_size(n, reelect=True)
        for n in [int(x) for x in args.load_partitions.split(",") if x]:
            bench.run_size(n, reelect=False)
        watches = bench.watches(args.watch_topics) if args.watch_topics else None
    finally:
        ensemble.stop()
    watched = watches if watches is None else {"topics": args.watch_topics, "partitions_per_topic": 3,
                                               "count": watches}
    data = run.write(args.json, method=method(args), results={"rows": bench.rows, "watches": watched},
                     ratios=ratios(bench.rows), tables=tables(bench.rows, watched),
                     plots=plots(bench.rows), note=args.note)
    print_summary(data, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
