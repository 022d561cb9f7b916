"""``kafka-throttle-bench.sh``: does a throttled reassignment move data at the rate set?

On 2 real brokers (a real 3-node ZooKeeper ensemble), one topic of ``--partitions``
partitions with one replica each on broker 1 is filled with ``--megabytes`` MB by a
confluent-kafka producer.  Then ``kafka-reassign-partitions.sh --execute --throttle
RATE`` moves every partition to broker 2 (the same code as the command line, through
ZooKeeper), and the bench samples twice a second how many bytes broker 2's new
replicas hold, until the move is done and ``--verify`` has removed the throttle.

The target: the move's average rate (bytes / time from ``--execute`` until broker 2
holds everything) within 20% of the rate set (the issue's goal, for 1 GB).  The
steady rate (after Kafka's first quota window, 11 s) is shown too.  The baseline,
in the same run, is the same move back to broker 1 without a throttle: it shows that
the throttle, not the machine, set the pace.

Results go to ``--json`` (default bench-results/throttle.json) and, as tables, to stdout.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

from kafka_ha.admin import reassign_command
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.bench_results import Run, Table, add_output_options, print_summary, ratio, scratch_dir
from kafka_ha.tools.client_ceiling import produce_in_child
from kafka_ha.tools.controller_bench import bench_cluster
from kafka_ha.tools.local_cluster import LocalCluster

TOPIC = "throttle-bench"
RECORD_SIZE = 16384
SAMPLE_S = 0.5
FIRST_WINDOW_S = 11    # replication.quota.window.num x .size.seconds: Kafka's burst allowance


def replica_bytes(cluster: LocalCluster, broker: int, partitions: int) -> int:
    total = 0
    for p in range(partitions):
        folder = cluster.broker_dir(broker) / "data" / f"{TOPIC}-{p}"
        if folder.exists():
            total += sum(f.stat().st_size for f in folder.glob("*.log"))
    return total


def move(cluster: LocalCluster, partitions: int, to: int, rate: int | None, work: Path,
         expected: int, timeout_s: float) -> dict:
    """Reassign every partition to broker ``to`` (throttled at ``rate`` if given); the time
    series of bytes at ``to``, sampled until it holds ``expected`` bytes and the
    reassignment is done."""
    plan = work / f"to-{to}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": [to]} for p in range(partitions)]}))
    common = ["--zookeeper", cluster.connect_string, "--reassignment-json-file", str(plan)]
    out = io.StringIO()
    started = time.monotonic()
    if reassign_command.main([*common, "--execute", *(["--throttle", str(rate)] if rate else [])],
                             out=out, err=out) != 0:
        raise RuntimeError(f"--execute failed: {out.getvalue()}")
    samples = []
    deadline = started + timeout_s
    while True:
        now = time.monotonic()
        moved = replica_bytes(cluster, to, partitions)
        samples.append((round(now - started, 2), moved))
        if moved >= expected:
            break
        if now > deadline:
            raise RuntimeError(f"the move to broker {to} did not finish in {timeout_s} s")
        time.sleep(SAMPLE_S)
    copied_s = samples[-1][0]
    verify = io.StringIO()
    rc = reassign_command.main([*common, "--verify", "--wait", "--timeout", "120"], out=verify,
                               err=io.StringIO())
    return {"rate_set": rate, "copied_s": copied_s, "bytes": expected, "samples": samples,
            "verify_rc": rc, "throttle_removed": "Throttle was removed." in verify.getvalue()}


def average_rate(run: dict) -> float:
    return run["bytes"] / run["copied_s"] if run["copied_s"] else 0.0


def steady_rate(run: dict) -> float | None:
    """Bytes/s after the first quota window (its allowance lets the start run ahead)."""
    after = [(t, b) for t, b in run["samples"] if t >= FIRST_WINDOW_S]
    if len(after) < 2 or after[-1][0] == after[0][0]:
        return None
    return (after[-1][1] - after[0][1]) / (after[-1][0] - after[0][0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka-throttle-bench.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--megabytes", type=int, default=1024, help="data to move (the issue: 1 GB)")
    p.add_argument("--rate", type=int, default=10 * 1024 * 1024,
                   help="the throttle, bytes/s (default 10 MiB/s)")
    p.add_argument("--partitions", type=int, default=4)
    add_output_options(p, "throttle")
    p.add_argument("--dir", help="working directory (default: a new temporary one)")
    args = p.parse_args(argv)
    work = Path(args.dir or scratch_dir("kafka-ha-throttle-"))
    run = Run("throttle", "Replication throttle: a throttled reassignment against the rate set",
              "bin/kafka-throttle-bench.sh", argv)
    with bench_cluster(work, "throttle", brokers=2) as cluster:
        with ZkAdmin(cluster.connect_string) as admin:
            admin.create_topic(TOPIC, {q: (1,) for q in range(args.partitions)}, {})
        time.sleep(2)   # the leaders take their LeaderAndIsr
        records = args.megabytes * 1024 * 1024 // RECORD_SIZE
        produced = produce_in_child(cluster.bootstrap_servers, TOPIC, records, RECORD_SIZE, "1")
        expected = replica_bytes(cluster, 1, args.partitions)
        print(f"produced {expected / 1e6:.0f} MB at {produced['mb_s']} MB/s", file=sys.stderr)
        timeout = 5 * expected / args.rate + 120
        throttled = move(cluster, args.partitions, 2, args.rate, work, expected, timeout)
        print(f"throttled move: {average_rate(throttled) / 1e6:.2f} MB/s", file=sys.stderr)
        unthrottled = move(cluster, args.partitions, 1, None, work, expected, timeout)
        print(f"unthrottled move: {average_rate(unthrottled) / 1e6:.2f} MB/s", file=sys.stderr)
    results = {"megabytes": args.megabytes, "bytes": expected, "partitions": args.partitions,
               "rate_set": args.rate, "throttled": throttled, "unthrottled": unthrottled}
    avg, steady = average_rate(throttled), steady_rate(throttled)
    table = Table("Moving every partition from broker 1 to broker 2 (throttled), then back (not)",
                  [("move", "", 0), ("bytes", "MB", 1), ("time", "s", 1), ("average rate", "MB/s", 2),
                   ("rate after the first 11 s", "MB/s", 2), ("rate set", "MB/s", 2),
                   ("average / set", "x", 3), ("--verify removed the throttle", "", 0)],
                  note="MB = 10^6 bytes; bytes counted in broker 2's (then 1's) new replicas' segments")
    for label, r in (("throttled", throttled), ("unthrottled", unthrottled)):
        table.rows.append([label, r["bytes"] / 1e6, r["copied_s"], average_rate(r) / 1e6,
                           (steady_rate(r) or 0) / 1e6 if r is throttled else None,
                           args.rate / 1e6 if r is throttled else None,
                           round(average_rate(r) / args.rate, 3) if r is throttled else None,
                           "yes" if r["throttle_removed"] else "no"])
    plot = {"file": "throttle-progress", "kind": "line",
            "title": f"Bytes at the new replicas during the throttled move (rate set "
                     f"{args.rate / 1e6:.2f} MB/s)",
            "x_label": "seconds since --execute", "y_label": "MB moved",
            "x": [t for t, _ in throttled["samples"]],
            "series": {"moved": [round(b / 1e6, 2) for _, b in throttled["samples"]],
                       "rate set x time": [round(args.rate * t / 1e6, 2)
                                           for t, _ in throttled["samples"]]}}
    method = (f"2 brokers and a real 3-node ZooKeeper ensemble on this machine; one topic of "
              f"{args.partitions} partitions, one replica each on broker 1, filled with "
              f"{args.megabytes} MiB of {RECORD_SIZE}-byte records (confluent-kafka, acks=1); then "
              f"kafka-reassign-partitions.sh --execute --throttle {args.rate} (through ZooKeeper) moves "
              f"them all to broker 2, sampled every {SAMPLE_S} s until broker 2 holds every byte, then "
              f"--verify --wait; the baseline moves them back without a throttle.")
    data = run.write(args.json, method=method, results=results, tables=[table], plots=[plot],
                     note=args.note,
                     ratios=[ratio("throttled move, average rate", round(avg / 1e6, 3),
                                   "the rate set", round(args.rate / 1e6, 3), "MB/s",
                                   goal="0.8x-1.2x"),
                             ratio("unthrottled move, average rate",
                                   round(average_rate(unthrottled) / 1e6, 3), "the rate set",
                                   round(args.rate / 1e6, 3), "MB/s")])
    print_summary(data, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
