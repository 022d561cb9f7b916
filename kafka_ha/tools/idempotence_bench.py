"""``kafka-idempotence-bench.sh``: what the idempotent producer costs, same client, same run.

On 3 real brokers (a real 3-node ZooKeeper ensemble, one RF=3 topic with
``--partitions`` partitions, ``min.insync.replicas`` 2), one confluent-kafka
(librdkafka) producer, acks=all, the data bench's settings (``client_ceiling``),
sends ``--records`` records of ``--record-size`` bytes as fast as it goes, with
``enable.idempotence`` false and true in turn, ``--repeat`` times each, with two
sets of producer settings: librdkafka's defaults (batches up to 1 MB, what a user
gets), and the data bench's (64 KiB batches, linger 5 ms), and the defaults
once more with the producer on a core of its own (the brokers on the others), as
it would be on its own host.  The baseline is the plain acks=all run with the
same settings: the target is the idempotent run's MB/s as a ratio to it (the
issue's goal: at least 0.9), stated for the defaults on a core of its own, with
the ratio on shared cores beside it.

Why the settings matter: with idempotence on, librdkafka (2.16) allows a
partition as many requests in flight as its limit of 5 minus the *messages*
already in flight there (``rd_kafka_toppar_producer_serve``: it subtracts
``rktp_msgs_inflight``, a message count), so once a batch of five or more
records is out, the partition waits for its answer: one request in flight per
partition, where the plain producer keeps up to a million per connection.  The
idempotent rate is then about ``partitions x batch bytes / acks=all round
trip``: with 64 KiB batches that round trip bounds it; with the defaults the
batches grow towards 1 MB while the producer waits.  While it waits with a
batch ready, librdkafka's broker thread wakes again at once (the batch's
linger has passed) and finds it may not send: a busy wait, hundreds of
thousands of wake-ups a second, which takes CPU from the brokers on a shared
machine: about one core, which on a 2-core machine is half of what three brokers
have.  So the table shows the producer's CPU per MB next to the brokers', the
producer on a core of its own, where the busy wait costs the brokers nothing, and
the same producer with the defaults into the null sink (``client_ceiling``, which
answers every Produce, and InitProducerId, at once): what idempotence costs the
client when the round trip costs nothing.

How far the round trip alone decides it: the same producer, on a core of its own,
into the null sink on the other core answering each Produce ``D`` ms after it came
(``--sink-delays``), plain and idempotent in turn.  No broker CPU is behind that
delay, so the table shows the idempotent/plain ratio as a function of the round
trip; the cluster runs report librdkafka's own mean round trip beside their rate,
which places them on that curve.

Results go to ``--json`` (default bench-results/idempotence.json) and, as tables,
to stdout.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from kafka_ha.bench_results import Run, Table, add_output_options, print_summary, ratio, scratch_dir
from kafka_ha.tools.client_ceiling import CONFLUENT_SETTINGS, SinkProcess, produce_in_child
from kafka_ha.tools.controller_bench import bench_cluster
from kafka_ha.tools.group_read_rate import create_topic
from kafka_ha.tools.local_cluster import LocalCluster
from kafka_ha.tools.processes import pin_process, process_cpu_seconds

TOPIC = "idempotence-bench"
MODES = (("plain", False), ("idempotent", True))
DEFAULTS = "client defaults"
OWN_CORE = "client defaults, producer on a core of its own"
SETTINGS = {DEFAULTS: {}, "64 KiB batches": CONFLUENT_SETTINGS, OWN_CORE: {}}
SINK = "client defaults, into the null sink"
DELAYED = "client defaults, producer on a core of its own, into a null sink that answers after a delay"


def cores(label: str, pids: list[int]) -> set[int] | None:
    """The producer's cores for a run with these settings (None: all), after moving the
    brokers (``pids``) off them, or back onto every core."""
    everything = set(range(os.cpu_count() or 1))
    own = label == OWN_CORE and len(everything) > 1
    for pid in pids:
        pin_process(pid, everything - {0} if own else everything)
    return {0} if own else None


def measure(cluster: LocalCluster, args: argparse.Namespace) -> dict[str, dict[str, list[dict]]]:
    """Plain and idempotent runs, interleaved so that a slow spell of the machine hits both."""
    pids = [cluster.broker_pid(i) for i in cluster.broker_ids]
    runs = {label: {name: [] for name, _ in MODES} for label in SETTINGS}
    for _ in range(args.repeat):
        for label, settings in SETTINGS.items():
            for name, idempotence in MODES:
                producer_cores = cores(label, pids)
                cpu = sum(process_cpu_seconds(pid) for pid in pids)
                run = produce_in_child(cluster.bootstrap_servers, TOPIC, args.records,
                                       args.record_size, "all", idempotence, settings, producer_cores,
                                       round_trips=True)
                mb = args.records * args.record_size / 1024 / 1024
                cpu = sum(process_cpu_seconds(pid) for pid in pids) - cpu
                run["brokers_cpu_ms_per_mb"] = round(1000 * cpu / mb, 1)
                runs[label][name].append(run)
                print(f"{label}, {name}: {run['mb_s']} MB/s", file=sys.stderr, flush=True)
    cores("", pids)
    return runs


def sink_runs(args: argparse.Namespace) -> dict[str, list[dict]]:
    """The same producer, client defaults, into the null sink, which answers at once: what
    idempotence costs the client itself when acknowledgements take no time."""
    runs: dict[str, list[dict]] = {name: [] for name, _ in MODES}
    for _ in range(args.repeat):
        for name, idempotence in MODES:
            with SinkProcess(partitions=args.partitions) as sink:
                run = produce_in_child(sink.bootstrap, TOPIC, args.records, args.record_size, "all",
                                       idempotence, {})
            runs[name].append(run)
            print(f"{SINK}, {name}: {run['mb_s']} MB/s", file=sys.stderr, flush=True)
    return runs


def delayed_sink_runs(args: argparse.Namespace) -> dict[str, dict[str, list[dict]]]:
    """Plain and idempotent, client defaults, the producer on core 0 and a null sink on
    core 1 that answers each Produce after each of ``args.sink_delays`` ms: the rate as
    a function of the round trip alone.  Empty on a machine with one core."""
    runs: dict[str, dict[str, list[dict]]] = {}
    if (os.cpu_count() or 1) < 2:
        return runs
    for _ in range(args.repeat):
        for delay in args.sink_delays:
            for name, idempotence in MODES:
                with SinkProcess(args.partitions, answer_delay_ms=delay, cpus={1}) as sink:
                    run = produce_in_child(sink.bootstrap, TOPIC, args.records, args.record_size,
                                           "all", idempotence, {}, {0}, round_trips=True)
                runs.setdefault(f"{delay:g}", {n: [] for n, _ in MODES})[name].append(run)
                print(f"{DELAYED} of {delay:g} ms, {name}: {run['mb_s']} MB/s", file=sys.stderr,
                      flush=True)
    return runs


def median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 2) if values else None


def tables(results: dict) -> list[Table]:
    table = Table("acks=all, RF 3: the same confluent-kafka producer without and with idempotence",
                  [("settings", "", 0), ("producer", "", 0), ("MB/s (median)", "MB/s", 1),
                   ("MB/s (range)", "", 0), ("records/s", "", 0), ("brokers' CPU per MB", "ms", 1),
                   ("producer's CPU per MB", "ms", 1), ("round trip (librdkafka)", "ms", 1),
                   ("idempotent / plain", "x", 2)],
                  note="median of the runs; the runs alternate between the producers; round trip: "
                       "librdkafka's mean request round trip to the leaders (statistics windows of "
                       "1 s; none for runs shorter than that)")
    for label, by_mode in results["runs"].items():
        plain = median(by_mode["plain"], "mb_s")
        for name, _ in MODES:
            runs = by_mode[name]
            table.rows.append([label, name, median(runs, "mb_s"),
                               f"{min(r['mb_s'] for r in runs)}-{max(r['mb_s'] for r in runs)}",
                               median(runs, "msgs_s"),
                               median(runs, "brokers_cpu_ms_per_mb") if label != SINK else None,
                               median(runs, "producer_cpu_ms_per_mb"), median(runs, "rtt_ms"),
                               round(median(runs, "mb_s") / plain, 2) if plain else None])
    delayed = results.get("delayed_sink", {})
    if not delayed:
        return [table]
    curve = Table("The round trip alone: the same producer on a core of its own, into a null sink "
                  "on the other core that answers each Produce after a fixed delay",
                  [("answer delay", "ms", 0), ("plain MB/s", "MB/s", 1), ("idempotent MB/s", "MB/s", 1),
                   ("idempotent round trip (librdkafka)", "ms", 1), ("idempotent / plain", "x", 2)],
                  note="median of the runs; no CPU is behind the delay, so the ratio is what the "
                       "round trip alone costs the idempotent producer (one request in flight per "
                       "partition)")
    for delay, by_mode in delayed.items():
        plain, idempotent = (median(by_mode[name], "mb_s") for name, _ in MODES)
        curve.rows.append([float(delay), plain, idempotent, median(by_mode["idempotent"], "rtt_ms"),
                           round(idempotent / plain, 2) if plain else None])
    return [table, curve]


def ratios(results: dict) -> list[dict]:
    out = []
    for label, target, goal in ((OWN_CORE, "idempotent acks=all throughput (client defaults, "
                                           "producer on a core of its own)", ">= 0.9x"),
                                (DEFAULTS, "idempotent acks=all throughput (client defaults, "
                                           "producer sharing the cores with the brokers)", None)):
        if label in results["runs"]:   # results written before the own-core runs have none
            plain, idempotent = (median(results["runs"][label][name], "mb_s") for name, _ in MODES)
            out.append(ratio(target, idempotent, "plain acks=all, same settings, same run", plain,
                             "MB/s", goal=goal))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka-idempotence-bench.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=300000, help="records per run")
    p.add_argument("--record-size", type=int, default=1024, help="bytes per record")
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--repeat", type=int, default=3, help="runs per producer")
    p.add_argument("--sink-delays", type=lambda v: [float(x) for x in v.split(",") if x],
                   default=[0.0, 10.0, 20.0, 40.0],
                   help="comma-separated answer delays (ms) of the delayed null sink (default "
                        "0,10,20,40; empty: none)")
    add_output_options(p, "idempotence")
    p.add_argument("--dir", help="working directory (default: a new temporary one)")
    args = p.parse_args(argv)
    args.dir = args.dir or scratch_dir("kafka-ha-idempotence-")
    run = Run("idempotence", "Idempotent producer: acks=all throughput with and without idempotence",
              "bin/kafka-idempotence-bench.sh", argv)
    with bench_cluster(Path(args.dir), "idempotence", overrides={"min.insync.replicas": 2}) as cluster:
        create_topic(cluster.connect_string, cluster.bootstrap_servers, TOPIC, args.partitions)
        results = {"runs": measure(cluster, args), "records": args.records,
                   "record_size": args.record_size, "partitions": args.partitions}
    results["runs"][SINK] = sink_runs(args)
    results["delayed_sink"] = delayed_sink_runs(args)
    method = (f"3 brokers on this machine, one topic of {args.partitions} partitions, RF 3, "
              f"min.insync.replicas 2; one confluent-kafka producer per run in its own process, "
              f"acks=all, {args.records} records of {args.record_size} bytes, with librdkafka's default "
              f"settings, with the data bench's (64 KiB batches, linger 5 ms), and with the defaults "
              f"again with the producer pinned to core 0 and the brokers to the other cores "
              f"(sched_setaffinity), as a producer on its own host; {args.repeat} runs "
              f"of each producer and settings, alternating; then the same with the defaults into "
              f"the null sink (a server that answers every Produce at once and keeps nothing); then "
              f"the same on core 0 into a null sink on core 1 answering each Produce after "
              f"{', '.join(f'{d:g}' for d in args.sink_delays)} ms.")
    data = run.write(args.json, method=method, results=results, ratios=ratios(results),
                     tables=tables(results), note=args.note)
    print_summary(data, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
