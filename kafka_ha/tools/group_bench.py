"""``kafka-group-bench.sh``: the group coordinator's rebalances, offset commits, and a
consumer group's read rate.

On 3 real brokers (a real 3-node ZooKeeper ensemble, ``__consumer_offsets`` with RF 3):

1. **Rebalance time** for groups of ``--members`` sizes (lightweight members, one
   greenlet and connection each, ``group_members``): the time from the first JoinGroup
   until every member has its assignment (*formation*), against the floor
   ``group.initial.rebalance.delay.ms`` that the coordinator waits for a new group's
   members; then one member is killed (no LeaveGroup), and the time from its last
   accepted heartbeat until the others have their new assignments (*member failure*),
   against the floor ``session.timeout.ms`` before the coordinator may declare it dead.
2. **Offset commits per second**: ``--committers`` greenlets, each with its own group
   and connection, commit one offset (OffsetCommit v2, acks=-1 on the offsets topic)
   after another for ``--commit-seconds``.
3. **Read rate**: ``--messages`` records on a 6-partition topic, read from the start by
   one confluent-kafka consumer that assign()s every partition, and by one in a group
   (subscribe()), the same data in the same run, each twice in turn (best of each).
   The rate counts from the assignment (at once for assign(), after the join for the
   group) to the last record; the group's join (with the initial delay) is shown apart.

Results go to ``--json`` (default bench-results/groups.json) and, as tables, to stdout.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gevent

from kafka_ha.bench_results import Run, Table, add_output_options, print_summary, ratio, scratch_dir
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection, BrokerConnectionError
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.tools import controller_bench
from kafka_ha.tools.controller_bench import bench_cluster, progress
from kafka_ha.tools.group_members import Member
from kafka_ha.tools.local_cluster import LocalCluster
from kafka_ha.tools.processes import HOST

TOPIC, PARTITIONS = "group-bench", 6


def wait_for(predicate, timeout_s: float, what: str):
    """Poll with gevent.sleep, so that the members' greenlets run meanwhile."""
    return controller_bench.wait_for(predicate, timeout_s, what, sleep=gevent.sleep, poll_s=0.02)


class GroupBench:
    def __init__(self, args: argparse.Namespace, cluster: LocalCluster) -> None:
        self.args = args
        self.cluster = cluster
        self.any_broker = BrokerConnection(HOST, cluster.port(cluster.broker_ids[0]),
                                           client_id="group-bench")

    def coordinator(self, group: str) -> tuple[str, int]:
        """The group's coordinator; the first call creates the offsets topic."""
        def found():
            answer = self.any_broker.request(ApiKey.FIND_COORDINATOR, 0, {"key": group})
            return (answer["host"], answer["port"]) if answer["error_code"] == 0 else None
        return wait_for(found, 120, f"the coordinator of {group}")

    # ---- rebalances -------------------------------------------------------------

    def members(self, group: str, n: int) -> list[Member]:
        where = self.coordinator(group)
        a = self.args
        return [Member(i, where, group, TOPIC, PARTITIONS, a.session_timeout_ms,
                       a.rebalance_timeout_ms, a.heartbeat_interval_ms / 1000) for i in range(n)]

    @staticmethod
    def settled(members: list[Member], after_generation: int = 0) -> int | None:
        """The newest generation, past ``after_generation``, in which every one of
        ``members`` (and no one else) has its assignment."""
        common = set.intersection(*(set(m.synced) for m in members))
        for generation in sorted(common, reverse=True):
            sizes = [m.group_sizes[generation] for m in members if generation in m.group_sizes]
            if generation > after_generation and sizes == [len(members)]:
                return generation
        return None

    def rebalance(self, n: int) -> dict:
        group = f"bench-rebalance-{n}-{int(time.time())}"
        members = self.members(group, n)
        started = time.monotonic()
        for m in members:
            m.start()
        formed = wait_for(lambda: self.settled(members), 120, f"{n} members to settle")
        formation_ms = (max(m.synced[formed] for m in members) - started) * 1000
        progress(f"{n} members: formed in {formation_ms:.0f} ms (generation {formed})")
        # Kill one member (not the leader) half-way between two of its heartbeats: one in
        # flight at the kill could reach the coordinator unrecorded here, and the time
        # would count from a heartbeat an interval too early.
        victim, survivors = members[-1], members[:-1]
        seen = victim.heartbeats
        wait_for(lambda: victim.heartbeats > seen + 1, 60, "two heartbeats of the victim")
        gevent.sleep(self.args.heartbeat_interval_ms / 2000)
        last_heartbeat = victim.last_heartbeat_sent
        victim.kill()
        settled = wait_for(lambda: self.settled(survivors, formed),
                           self.args.session_timeout_ms / 1000 + 120, "the survivors to settle")
        failure_ms = (max(m.synced[settled] for m in survivors) - last_heartbeat) * 1000
        progress(f"{n} members: one killed, the rest settled {failure_ms:.0f} ms after its "
                 "last heartbeat")
        errors: dict[str, int] = {}
        for m in members:
            for name, count in m.errors.items():
                errors[name] = errors.get(name, 0) + count
        for m in survivors:
            m.leave()
        return {"members": n, "formation_ms": round(formation_ms, 1),
                "formation_generations": formed,
                "formation_floor_ms": self.args.initial_rebalance_delay_ms,
                "failure_ms": round(failure_ms, 1), "failure_generations": settled - formed,
                "failure_floor_ms": self.args.session_timeout_ms, "member_errors": errors}

    # ---- offset commits ---------------------------------------------------------

    def commits(self, committers: int) -> dict:
        stamp = int(time.time())
        groups = [f"bench-commit-{committers}-{i}-{stamp}" for i in range(committers)]
        conns = [BrokerConnection(*self.coordinator(g), client_id="bench-committer")
                 for g in groups]
        latencies: list[float] = []
        failed = [0]
        deadline = time.monotonic() + self.args.commit_seconds

        def commit_loop(i: int) -> None:
            offset = 0
            while time.monotonic() < deadline:
                offset += 1
                sent = time.monotonic()
                answer = conns[i].request(ApiKey.OFFSET_COMMIT, 2, {
                    "group_id": groups[i], "generation_id": -1, "member_id": "",
                    "retention_time_ms": -1, "topics": [{"name": TOPIC, "partitions": [
                        {"partition_index": i % PARTITIONS, "committed_offset": offset,
                         "committed_metadata": ""}]}]})
                if answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE:
                    latencies.append(time.monotonic() - sent)
                else:
                    failed[0] += 1
        started = time.monotonic()
        gevent.joinall([gevent.spawn(commit_loop, i) for i in range(committers)],
                       raise_error=True)
        elapsed = time.monotonic() - started
        for c in conns:
            c.close()
        latencies.sort()
        row = {"committers": committers, "commits": len(latencies), "failed": failed[0],
               "seconds": round(elapsed, 2), "per_second": round(len(latencies) / elapsed, 1),
               "p50_ms": _percentile(latencies, 0.5), "p99_ms": _percentile(latencies, 0.99)}
        progress(f"{committers} committer(s): {row['per_second']:.0f} commits/s")
        return row

    # ---- read rate --------------------------------------------------------------

    def read_rates(self) -> dict:
        from kafka_ha.tools import group_read_rate as rr
        bootstrap = self.cluster.bootstrap_servers
        rr.produce(bootstrap, TOPIC, self.args.messages, self.args.message_bytes)
        runs = {"assign": [], "group": []}
        for attempt in range(2):
            for mode in ("assign", "group"):
                runs[mode].append(rr.read_all(bootstrap, TOPIC, PARTITIONS, self.args.messages,
                                              mode, f"bench-read-{mode}-{attempt}-{time.time()}"))
                progress(f"{mode}: {runs[mode][-1]['per_second']:.0f} records/s")
        best = {mode: max(rs, key=lambda r: r["per_second"]) for mode, rs in runs.items()}
        return {"messages": self.args.messages, "message_bytes": self.args.message_bytes,
                "runs": runs, "best": best}


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 2)


def method(args: argparse.Namespace) -> str:
    return (f"3 broker processes and a 3-node ZooKeeper ensemble on one machine; "
            f"__consumer_offsets RF 3. Rebalances: lightweight members (one greenlet and "
            f"connection each, JoinGroup v1 / SyncGroup / Heartbeat, range strategy), session "
            f"timeout {args.session_timeout_ms} ms, heartbeat every {args.heartbeat_interval_ms} "
            f"ms, group.initial.rebalance.delay.ms {args.initial_rebalance_delay_ms}; formation is "
            f"timed from the first JoinGroup to the last SyncGroup answer, a failure from the "
            f"killed member's last accepted heartbeat to the survivors' last SyncGroup answer. "
            f"Commits: OffsetCommit v2 of one offset, one after another per committer, each "
            f"committer its own group and connection, {args.commit_seconds} s. Read rate: "
            f"confluent-kafka, {args.messages} records of {args.message_bytes} bytes on "
            f"{PARTITIONS} partitions, assign() vs subscribe(), each twice in turn, best of each, "
            f"timed from the assignment to the last record.")


def tables(results: dict) -> list[Table]:
    rebalance = Table("Rebalance time against its floor",
                      [("members", "", 0), ("scenario", "", 0), ("floor", "ms", 0),
                       ("measured", "ms", 0), ("over the floor", "ms", 0),
                       ("generations", "", 0)],
                      note="Formation's floor is group.initial.rebalance.delay.ms, a failure's "
                           "the session timeout; over the floor, a failure also waits for the "
                           "survivors' next heartbeat.")
    for r in results["rebalances"]:
        rebalance.rows.append([r["members"], "formation", r["formation_floor_ms"],
                               r["formation_ms"], r["formation_ms"] - r["formation_floor_ms"],
                               r["formation_generations"]])
        rebalance.rows.append([r["members"], "member killed", r["failure_floor_ms"],
                               r["failure_ms"], r["failure_ms"] - r["failure_floor_ms"],
                               r["failure_generations"]])
    commits = Table("Offset commits (acks=-1 on __consumer_offsets)",
                    [("committers", "", 0), ("commits", "", 0), ("commits/s", "", 0),
                     ("p50", "ms", 1), ("p99", "ms", 1), ("failed", "", 0)],
                    [[r["committers"], r["commits"], r["per_second"], r["p50_ms"], r["p99_ms"],
                      r["failed"]] for r in results["commits"]])
    reads = Table("Read rate: a group member against assign() (confluent-kafka)",
                  [("consumer", "", 0), ("records/s", "", 0), ("MB/s", "", 1),
                   ("assigned after", "ms", 0), ("first record after", "ms", 0)])
    if results.get("reads"):
        for mode, r in results["reads"]["best"].items():
            reads.rows.append([mode + "()" if mode == "assign" else "group (subscribe())",
                               r["per_second"], r["mb_per_second"], r["assigned_ms"],
                               r["first_record_ms"]])
    return [rebalance, commits, reads]


def ratios(results: dict) -> list[dict]:
    out = []
    if results["rebalances"]:
        largest = max(results["rebalances"], key=lambda r: r["members"])
        n = largest["members"]
        out.append(ratio(f"formation of {n} members", largest["formation_ms"],
                         "floor: initial rebalance delay", largest["formation_floor_ms"], "ms"))
        out.append(ratio(f"{n} members, one killed", largest["failure_ms"],
                         "floor: session timeout", largest["failure_floor_ms"], "ms"))
    if results.get("reads"):
        best = results["reads"]["best"]
        out.append(ratio("group read rate", best["group"]["per_second"], "assign() read rate",
                         best["assign"]["per_second"], "records/s", goal=">= 0.8x"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka-group-bench.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", default="3,30,100", help="group sizes, comma list")
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    p.add_argument("--heartbeat-interval-ms", type=int, default=2000)
    p.add_argument("--rebalance-timeout-ms", type=int, default=30000)
    p.add_argument("--initial-rebalance-delay-ms", type=int, default=3000,
                   help="the brokers' group.initial.rebalance.delay.ms (Kafka's default)")
    p.add_argument("--committers", default="1,8", help="concurrent committers, comma list")
    p.add_argument("--commit-seconds", type=float, default=5.0)
    p.add_argument("--messages", type=int, default=200000, help="0: no read-rate test")
    p.add_argument("--message-bytes", type=int, default=100)
    add_output_options(p, "groups")
    p.add_argument("--dir", help="working directory (default: a new temporary one)")
    args = p.parse_args(argv)
    args.dir = args.dir or scratch_dir("kafka-ha-groups-")
    run = Run("groups", "Consumer groups: rebalances, offset commits, read rate",
              "bin/kafka-group-bench.sh", argv)
    overrides = {"group.initial.rebalance.delay.ms": args.initial_rebalance_delay_ms,
                 "group.min.session.timeout.ms": min(6000, args.session_timeout_ms)}
    try:
        with bench_cluster(Path(args.dir), "groups", overrides=overrides) as cluster:
            from kafka_ha.tools.group_read_rate import create_topic
            create_topic(cluster.connect_string, cluster.bootstrap_servers, TOPIC, PARTITIONS)
            bench = GroupBench(args, cluster)
            bench.coordinator("bench-warm-up")   # creates __consumer_offsets
            results = {
                "rebalances": [bench.rebalance(int(n)) for n in args.members.split(",") if n],
                "commits": [bench.commits(int(n)) for n in args.committers.split(",") if n],
                "reads": bench.read_rates() if args.messages else None}
    except BrokerConnectionError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    data = run.write(args.json, method=method(args), results=results, ratios=ratios(results),
                     tables=tables(results), note=args.note)
    print_summary(data, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
