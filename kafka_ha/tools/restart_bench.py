"""``kafka-restart-bench.sh``: how long a restarted broker takes to serve its partitions again.

For each size (one topic of N partitions, all on one broker with replication factor
1, so the restarted broker is the last in-sync replica of every one of them, as after
a full stop; a second broker is the controller and stays up; a real 3-node ZooKeeper
ensemble, real broker processes):

1. the topic is created (its znode written directly) and the controller makes the
   broker the leader of every partition;
2. the broker is stopped (``--stop clean``: SIGTERM, so its logs need no recovery;
   ``--stop kill``: SIGKILL); then one 100-byte record is appended to each of its logs
   and, with ``--mb``, that many MB of 1 KiB records in 16 KiB batches to the first 100, as if written
   before it stopped (after ``kill``, they are unflushed and must be recovered);
3. the broker is started again, and the bench measures, from the process's start:
   its port accepting connections, its registration in ZooKeeper, its Metadata answer
   naming the topic (before that, clients get UNKNOWN_TOPIC_OR_PARTITION), and
   ListOffsets answered without error for every partition (it serves all of them);
   an ApiVersions probe every ``--probe-interval-ms`` gives the longest event-loop
   stall once the port is open; the broker's own log gives the log loading time and
   the loop's longest stall while loading (an ApiVersions probe cannot reach a broker
   before its listener is up).

Results go to ``--json`` (default bench-results/restart.json, see kafka_ha/bench_results.py)
and, as Markdown tables, to stdout.
"""
from __future__ import annotations

import argparse
import re
import shutil
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

from kafka_ha.admin.assignment import assign_replicas
from kafka_ha.bench_results import Run, Table, add_output_options, print_summary, scratch_dir
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import TopicAssignment, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.tools.availability_probes import LoopProbe
from kafka_ha.tools.controller_bench import (ZK_CONNECTION_TIMEOUT_MS, ZK_SESSION_TIMEOUT_MS,
                                             free_ports, progress, start_ensemble, wait_for)
from kafka_ha.tools.local_cluster import LocalCluster
from kafka_ha.tools.processes import HOST
from kafka_ha.zk.bench_store import BenchStore

TOPIC = "restart"
FILLED_PARTITIONS = 100
LOADED = re.compile(r"Loaded (\d+) logs in ([\d.]+) s with \d+ threads; the event loop stalled "
                    r"at most (\d+) ms")
LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO (.*)$", re.M)


def request(port: int, api: ApiKey, version: int, body: dict) -> dict:
    with BrokerConnection(HOST, port, "restart-bench", 30.0) as conn:
        return conn.request(api, version, body)


def knows_topic(port: int, n: int) -> bool:
    """Whether the broker's Metadata answer names the topic with all ``n`` partitions."""
    topics = request(port, ApiKey.METADATA, 0, {"topics": [TOPIC]})["topics"]
    return any(t["name"] == TOPIC and t["error_code"] == ErrorCode.NONE and len(t["partitions"]) == n
               for t in topics)


def serves_all(port: int, n: int) -> bool:
    """Whether ListOffsets succeeds for every partition: the broker leads them all."""
    answer = request(port, ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": p, "timestamp": -1} for p in range(n)]}]})
    parts = [p for t in answer["topics"] for p in t["partitions"]]
    return len(parts) == n and all(p["error_code"] == ErrorCode.NONE for p in parts)


def fill_logs(data_dir: Path, n: int, mb: float, epoch: int, clean: bool) -> int:
    """Append one small record to every log, then ``mb`` MB of 1 KiB records to the logs of
    the first partitions; bytes written."""
    manager = LogManager([str(data_dir)], LogConfig())
    small = build_v2_batch([Record(None, b"s" * 100)])
    for p in range(n):
        # get_or_create: the broker makes a log's files at its first write (lazy logs), so a
        # partition it only led has none yet.
        manager.get_or_create_log(TopicPartition(TOPIC, p)).append_as_leader(bytearray(small), epoch)
    batch = build_v2_batch([Record(None, b"r" * 1000)] * 16)   # 16 KiB: the producer default batch.size
    targets = [TopicPartition(TOPIC, p) for p in range(min(n, FILLED_PARTITIONS))]
    written, goal = len(small) * n, int(mb * 1_000_000)
    while written < goal:
        for tp in targets:
            manager.get_log(tp).append_as_leader(bytearray(batch), epoch)
            written += len(batch)
            if written >= goal:
                break
    if clean:
        manager.close()                 # flushed, checkpointed, marked clean
    else:
        for lg in manager.all_logs().values():
            lg.close()                  # no checkpoint: recovered from the old recovery points
    return written


def log_event_times(text: str, since: float) -> dict:
    """Seconds from ``since`` (epoch) to the broker's own log lines of its last start."""
    starts = [m for m in LOG_TIME.finditer(text) if "], starting" in m.group(2)]
    tail = text[starts[-1].start():] if starts else text
    out = {}
    for m in LOG_TIME.finditer(tail):
        at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() - since
        for key, marker in (("log_starting", "], starting"), ("log_listening", "protocol server listening"),
                            ("log_started", "], started")):
            if marker in m.group(2) and key not in out:
                out[key] = round(at, 3)
    loaded = LOADED.search(tail)
    if loaded:
        out["loading_s"], out["loading_stall_ms"] = float(loaded.group(2)), int(loaded.group(3))
    return out


class RestartBench:
    def __init__(self, args: argparse.Namespace, ensemble) -> None:
        self.args, self.ensemble = args, ensemble

    def run_size(self, n: int) -> dict:
        args = self.args
        print(f"# {n} partitions, {args.mb} MB, stop={args.stop}", file=sys.stderr, flush=True)
        connect = f"{self.ensemble.connect_string}/restart-{n}-{int(time.time())}"
        zk = BenchStore.connect(connect, ZK_SESSION_TIMEOUT_MS, ZK_CONNECTION_TIMEOUT_MS)
        cluster = LocalCluster(Path(args.dir) / f"restart-{n}", brokers=2, zk_connect=connect,
                               zk_session_timeout_ms=args.session_timeout_ms, broker_ports=free_ports(2),
                               overrides={"auto.leader.rebalance.enable": False,
                                          "controlled.shutdown.enable": False})
        try:
            cluster.start()
            wait_for(lambda: len(zk.live_broker_ids()) == 2, 60, "2 registered brokers")
            controller = wait_for(zk.controller_id, 60, "a controller")
            broker = next(b for b in cluster.broker_ids if b != controller)
            zk.create_assignments([TopicAssignment(TOPIC, assign_replicas([broker], n, 1))])
            port = cluster.port(broker)
            wait_for(lambda: serves_all(port, n), 300, f"broker {broker} leading all {n} partitions")
            epoch = zk.partition_states([TopicPartition(TOPIC, 0)])[TopicPartition(TOPIC, 0)].leader_epoch
            progress(f"stopping broker {broker} ({args.stop})")
            if args.stop == "clean":
                cluster.stop_broker(broker)
            else:
                cluster.kill_broker(broker, signal.SIGKILL)
            wait_for(lambda: broker not in zk.live_broker_ids(), 60, f"broker {broker} gone")
            written = fill_logs(cluster.broker_dir(broker) / "data", n, args.mb, epoch,
                                args.stop == "clean")
            row = {"partitions": n, "stop": args.stop, "mb_filled": round(written / 1e6, 1),
                   **self.restart(cluster, zk, broker, n)}
            progress(f"{row}")
            return row
        finally:
            cluster.stop()
            zk.close()
            if not args.keep:
                shutil.rmtree(Path(args.dir) / f"restart-{n}", ignore_errors=True)

    def restart(self, cluster: LocalCluster, zk: BenchStore, broker: int, n: int) -> dict:
        port = cluster.port(broker)
        times: dict = {}
        with LoopProbe({broker: port}, self.args.probe_interval_ms / 1000) as probe:
            started = time.time()
            cluster.start_broker(broker, wait=False)

            def mark(key: str, done) -> bool:
                if key not in times and done():
                    times[key] = round(time.time() - started, 3)
                return key in times
            checks = [("registered_s", lambda: broker in zk.live_broker_ids()),
                      ("metadata_s", lambda: knows_topic(port, n)),
                      ("serving_s", lambda: serves_all(port, n))]

            def all_done() -> bool:
                for key, done in checks:
                    try:
                        mark(key, done)
                    except (OSError, ConnectionError):
                        pass          # not listening yet
                return len(times) == len(checks)
            wait_for(all_done, 600, f"broker {broker} serving all {n} partitions again")
        text = (cluster.broker_dir(broker) / "logs" / "server.log").read_text(errors="replace")
        from_log = log_event_times(text, started)
        listening = from_log.get("log_listening")
        stalls = probe.summary(since=started + listening if listening else started).get(broker, {})
        return {**times, **from_log, "probe_max_ms_after_listening": stalls.get("max_ms")}


def tables(rows: list[dict]) -> list[Table]:
    return [Table("Broker restart: from the process's start",
                  [("partitions", "", 0), ("MB", "", 0), ("stop", "", 0), ("listening", "s", 2),
                   ("registered", "s", 2), ("Metadata names the topic", "s", 2),
                   ("serving every partition", "s", 2), ("log loading", "s", 2),
                   ("loop stall while loading", "ms", 0), ("loop stall after listening", "ms", 0)],
                  [[r["partitions"], r["mb_filled"], r["stop"], r.get("log_listening"),
                    r["registered_s"], r["metadata_s"], r["serving_s"], r.get("loading_s"),
                    r.get("loading_stall_ms"), r.get("probe_max_ms_after_listening")] for r in rows],
                  "Loop stall while loading: the broker's own measure (a greenlet's lateness "
                  "over 50 ms sleeps), from its log; '-' for code that does not log it.")]


def method(args: argparse.Namespace) -> str:
    return (f"One topic of N partitions with replication factor 1 on one broker of two (the other "
            f"is the controller), 3-node ZooKeeper ensemble, session timeout "
            f"{args.session_timeout_ms} ms; the broker is stopped ({args.stop}), one record is added "
            f"to each of its logs and {args.mb} MB of 1 KiB records to the first 100, and it is started again. Times count from the "
            f"process's start; serving = ListOffsets succeeds for every partition.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka-restart-bench.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", default="3000,10000", help="sizes, comma list (default 3000,10000)")
    p.add_argument("--mb", type=float, default=0, help="MB of records added to the logs while stopped")
    p.add_argument("--stop", choices=("clean", "kill"), default="clean")
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    p.add_argument("--probe-interval-ms", type=int, default=50, help="ApiVersions loop probe interval")
    add_output_options(p, "restart", "--output")
    p.add_argument("--dir", help="working directory (default: a new temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the brokers' directories and logs")
    args = p.parse_args(argv)
    args.dir = args.dir or scratch_dir("kafka-ha-restart-")
    run = Run("restart", "Broker restart until it serves its partitions", "bin/kafka-restart-bench.sh",
              argv)
    ensemble = start_ensemble(Path(args.dir) / "zk")
    rows = []
    try:
        for n in [int(x) for x in args.partitions.split(",") if x]:
            rows.append(RestartBench(args, ensemble).run_size(n))
    finally:
        ensemble.stop()
    data = run.write(args.json, method=method(args), results={"runs": rows}, ratios=[],
                     tables=tables(rows), note=args.note)
    print_summary(data, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
