"""How ``kafka-failover-bench.sh`` reports its runs: the method text, the median run of each
size, its tables, ratios and plot (the runs themselves are failover_bench.py's)."""
from __future__ import annotations

import argparse

from kafka_ha.bench_results import Table, ratio


CLIENT_NAMES = {"kafka_ha": "the project's own", "confluent": "confluent-kafka"}


def method(args: argparse.Namespace) -> str:
    return (f"One topic of N partitions, RF 3 over 3 brokers, min.insync.replicas 2, a real 3-node "
            f"ZooKeeper ensemble and real broker processes, session timeout "
            f"{args.session_timeout_ms} ms. Every partition first gets one acks=all record, and the "
            f"brokers settle (each under a fifth of a core for 2 s: they finish replicating and "
            f"writing the checkpoints that creation deferred). Then the "
            f"broker (not the controller) that leads the most partitions is killed with SIGKILL, and "
            f"two producer processes ({CLIENT_NAMES[args.client]}, Kafka's producer defaults: retries without end, 100 ms backoff, "
            f"{args.request_timeout_ms} ms request timeout) send one record to each partition it "
            f"led, one with acks=all and one with acks=1: the window is the time from the kill to "
            f"each acknowledgement. The shutdown scenarios send SIGTERM instead (a controlled "
            f"shutdown); in shutdown-all the topic's assignment puts that broker first in every "
            f"replica list, so it leads every partition. Baselines in the same run: the floor, the session timeout plus "
            f"raw kazoo rewriting the same state znodes with pipelined multis, and the acks=1 "
            f"window. A loop stall is the slowest answer to an ApiVersions probe sent to each broker "
            f"every {args.probe_interval_ms} ms (ApiVersions does no work, so a slow answer is time "
            f"the event loop spent elsewhere); the phases come from the brokers' logs (UpdateMetadata "
            f"from state-change.log at DEBUG) and, with confluent-kafka, from librdkafka's topic "
            f"debug log of the acks=all producer (when it moved each partition to its new leader).")


def median_run(runs: list[dict]) -> dict:
    """The run whose acks=all window (max) is the median (the lower one of an even count),
    with every run's window in ``acks_all_max_runs`` and, in ``after_deletion_runs``, what of
    it came after the registration's deletion: ZooKeeper expires a session 4.5-6.5 s after the
    kill, depending on the last heartbeat, and that alone moves the window by 2 s run to run.

    >>> rows = [{"acks_all": {"max": m}, "registration_deleted_s": d}
    ...         for m, d in ((13.4, 6.1), (12.3, 4.8), (12.5, 6.4))]
    >>> row = median_run(rows); row["acks_all"]["max"], row["acks_all_max_runs"]
    (12.5, [12.3, 12.5, 13.4])
    >>> row["after_deletion_runs"]
    [7.5, 6.1, 7.3]
    """
    ordered = sorted(runs, key=lambda r: r["acks_all"]["max"])
    row = dict(ordered[(len(ordered) - 1) // 2])
    row["acks_all_max_runs"] = [r["acks_all"]["max"] for r in ordered]
    row["after_deletion_runs"] = [None if r.get("registration_deleted_s") is None
                                  or by_sigterm(r.get("scenario", "kill")) else   # it exits at the end
                                  round(r["acks_all"]["max"] - r["registration_deleted_s"], 3)
                                  for r in ordered]
    return row


def longest_stall(per_broker: dict) -> float:
    return max((s["max_ms"] for s in per_broker.values()), default=0)


def phase_cell(v) -> str | float | None:
    if isinstance(v, dict):
        return (f"p50 {v['p50']:.2f} s, p90 {v['p90']:.2f} s, max {v['max']:.2f} s (n={v['n']})"
                if v["n"] else "-")
    return v


def tables(rows: list[dict]) -> list[Table]:
    window = Table("Unavailability window after the kill (or SIGTERM), as the producers saw it",
                   [("scenario", "", 0), ("partitions", "", 0), ("led by the victim", "", 0), ("acks=all p50", "s", 2),
                    ("acks=all max", "s", 2), ("acks=1 p50", "s", 2), ("acks=1 max", "s", 2),
                    ("floor (session + raw writes)", "s", 2), ("records not acknowledged", "", 0),
                    ("longest loop stall: create", "ms", 0), ("first writes", "ms", 0),
                    ("failover", "ms", 0), ("acks=all max of each run", "", 0),
                    ("of it after the registration's deletion", "", 0)],
                   note="The median equals the maximum when the producer sends one request per "
                        "leader for all its partitions: the broker answers an acks=all request once "
                        "every partition in it is replicated, as Kafka does. With --repeat, each row "
                        "is the run with the median acks=all max, and the last two columns list every "
                        "run's, and what of it came after ZooKeeper deleted the victim's "
                        "registration after a kill (its session expired 4.5-6.5 s after the kill, "
                        "depending on its last heartbeat).")
    out = [window]
    for r in rows:
        a, b = r["acks_all"], r["acks_1"]
        window.rows.append([SCENARIOS[r.get("scenario", "kill")], r["partitions"], r["led"], a["p50"], a["max"], b["p50"], b["max"],
                            r["floor_s"], r["acks_all_failed"] + r["acks_1_failed"],
                            longest_stall(r["stall_create"]), longest_stall(r["stall_first_write"]),
                            longest_stall(r["stall_failover"]),
                            " / ".join(f"{m:.2f} s" for m in r.get("acks_all_max_runs", [a["max"]])),
                            " / ".join("-" if m is None else f"{m:.2f} s"
                                       for m in r.get("after_deletion_runs", []))])
        out.append(Table(f"Phases at {r['partitions']} partitions ({r['led']} led by the victim), "
                         f"seconds after the {'SIGTERM' if by_sigterm(r.get('scenario', 'kill')) else 'kill'}",
                         [("phase", "", 0), ("at", "s", 2)],
                         [[name, phase_cell(v)] for name, v in r["phases"].items()]))
    return out


SCENARIOS = {"kill": "kill -9", "shutdown": "controlled shutdown",
             "shutdown-all": "controlled shutdown of the leader of all"}


def by_sigterm(scenario: str) -> bool:
    """Whether the scenario stops its victim with SIGTERM (a controlled shutdown).

    >>> [by_sigterm(s) for s in SCENARIOS]
    [False, True, True]
    """
    return scenario.startswith("shutdown")


def ratios(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        at_all = r["acks_all"]["max"]
        if by_sigterm(r.get("scenario", "kill")):
            n = r["partitions"]
            out.append(ratio(f"controlled shutdown done (victim's log), {n} partitions, "
                             f"{r['led']} led by the victim",
                             r["shutdown_s"], "raw multis rewriting the same states",
                             r["floor_write_ms"] / 1000, "s", goal="<= 3 s at 10k per broker"))
            out.append(ratio(f"acks=all writable throughout (max), controlled shutdown, {n} partitions",
                             at_all, "acks=1 (max)", r["acks_1"]["max"], "s"))
            continue
        out.append(ratio(f"acks=all writable again (max), {r['partitions']} partitions", at_all,
                         "floor: session timeout + raw multis", r["floor_s"], "s",
                         goal="<= floor + 1.5 s"))
        out.append(ratio(f"acks=all writable again (max), {r['partitions']} partitions", at_all,
                         "acks=1 writable again (max)", r["acks_1"]["max"], "s"))
    return out


def plots(rows: list[dict]) -> list[dict]:
    rows = [r for r in rows if r.get("scenario", "kill") == "kill"]
    if not rows:
        return []
    return [{"file": "failover-window", "kind": "bar",
             "title": "Unavailability after kill -9 of a leader, by partition count",
             "x_label": "partitions in the topic (the victim led a third)",
             "y_label": "seconds from the kill", "x": [r["partitions"] for r in rows],
             "series": {"acks=all (max)": [r["acks_all"]["max"] for r in rows],
                        "acks=1 (max)": [r["acks_1"]["max"] for r in rows],
                        "floor: session + raw writes": [r["floor_s"] for r in rows]}}]
