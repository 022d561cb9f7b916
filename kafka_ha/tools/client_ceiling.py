"""The ceiling of a client on this machine: a null sink, and the same producer against it.

Issue 3's throughput target was an absolute figure (40 MB/s) on a shared 2-core
machine whose speed moves by a third from one hour to the next.  Stated as a
ratio, it compares the cluster with what the *same client, same settings* can
push through this machine at all:

- ``python -m kafka_ha.tools.client_ceiling sink --partitions N``: a process that
  speaks just enough of Kafka's protocol (ApiVersions, Metadata naming itself the
  leader of every partition of every topic asked for, Produce) to take a
  producer's requests and acknowledge them at once, storing nothing.  It runs on
  the project's own protocol server, so framing and decoding cost what they cost
  a broker; everything a broker does beyond that is what the ratio measures.
  With ``--answer-delay-ms D`` it answers each Produce D ms after it came (the
  connection goes on reading meanwhile): a replicated write's round trip with no
  CPU behind it, which shows how a client's rate depends on that round trip alone
  (``kafka-idempotence-bench.sh``).
- ``python -m kafka_ha.tools.client_ceiling produce --bootstrap ...``: one
  confluent-kafka (librdkafka) producer run that prints, as JSON, its MB/s, its
  records/s and the CPU seconds it used.

``kafka-data-bench.sh`` runs both in the same run as the cluster's produce runs.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# The producer settings of every run, against the sink and against the cluster.
CONFLUENT_SETTINGS = {"linger.ms": 5, "batch.size": 65536, "compression.type": "none"}


# ---- the null sink ---------------------------------------------------------------------

class NullSink:
    """A request handler for ``ProtocolServer`` that acknowledges and forgets."""

    def __init__(self, host: str, port: int, partitions: int, answer_delay_ms: float = 0) -> None:
        self.host, self.port, self.partitions = host, port, partitions
        self.answer_delay_s = answer_delay_ms / 1000
        self.next_offset: dict[tuple[str, int], int] = {}
        self.records_bytes = 0

    def __call__(self, header, reader):
        from kafka_ha.protocol.api import ApiKey, api_versions_entries
        from kafka_ha.protocol.framing import decode_request_body

        body = decode_request_body(header, reader)
        version = header.api_version
        if header.api_key == ApiKey.API_VERSIONS:
            keys = [e for e in api_versions_entries()
                    if e["api_key"] in (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE,
                                        ApiKey.INIT_PRODUCER_ID)]
            return {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}, version
        if header.api_key == ApiKey.METADATA:
            response = self._metadata(body["topics"] or [])
            if version >= 2:
                response["cluster_id"] = None
            if version >= 3:
                response["throttle_time_ms"] = 0
            return response, version
        if header.api_key == ApiKey.PRODUCE:
            return self._produce(body, version)
        if header.api_key == ApiKey.INIT_PRODUCER_ID:
            # An idempotent producer's id; the sink checks no sequence (it keeps nothing).
            return {"throttle_time_ms": 0, "error_code": 0, "producer_id": 1,
                    "producer_epoch": 0}, version
        raise ValueError(f"the null sink serves no api key {header.api_key}")

    def _metadata(self, topics: list[str]) -> dict[str, Any]:
        me = 0
        return {"brokers": [{"node_id": me, "host": self.host, "port": self.port, "rack": None}],
                "controller_id": me,
                "topics": [{"error_code": 0, "name": t, "is_internal": False, "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": me, "leader_epoch": 0,
                     "replica_nodes": [me], "isr_nodes": [me], "offline_replicas": []}
                    for p in range(self.partitions)]} for t in topics]}

    def _produce(self, body: dict[str, Any], version: int):
        topics = []
        for topic in body["topic_data"]:
            parts = []
            for part in topic["partition_data"]:
                key = (topic["name"], part["index"])
                base = self.next_offset.get(key, 0)
                self.next_offset[key] = base + 1   # offsets only have to grow
                self.records_bytes += len(part["records"] or b"")
                entry = {"index": part["index"], "error_code": 0, "base_offset": base}
                if version >= 2:
                    entry["log_append_time_ms"] = -1
                if version >= 5:
                    entry["log_start_offset"] = 0
                parts.append(entry)
            topics.append({"name": topic["name"], "partition_responses": parts})
        if body["acks"] == 0:
            return None
        response: dict[str, Any] = {"responses": topics}
        if version >= 1:
            response["throttle_time_ms"] = 0
        if self.answer_delay_s > 0:
            return _answered_at(time.monotonic() + self.answer_delay_s, response), version
        return response, version


def _answered_at(due: float, response: dict[str, Any]):
    """``response``, sent no earlier than ``due`` (time.monotonic()); the connection's
    later requests are read and handled meanwhile, as a broker's acks=all Produce is."""
    import gevent
    from kafka_ha.protocol.deferred import DeferredResponse

    def finish() -> dict[str, Any]:
        left = due - time.monotonic()
        if left > 0:
            gevent.sleep(left)
        return response
    return DeferredResponse(finish)


def serve_sink(partitions: int, answer_delay_ms: float = 0) -> None:
    import gevent
    from kafka_ha.protocol.server import ProtocolServer

    sink = NullSink("127.0.0.1", 0, partitions, answer_delay_ms)
    server = ProtocolServer("127.0.0.1", 0, sink)
    server.start()
    sink.port = server.server_port
    print(f"listening {sink.port}", flush=True)
    gevent.wait()


class SinkProcess:
    """The null sink in a child process of its own, with its CPU time readable; on ``cpus``
    only, if given; answering each Produce ``answer_delay_ms`` after it came."""

    def __init__(self, partitions: int, answer_delay_ms: float = 0, cpus: set[int] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "kafka_ha.tools.client_ceiling", "sink",
                                      "--partitions", str(partitions),
                                      "--answer-delay-ms", str(answer_delay_ms)],
                                     stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                     preexec_fn=None if cpus is None else _pinned(cpus))
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "listening":
            self.proc.kill()
            raise RuntimeError(f"the null sink did not start: {line}")
        self.bootstrap = f"127.0.0.1:{line[1]}"

    def __enter__(self) -> "SinkProcess":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.proc.kill()
        self.proc.wait()


# ---- the producer run ------------------------------------------------------------------

def produce_run(bootstrap: str, topic: str, records: int, size: int, acks: str,
                idempotence: bool = False, settings: dict | None = None,
                round_trips: bool = False) -> dict[str, float]:
    """One confluent-kafka producer, in this process: as fast as it goes, then flush.
    ``settings``: the producer's (default: CONFLUENT_SETTINGS).  ``round_trips``: also
    report librdkafka's own mean request round trip to the leaders (``rtt_ms``)."""
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap, "acks": acks,
              **(CONFLUENT_SETTINGS if settings is None else settings),
              "enable.idempotence": idempotence}
    windows: list[dict] = []
    if round_trips:
        config.update({"statistics.interval.ms": 1000,
                       "stats_cb": lambda text: windows.append(json.loads(text))})
    producer = Producer(config)
    producer.list_topics(topic, timeout=30)
    value = b"x" * size
    failed = []

    def delivered(err, _msg) -> None:
        if err is not None:
            failed.append(str(err))

    cpu = _cpu_seconds()
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:                 # the local queue is full: let it drain
                producer.poll(0.005)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("the producer did not deliver everything within 120 s")
    elapsed = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu
    if failed:
        raise RuntimeError(f"{len(failed)} records failed, e.g. {failed[0]}")
    mb = records * size / 1024 / 1024
    result = {"mb_s": round(mb / elapsed, 2), "msgs_s": round(records / elapsed),
              "producer_cpu_ms_per_mb": round(1000 * cpu / mb, 1), "seconds": round(elapsed, 2)}
    if round_trips:
        result["rtt_ms"] = mean_round_trip_ms(windows)
    return result


def mean_round_trip_ms(windows: list[dict]) -> float | None:
    """The mean request round trip over librdkafka's statistics windows, weighted by each
    window's request count, to the brokers it learned from metadata (the bootstrap
    connection's few requests left out); None if no window counted one.

    >>> w = {"brokers": {"a": {"nodeid": 1, "rtt": {"avg": 20000, "cnt": 3}},
    ...                  "b": {"nodeid": -1, "rtt": {"avg": 900000, "cnt": 1}}}}
    >>> mean_round_trip_ms([w, {"brokers": {"a": {"nodeid": 1, "rtt": {"avg": 40000, "cnt": 1}}}}])
    25.0
    >>> mean_round_trip_ms([]) is None
    True
    """
    total = count = 0
    for window in windows:
        for broker in window.get("brokers", {}).values():
            rtt = broker.get("rtt", {})
            if broker.get("nodeid", -1) >= 0 and rtt.get("cnt"):
                total += rtt["avg"] * rtt["cnt"]
                count += rtt["cnt"]
    return round(total / count / 1000, 1) if count else None


def produce_in_child(bootstrap: str, topic: str, records: int, size: int, acks: str,
                     idempotence: bool = False, settings: dict | None = None,
                     cpus: set[int] | None = None, round_trips: bool = False) -> dict[str, float]:
    """``produce_run`` in a fresh process, so its threads compete with nothing of ours;
    on ``cpus`` only, if given."""
    done = subprocess.run([sys.executable, "-m", "kafka_ha.tools.client_ceiling", "produce",
                           "--bootstrap", bootstrap, "--topic", topic, "--records", str(records),
                           "--record-size", str(size), "--acks", acks,
                           *(["--idempotence"] if idempotence else []),
                           *(["--round-trips"] if round_trips else []),
                           *([] if settings is None else ["--settings", json.dumps(settings)])],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          preexec_fn=None if cpus is None else _pinned(cpus))
    if done.returncode != 0:
        raise RuntimeError(f"confluent-kafka producer run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _pinned(cpus: set[int]):
    """A child's preexec_fn that runs it on ``cpus`` only."""
    return lambda: os.sched_setaffinity(0, cpus)


# ---- in kafka-data-bench.sh ------------------------------------------------------------

CEILING_RECORDS = {1024: 500_000, 100: 1_000_000}     # a few seconds against the cluster
KAFKA_BROKER_CPU_S_PER_500MB_100B = 13   # Kafka 3.8, 3 KRaft brokers, this box (issue 23)


def ceiling_runs(cluster_bootstrap: str, topics: dict[int, str], repeat: int,
                 broker_pids: tuple[int, ...]) -> list[dict[str, Any]]:
    """For each record size: the same confluent-kafka producer (acks=all) into the null
    sink and into the cluster (RF 3), ``repeat`` times interleaved; median runs."""
    from kafka_ha.tools.processes import process_cpu_seconds

    rows = []
    for size, topic in topics.items():
        records = CEILING_RECORDS.get(size, 500_000)
        sink_runs, cluster_runs = [], []
        for _ in range(repeat):
            with SinkProcess(partitions=6) as sink:
                sink_runs.append(produce_in_child(sink.bootstrap, topic, records, size, "all"))
            cpu = sum(process_cpu_seconds(pid) for pid in broker_pids)
            run = produce_in_child(cluster_bootstrap, topic, records, size, "all")
            cpu = sum(process_cpu_seconds(pid) for pid in broker_pids) - cpu
            mb = records * size / 1024 / 1024
            run["brokers_cpu_ms_per_mb"] = round(1000 * cpu / mb, 1)
            run["brokers_cpu_s_per_500mb"] = round(500 * cpu / mb, 1)
            cluster_runs.append(run)
        rows.append({"size": size, "records": records, "sink": _median(sink_runs),
                     "cluster": _median(cluster_runs)})
    return rows


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(runs, key=lambda r: r["mb_s"])
    return dict(ordered[len(ordered) // 2], lo=ordered[0]["mb_s"], hi=ordered[-1]["mb_s"], n=len(runs))


def ceiling_table_rows(rows: list[dict[str, Any]]) -> list[list]:
    out = []
    for r in rows:
        sink, cluster = r["sink"], r["cluster"]
        out.append([f"{r['size']} B into the null sink (ceiling)", sink["msgs_s"], sink["mb_s"],
                    sink["lo"], sink["hi"], sink["producer_cpu_ms_per_mb"], None, None])
        out.append([f"{r['size']} B, acks=all, RF 3 cluster", cluster["msgs_s"], cluster["mb_s"],
                    cluster["lo"], cluster["hi"], cluster["producer_cpu_ms_per_mb"],
                    cluster["brokers_cpu_ms_per_mb"], cluster["brokers_cpu_s_per_500mb"]])
    return out


CEILING_COLUMNS = [("confluent-kafka producer, acks=all", "", 0), ("msgs/s", "", 0), ("MB/s", "", 2),
                   ("MB/s low", "", 2), ("MB/s high", "", 2), ("CPU per MB: producer", "ms", 1),
                   ("3 brokers", "ms", 1), ("3 brokers per 500 MB", "s", 1)]


def ceiling_ratios(rows: list[dict[str, Any]], ratio) -> list[dict]:
    out = []
    for r in rows:
        name = f"confluent-kafka produce {r['size']} B, acks=all, RF 3"
        out.append(ratio(name, r["cluster"]["mb_s"], "the same producer into a null sink",
                         r["sink"]["mb_s"], "MB/s", goal=">= 0.7" if r["size"] == 1024 else None))
        if r["size"] == 100:
            out.append(ratio(f"broker CPU per 500 MB of {r['size']} B records",
                             r["cluster"]["brokers_cpu_s_per_500mb"],
                             "Kafka 3.8 on this box (issue 23's measurement)",
                             KAFKA_BROKER_CPU_S_PER_500MB_100B, "s", goal="<= 1.3"))
    return out


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)    # librdkafka's threads included
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="client_ceiling", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    sink = sub.add_parser("sink", help="serve a null sink; prints 'listening <port>'")
    sink.add_argument("--partitions", type=int, default=6)
    sink.add_argument("--answer-delay-ms", type=float, default=0,
                      help="answer each Produce this long after it came (default: at once)")
    run = sub.add_parser("produce", help="one confluent-kafka producer run; prints JSON")
    run.add_argument("--bootstrap", required=True)
    run.add_argument("--topic", required=True)
    run.add_argument("--records", type=int, default=200000)
    run.add_argument("--record-size", type=int, default=1024)
    run.add_argument("--acks", default="all")
    run.add_argument("--idempotence", action="store_true", help="enable.idempotence=true")
    run.add_argument("--round-trips", action="store_true",
                     help="also report the mean request round trip (librdkafka's statistics)")
    run.add_argument("--settings", type=json.loads, default=None,
                     help="the producer's settings as a JSON object (default: the data bench's)")
    args = p.parse_args(argv)
    if args.command == "sink":
        serve_sink(args.partitions, args.answer_delay_ms)
        return 0
    print(json.dumps(produce_run(args.bootstrap, args.topic, args.records, args.record_size,
                                 args.acks, args.idempotence, args.settings, args.round_trips)),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
