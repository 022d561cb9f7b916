"""``kafka-topic-admin-bench.sh``: how fast topics are created through the Admin API
(CreateTopics to the controller), next to the ZooKeeper script path, in one run.

On 3 real brokers (a real 3-node ZooKeeper ensemble), ``--topics`` topics per path,
created in rounds of ``--round`` so that the paths take turns on a cluster that grows
alike for each:

- **ZooKeeper script path**: what ``kafka-topics.sh --zookeeper --create`` does for each
  topic (round-robin assignment over the live brokers, then the admin store's one
  multi per topic, :class:`kafka_ha.admin.zk_admin.ZkAdmin`), in one process with one
  session (no interpreter start per topic), then waiting until Metadata shows a leader
  for every new partition: the point at which the topics are usable.
- **Admin API, one topic per request**: CreateTopics v3 with one topic, one request
  after another, each answered once its leaders are known (Kafka's semantics).
- **Admin API, a round per request**: one CreateTopics v3 carrying the whole round.

Each path's rate is topics over the summed time of its rounds.  Results go to
``--json`` (default bench-results/topic-admin.json) and, as tables, to stdout.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from kafka_ha.admin.assignment import assign_replicas
from kafka_ha.admin.topic_admin_client import TopicAdminClient, creatable_topic
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.bench_results import Run, Table, add_output_options, print_summary, ratio, scratch_dir
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.tools import controller_bench
from kafka_ha.tools.controller_bench import bench_cluster, progress
from kafka_ha.tools.local_cluster import LocalCluster

PATHS = ("zookeeper", "api-single", "api-batch")
LABELS = {"zookeeper": "ZooKeeper script path (AdminStore)",
          "api-single": "Admin API, 1 topic per CreateTopics",
          "api-batch": "Admin API, one CreateTopics per round"}
TIMEOUT_S = 300


class TopicAdminBench:
    def __init__(self, args: argparse.Namespace, cluster: LocalCluster) -> None:
        self.args = args
        self.client = TopicAdminClient(cluster.bootstrap_servers, timeout_s=TIMEOUT_S,
                                       client_id="topic-admin-bench")
        self.zk = ZkAdmin(cluster.connect_string).__enter__()

    def close(self) -> None:
        self.client.__exit__()
        self.zk.__exit__()

    def online(self, topics: list[str]) -> bool:
        snap = self.client.metadata(topics)
        return all(snap.partitions_for(t) and len(snap.available_partitions_for(t)) ==
                   self.args.partitions for t in topics)

    def zookeeper(self, names: list[str]) -> None:
        a = self.args
        brokers = self.zk.store.live_broker_ids()
        for name in names:
            self.zk.create_topic(name, assign_replicas(brokers, a.partitions, a.replication_factor), {})
        controller_bench.wait_for(lambda: self.online(names), TIMEOUT_S,
                                  f"leaders for {len(names)} topics", poll_s=0.05)

    def _check(self, results: dict) -> None:
        bad = {n: r for n, r in results.items() if r[0] != ErrorCode.NONE}
        if bad:
            raise RuntimeError(f"CreateTopics refused {len(bad)} topics, e.g. {next(iter(bad.items()))}")

    def api_single(self, names: list[str]) -> None:
        for name in names:
            self._check(self.client.create_topics(
                [creatable_topic(name, self.args.partitions, self.args.replication_factor)]))

    def api_batch(self, names: list[str]) -> None:
        self._check(self.client.create_topics(
            [creatable_topic(n, self.args.partitions, self.args.replication_factor) for n in names]))

    def run(self) -> dict:
        a = self.args
        seconds = dict.fromkeys(PATHS, 0.0)
        runners = {"zookeeper": self.zookeeper, "api-single": self.api_single,
                   "api-batch": self.api_batch}
        done = 0
        while done < a.topics:
            size = min(a.round, a.topics - done)
            for path in PATHS:
                names = [f"{path}-{i}" for i in range(done, done + size)]
                start = time.perf_counter()
                runners[path](names)
                seconds[path] += time.perf_counter() - start
            done += size
            progress(f"{done}/{a.topics} topics per path")
        return {path: {"topics": a.topics, "seconds": round(seconds[path], 3),
                       "per_second": round(a.topics / seconds[path], 1)} for path in PATHS}


def method(args: argparse.Namespace) -> str:
    return (f"3 broker processes and a 3-node ZooKeeper ensemble on one machine. {args.topics} "
            f"topics per path of {args.partitions} partition(s) at replication factor "
            f"{args.replication_factor}, in rounds of {args.round} where the three paths take "
            f"turns. ZooKeeper path: ZkAdmin.create_topic per topic from one process and session, "
            f"timed until Metadata shows every new partition led. Admin API: CreateTopics v3 to "
            f"the controller, timed until its answer, which comes once every new partition has a "
            f"leader in the controller's metadata cache.")


def tables(results: dict) -> list[Table]:
    table = Table("Topic creation rate", [("path", "", 0), ("topics", "", 0), ("time", "s", 2),
                                          ("rate", "topics/s", 1)],
                  note="Each path's time is the sum over its rounds; all three end when the "
                       "topics' leaders are known.")
    for path in PATHS:
        r = results[path]
        table.rows.append([LABELS[path], r["topics"], r["seconds"], r["per_second"]])
    return [table]


def ratios(results: dict) -> list[dict]:
    zk = results["zookeeper"]["per_second"]
    return [ratio(LABELS[p], results[p]["per_second"], LABELS["zookeeper"], zk, "topics/s")
            for p in ("api-single", "api-batch")]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka-topic-admin-bench.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topics", type=int, default=1000, help="topics per path")
    p.add_argument("--round", type=int, default=100, help="topics per path per turn")
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--replication-factor", type=int, default=2)
    add_output_options(p, "topic-admin")
    p.add_argument("--dir", help="working directory (default: a new temporary one)")
    args = p.parse_args(argv)
    args.dir = args.dir or scratch_dir("kafka-ha-topic-admin-")
    run = Run("topic-admin", "Topic creation: Admin API next to the ZooKeeper script path",
              "bin/kafka-topic-admin-bench.sh", argv)
    with bench_cluster(Path(args.dir), "topic-admin") as cluster:
        bench = TopicAdminBench(args, cluster)
        try:
            controller_bench.wait_for(lambda: bench.client.metadata([]).controller_id >= 0, 60,
                                      "a controller")
            results = bench.run()
        finally:
            bench.close()
    data = run.write(args.json, method=method(args), results=results, ratios=ratios(results),
                     tables=tables(results), note=args.note)
    print_summary(data, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
