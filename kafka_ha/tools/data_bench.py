"""``kafka-data-bench.sh``: produce, consume and end-to-end latency against a socket baseline.

Starts its own 3-node ZooKeeper ensemble and 3 brokers on 127.0.0.1, and in
the same run measures:
- the baseline: raw loopback throughput of a plain socket copy between two
  Python processes (what this machine moves through one TCP connection);
- produce throughput with the project's perf tool, acks=1 and acks=all, on
  an RF=3 topic, for 100-byte and 1 KiB messages;
- consumer throughput reading the 1 KiB data back;
- end-to-end latency (produce one, consume it) while a background producer,
  configured as in the peak run, sends at 10% of the measured acks=all peak:
  once with a busy-polling consumer (Kafka's tool, fetch.max.wait.ms 0) and
  once with a long-polling one (fetch.max.wait.ms 500, the consumer default);
  its baseline, under the same load, is a 1 KiB message relayed through the
  same hops by plain blocking-socket processes (client -> "leader" ->
  "follower" -> "leader" -> client): what the machine itself costs;
- the client ceiling (``client_ceiling.py``): the same confluent-kafka producer,
  acks=all, into a null sink that acknowledges without storing and into the
  cluster, 1 KiB and 100-byte records, with the brokers' CPU per MB;
- with ``--load-curve``, the long-polling latency again at other fractions of
  the peak (0 = no background producer), to show where the tail comes from.
The plain-socket baselines are ``data_baselines.py``.  Each produce run is repeated (``--repeat``); the table shows the median run
and the range, and the CPU time the producer and the three brokers spent per
MB in that run: on a shared machine whose speed varies from one hour to the
next, CPU per MB compares code changes where MB/s cannot.  Results go to ``--json``
(default bench-results/data.json) and, as Markdown, to stdout.
"""
from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka_ha.bench_results import Run, Table, add_output_options, print_summary, ratio
from kafka_ha.tools import client_ceiling
from kafka_ha.tools.controller_bench import free_ports
from kafka_ha.tools.data_baselines import fetch_serving, relay_floor, socket_baseline
from kafka_ha.tools.local_cluster import LocalCluster
from kafka_ha.tools.processes import children_cpu_seconds, process_cpu_seconds

ROOT = Path(__file__).resolve().parents[2]
FINAL = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg "
                   r"latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th")
def tool(script: str, *args: str, timeout: float = 900) -> str:
    done = subprocess.run([str(ROOT / "bin" / script), *args], capture_output=True, text=True,
                          timeout=timeout, env={"KAFKA_HA_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


PRODUCER_PROPS = ("linger.ms=5", "batch.size=65536")   # max.in.flight: the default, 5


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str, throughput: int = -1,
            broker_pids: tuple[int, ...] = ()) -> dict:
    """One perf-tool run; with ``broker_pids``, also the CPU ms per MB of the producer and brokers."""
    producer_cpu = children_cpu_seconds()
    broker_cpu = sum(process_cpu_seconds(pid) for pid in broker_pids)
    out = tool("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", str(records),
               "--record-size", str(size), "--throughput", str(throughput), "--producer-props",
               f"bootstrap.servers={bootstrap}", f"acks={acks}", *PRODUCER_PROPS)
    m = FINAL.search(out)
    if not m:
        raise RuntimeError(f"no final line in producer perf output: {out[-500:]}")
    megabytes = int(m[1]) * size / 1024 / 1024
    producer_cpu = children_cpu_seconds() - producer_cpu
    broker_cpu = sum(process_cpu_seconds(pid) for pid in broker_pids) - broker_cpu
    return {"msgs": float(m[2]), "mb": float(m[3]), "p50": int(m[6]), "p99": int(m[8]),
            "producer_ms_per_mb": 1000 * producer_cpu / megabytes,
            "brokers_ms_per_mb": 1000 * broker_cpu / megabytes}


def consume(bootstrap: str, topic: str, messages: int) -> dict:
    out = tool("kafka-consumer-perf-test.sh", "--broker-list", bootstrap, "--topic", topic,
               "--messages", str(messages))
    row = out.strip().splitlines()[-1].split(", ")
    return {"mb": float(row[3]), "msgs": float(row[5])}


def median_run(runs: list[dict]) -> dict:
    """The run with the median MB/s, plus the range over all runs."""
    ordered = sorted(runs, key=lambda r: r["mb"])
    return dict(ordered[len(ordered) // 2], lo=ordered[0]["mb"], hi=ordered[-1]["mb"], n=len(runs))


def e2e(bootstrap: str, topic: str, messages: int, size: int, props_file: str | None = None) -> dict:
    out = tool("kafka-e2e-latency.sh", bootstrap, topic, str(messages), "all", str(size),
               *([props_file] if props_file else []))
    avg = float(re.search(r"Avg latency: ([\d.]+) ms", out)[1])
    p = re.search(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)", out)
    return {"avg": avg, "p50": int(p[1]), "p99": int(p[2]), "p999": int(p[3])}


@contextlib.contextmanager
def background_producer(bootstrap: str, rate: int):
    """While in the block, a perf-tool producer with the peak run's settings sends ``rate``
    msgs/s (acks=all, 1 KiB); none at 0.  It is killed on leaving, also on an error."""
    if rate <= 0:
        yield
        return
    background = subprocess.Popen([str(ROOT / "bin" / "kafka-producer-perf-test.sh"), "--topic",
                                   "bench-1k", "--num-records", str(rate * 120), "--record-size", "1024",
                                   "--throughput", str(rate), "--producer-props",
                                   f"bootstrap.servers={bootstrap}", "acks=all", *PRODUCER_PROPS],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env={"KAFKA_HA_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
    try:
        time.sleep(2)   # past its metadata and first batches
        yield
    finally:
        background.kill()
        background.wait()


def latency_under_load(bootstrap: str, peak: float, fraction: float, props_file: str) -> dict:
    """The long-polling e2e latency with a background producer at ``fraction`` of the peak (none at 0)."""
    rate = int(peak * fraction)
    print(f"e2e latency curve: background at {rate} msgs/s ...", file=sys.stderr)
    with background_producer(bootstrap, rate):
        return dict(e2e(bootstrap, "bench-e2e", 3000, 1024, props_file), fraction=fraction, rate=rate)


def method(args: argparse.Namespace) -> str:
    return (f"A 3-node ZooKeeper ensemble and 3 brokers on 127.0.0.1, topics of 6 partitions, RF 3, "
            f"and the project's perf tools: kafka-producer-perf-test.sh (linger.ms=5, "
            f"batch.size=64 KiB, unthrottled) sending {args.records} messages per run, each "
            f"workload {args.repeat} times (interleaved, the median run shown with the range and "
            f"the CPU the producer and the brokers spent per MB), kafka-consumer-perf-test.sh, and "
            f"kafka-e2e-latency.sh (produce one 1 KiB message with acks=all, consume it) while a "
            f"background producer with the peak run's settings sends at 10% of the measured "
            f"acks=all peak. Baselines in the same run: one loopback TCP connection between two "
            f"Python processes copying 512 MiB (for throughput), and a 1 KiB message relayed over "
            f"the same hops (client, leader, follower, leader, client) by plain blocking-socket "
            f"processes under the same load (for latency). Serving fetch data compares pread + "
            f"sendall with sendfile from a log file in the page cache. The client ceiling: one "
            f"confluent-kafka producer (acks=all, linger.ms=5, batch.size=64 KiB, no compression) "
            f"into a null sink on the project's protocol server that acknowledges every Produce "
            f"without storing it, and the same producer into the cluster, interleaved, "
            f"{args.repeat} runs each.")


def tables(results: dict) -> list[Table]:
    throughput = Table(f"Throughput (median of {results['repeat']} runs)",
                       [("workload", "", 0), ("msgs/s", "", 0), ("MB/s", "", 2), ("MB/s low", "", 2),
                        ("MB/s high", "", 2), ("producer latency p50", "ms", 0), ("p99", "ms", 0),
                        ("CPU per MB: producer", "ms", 0), ("3 brokers", "ms", 0)])
    for r in results["produce"]:
        throughput.rows.append([f"produce {r['size']} B, acks={r['acks']}, RF 3", r["msgs"], r["mb"],
                                r["lo"], r["hi"], r["p50"], r["p99"], r["producer_ms_per_mb"],
                                r["brokers_ms_per_mb"]])
    c = results["consume"]
    throughput.rows.append(["consume 1 KiB (from the leaders)", c["msgs"], c["mb"]] + [None] * 6)
    ceiling = Table(f"Client ceiling: the same confluent-kafka producer into a null sink and into "
                    f"the cluster (median of {results['repeat']} runs)",
                    client_ceiling.CEILING_COLUMNS,
                    client_ceiling.ceiling_table_rows(results["client_ceiling"]))
    latency = Table(f"End-to-end latency, 1 KiB, acks=all, background producer at "
                    f"{results['background_msgs_s']} msgs/s (10% of the acks=all peak)",
                    [("consumer", "", 0), ("avg", "ms", 2), ("p50", "ms", 2), ("p99", "ms", 2),
                     ("p99.9", "ms", 2)],
                    [[r["consumer"], r["avg"], r["p50"], r["p99"], r["p999"]] for r in results["e2e"]],
                    note="Kafka's e2e tool prints whole milliseconds; the relay is timed in ns.")
    f = results["relay"]
    latency.rows.append(["baseline: plain blocking-socket processes relaying the same hops, same load",
                         f["avg"], f["p50"], f["p99"], f["p999"]])
    out = [throughput, ceiling, latency]
    if results["load_curve"]:
        out.append(Table("End-to-end latency against background load (long-polling consumer, "
                         "3000 messages a row)",
                         [("background load, % of the acks=all peak", "%", 0), ("msgs/s", "", 0),
                          ("avg", "ms", 2), ("p50", "ms", 0), ("p99", "ms", 0), ("p99.9", "ms", 0)],
                         [[100 * r["fraction"], r["rate"], r["avg"], r["p50"], r["p99"], r["p999"]]
                          for r in results["load_curve"]]))
    out.append(Table("Serving fetch data from a log file in the page cache, one connection",
                     [("response size", "KiB", 0), ("method", "", 0), ("MB/s", "", 0),
                      ("sender CPU per GiB", "s", 2)],
                     [[r["response_bytes"] >> 10, r["method"], r["mb_s"], r["sender_cpu_s_per_gib"]]
                      for r in results["fetch_serving"]],
                     note="Sender CPU per GiB is what a broker spends; fetches of at least "
                          "SENDFILE_MIN_BYTES go out by sendfile."))
    return out


def ratios(results: dict) -> list[dict]:
    produce = {(r["size"], r["acks"]): r for r in results["produce"]}
    copy, relay = results["socket_copy_mb_s"], results["relay"]["p99"]
    out = [ratio("produce 1 KiB, acks=all, RF 3", produce[(1024, "all")]["mb"],
                 "raw loopback socket copy", copy, "MB/s"),
           ratio("produce 1 KiB, acks=all, RF 3", produce[(1024, "all")]["mb"],
                 "produce 1 KiB, acks=1", produce[(1024, "1")]["mb"], "MB/s"),
           ratio("consume 1 KiB", results["consume"]["mb"], "raw loopback socket copy", copy, "MB/s")]
    for r in results["e2e"]:
        out.append(ratio(f"end-to-end p99, {r['consumer']}", r["p99"],
                         "plain-socket relay p99, same hops, same load", relay, "ms", goal="<= 3"))
    return out + client_ceiling.ceiling_ratios(results["client_ceiling"], ratio)


def plots(results: dict) -> list[dict]:
    curve = results["load_curve"]
    if len(curve) < 2:
        return []
    return [{"file": "data-latency-vs-load", "kind": "line",
             "title": "End-to-end latency (acks=all, 1 KiB, long poll) against background load",
             "x_label": "background producer, % of the acks=all peak", "y_label": "milliseconds",
             "x": [100 * r["fraction"] for r in curve],
             "series": {"p50": [r["p50"] for r in curve], "p99": [r["p99"] for r in curve],
                        "p99.9": [r["p999"] for r in curve]}}]


def load_fractions(text: str) -> list[float]:
    """``--load-curve`` values: comma-separated fractions of the peak in [0, 1].

    >>> load_fractions("0,0.01, 0.1")
    [0.0, 0.01, 0.1]
    >>> load_fractions("2")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: load fractions must lie in [0, 1], not 2.0
    """
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    for v in values:
        if not 0 <= v <= 1:
            raise argparse.ArgumentTypeError(f"load fractions must lie in [0, 1], not {v}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka-data-bench.sh", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200000, help="messages per produce run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per produce workload")
    parser.add_argument("--dir")
    parser.add_argument("--load-curve", type=load_fractions, default=[], metavar="FRACTIONS",
                        help="also measure long-poll e2e latency with background load at these "
                             "fractions of the acks=all peak, e.g. 0,0.01,0.05,0.1")
    add_output_options(parser, "data")
    args = parser.parse_args(argv)
    run = Run("data", "Data path: produce, consume, end-to-end latency", "bin/kafka-data-bench.sh", argv)
    work = Path(args.dir or tempfile.mkdtemp(prefix="kafka-ha-data-bench-"))
    zk_port = free_ports(1)[0] // 10 * 10
    cluster = LocalCluster(work, brokers=3, zk_port=zk_port, broker_ports=free_ports(3),
                           zk_session_timeout_ms=6000)
    try:
        print("baseline: raw loopback socket copy ...", file=sys.stderr)
        baseline = socket_baseline()
        print("fetch serving: pread + sendall vs sendfile ...", file=sys.stderr)
        serving = fetch_serving(work)
        cluster.start()
        bootstrap = cluster.bootstrap_servers
        broker_pids = tuple(cluster.broker_pid(i) for i in cluster.broker_ids)
        for topic in ("bench-100", "bench-1k", "bench-e2e"):
            tool("kafka-topics.sh", "--zookeeper", cluster.connect_string, "--create", "--topic", topic,
                 "--partitions", "6", "--replication-factor", "3")
        time.sleep(2)
        runs: dict[tuple[int, str], list[dict]] = {}
        for _ in range(args.repeat):     # interleaved, so a noisy minute hits every workload
            for size, topic in ((100, "bench-100"), (1024, "bench-1k")):
                for acks in ("1", "all"):
                    print(f"produce {size} B acks={acks} ...", file=sys.stderr)
                    runs.setdefault((size, acks), []).append(
                        produce(bootstrap, topic, args.records, size, acks, broker_pids=broker_pids))
        medians = {key: median_run(r) for key, r in runs.items()}
        print("client ceiling: confluent-kafka into a null sink and into the cluster ...", file=sys.stderr)
        ceiling = client_ceiling.ceiling_runs(bootstrap, {1024: "bench-1k", 100: "bench-100"},
                                              args.repeat, broker_pids)
        print("consume ...", file=sys.stderr)
        consumed = consume(bootstrap, "bench-1k", 2 * args.repeat * args.records)
        peak = medians[(1024, "all")]["msgs"]
        print(f"e2e latency with background load at {int(peak / 10)} msgs/s ...", file=sys.stderr)
        long_poll = work / "long-poll.properties"
        long_poll.write_text("fetch.max.wait.ms=500\n")
        with background_producer(bootstrap, int(peak / 10)):
            latency = {"busy-polling consumer (fetch.max.wait.ms=0, Kafka's tool)":
                       e2e(bootstrap, "bench-e2e", 5000, 1024),
                       "long-polling consumer (fetch.max.wait.ms=500)":
                       e2e(bootstrap, "bench-e2e", 5000, 1024, str(long_poll))}
            print("e2e baseline: plain-socket relay over the same hops, same load ...", file=sys.stderr)
            floor = relay_floor(5000)
        curve = [latency_under_load(bootstrap, peak, fraction, str(long_poll))
                 for fraction in args.load_curve]
        results = {"records": args.records, "repeat": args.repeat, "socket_copy_mb_s": baseline,
                   "produce": [dict(r, size=size, acks=acks) for (size, acks), r in medians.items()],
                   "consume": consumed, "background_msgs_s": int(peak / 10),
                   "e2e": [dict(r, consumer=name) for name, r in latency.items()], "relay": floor,
                   "load_curve": curve, "client_ceiling": ceiling,
                   "fetch_serving": [{"response_bytes": size, "method": name, "mb_s": mbs,
                                      "sender_cpu_s_per_gib": cpu}
                                     for size, name, mbs, cpu in serving]}
        data = run.write(args.json, method=method(args), results=results, ratios=ratios(results),
                         tables=tables(results), plots=plots(results), note=args.note)
        print_summary(data, args.json)
    finally:
        cluster.stop()
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
