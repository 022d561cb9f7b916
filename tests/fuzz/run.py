"""The wire fuzzer from the command line, or one run of it for a test.

    python -m tests.fuzz.run --frames 1000000 [--seed 7] [--json out.json]

starts a ZooKeeper ensemble and three brokers on loopback (as the system tests
do), writes with an acks=all producer throughout, sends the frames, and
prints the report: frames per second, the frames of each kind, what became of
them, the error codes the brokers answered with, peak memory per broker, the
longest loop stall, and every broken invariant (then it exits with 1).
"""
from __future__ import annotations

import argparse
import json
import sys

from tests.fuzz.campaign import check_invariants, forged_traces, run_campaign
from tests.harness.kafka import create_topic
from tests.harness.load import BackgroundProducer

ACKED_TOPIC = "fuzz-acked"
OVERRIDES = {"auto.create.topics.enable": False}   # random names must not create topics


def fuzz(cluster, frames: int, seed: int) -> tuple[dict, list[str]]:
    """One campaign on a started 3-broker ``cluster``: (report as a dict, broken invariants)."""
    create_topic(cluster, ACKED_TOPIC, 3, 3, "--config", "min.insync.replicas=2")
    create_topic(cluster, "fuzz-target", 3, 3)
    with BackgroundProducer(cluster, ACKED_TOPIC) as producer:
        producer.wait_progress(100)
        report = run_campaign(cluster, frames, seed, [ACKED_TOPIC, "fuzz-target"])
        try:
            producer.wait_progress(100, what="production after the fuzzing", timeout=60)
            still_producing = True
        except AssertionError:
            still_producing = False
    problems = check_invariants(report)
    if not still_producing:
        problems.append("acks=all production did not resume after the fuzzing")
    result = report.as_dict()
    result["acked_records"] = len(producer.acked)
    try:
        history = producer.history(cluster, 3)
        result["acked_lost"] = len(history.lost)
        if history.lost:
            problems.append(f"{len(history.lost)} acknowledged records lost: "
                            f"{sorted(history.lost.items())[:5]}")
    except Exception as e:   # a cluster the fuzzing left unable to serve its own data
        result["acked_lost"] = None
        problems.append(f"the acknowledged records could not be read back: {e}")
    try:
        problems += forged_traces(cluster)
    except OSError as e:
        problems.append(f"the brokers could not be asked for forged traces: {e}")
    return result, problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the report to this file")
    parser.add_argument("--keep", action="store_true",
                        help="keep the cluster's directory (logs, server.out) and print it")
    parser.add_argument("--blocking-report-s", type=float,
                        help="brokers print the stack of whatever blocks their event loop longer "
                             "than this to server.out (gevent's monitor thread); implies --keep")
    args = parser.parse_args(argv)
    if args.blocking_report_s:
        import os

        import gevent
        gevent.config.monitor_thread   # settled for this process before the brokers' setting
        os.environ["GEVENT_MONITOR_THREAD_ENABLE"] = "true"
        os.environ["GEVENT_MAX_BLOCKING_TIME"] = str(args.blocking_report_s)
        args.keep = True
    from tests.harness.cluster import ClusterFixture
    cluster = ClusterFixture(3, OVERRIDES).start()
    try:
        result, problems = fuzz(cluster, args.frames, args.seed)
    finally:
        cluster.stop(keep_dir=args.keep)
    if args.keep:
        print(f"cluster directory: {cluster.dir}", file=sys.stderr)
    result["seed"], result["problems"] = args.seed, problems
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
