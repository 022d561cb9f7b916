"""``kafka-data-bench.sh``: produce, consume and end-to-end latency against a socket baseline.

Starts its own 3-node ZooKeeper ensemble and 3 brokers on 127.0.0.1, and in
the same run measures:
- the baseline: raw loopback throughput of a plain socket copy between two
  Python processes (what this machine moves through one TCP connection);
- produce throughput with the project's perf tool, acks=1 and acks=all, on
  an RF=3 topic, for 100-byte and 1 KiB messages;
- consumer throughput reading the 1 KiB data back;
- end-to-end latency (produce one, consume it) while a background producer
  runs at 10% of the measured acks=all peak.
It prints a Markdown table for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import multiprocessing
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka_ha.tools.controller_bench import free_ports
from kafka_ha.tools.local_cluster import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
FINAL = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg "
                   r"latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th")


def _sink(port_queue, total: int) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port_queue.put(server.getsockname()[1])
    conn, _ = server.accept()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if not n:
            break
        got += n
    conn.sendall(b"k")
    conn.close()


def socket_baseline(megabytes: int = 512) -> float:
    """MB/s of one loopback TCP connection between two Python processes."""
    total = megabytes << 20
    ports: multiprocessing.Queue = multiprocessing.Queue()
    sink = multiprocessing.Process(target=_sink, args=(ports, total))
    sink.start()
    s = socket.create_connection(("127.0.0.1", ports.get(timeout=10)))
    chunk = b"\0" * (1 << 20)
    started = time.monotonic()
    for _ in range(megabytes):
        s.sendall(chunk)
    s.recv(1)
    elapsed = time.monotonic() - started
    s.close()
    sink.join()
    return megabytes / elapsed


def tool(script: str, *args: str, timeout: float = 900) -> str:
    done = subprocess.run([str(ROOT / "bin" / script), *args], capture_output=True, text=True,
                          timeout=timeout, env={"KAFKA_HA_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str, throughput: int = -1) -> dict:
    out = tool("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", str(records),
               "--record-size", str(size), "--throughput", str(throughput), "--producer-props",
               f"bootstrap.servers={bootstrap}", f"acks={acks}", "linger.ms=5", "batch.size=65536")
    m = FINAL.search(out)
    if not m:
        raise RuntimeError(f"no final line in producer perf output: {out[-500:]}")
    return {"msgs": float(m[2]), "mb": float(m[3]), "p50": int(m[6]), "p99": int(m[8])}


def consume(bootstrap: str, topic: str, messages: int) -> dict:
    out = tool("kafka-consumer-perf-test.sh", "--broker-list", bootstrap, "--topic", topic,
               "--messages", str(messages))
    row = out.strip().splitlines()[-1].split(", ")
    return {"mb": float(row[3]), "msgs": float(row[5])}


def e2e(bootstrap: str, topic: str, messages: int, size: int) -> dict:
    out = tool("kafka-e2e-latency.sh", bootstrap, topic, str(messages), "all", str(size))
    avg = float(re.search(r"Avg latency: ([\d.]+) ms", out)[1])
    p = re.search(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)", out)
    return {"avg": avg, "p50": int(p[1]), "p99": int(p[2]), "p999": int(p[3])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka-data-bench.sh", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200000, help="messages per produce run")
    parser.add_argument("--dir")
    args = parser.parse_args(argv)
    work = Path(args.dir or tempfile.mkdtemp(prefix="kafka-ha-data-bench-"))
    zk_port = free_ports(1)[0] // 10 * 10
    cluster = LocalCluster(work, brokers=3, zk_port=zk_port, broker_ports=free_ports(3),
                           zk_session_timeout_ms=6000)
    try:
        print("baseline: raw loopback socket copy ...", file=sys.stderr)
        baseline = socket_baseline()
        cluster.start()
        bootstrap = cluster.bootstrap_servers
        for topic in ("bench-100", "bench-1k", "bench-e2e"):
            tool("kafka-topics.sh", "--zookeeper", cluster.connect_string, "--create", "--topic", topic,
                 "--partitions", "6", "--replication-factor", "3")
        time.sleep(2)
        results = {}
        for size, topic in ((100, "bench-100"), (1024, "bench-1k")):
            for acks in ("1", "all"):
                print(f"produce {size} B acks={acks} ...", file=sys.stderr)
                results[(size, acks)] = produce(bootstrap, topic, args.records, size, acks)
        print("consume ...", file=sys.stderr)
        consumed = consume(bootstrap, "bench-1k", 2 * args.records)
        peak = results[(1024, "all")]["msgs"]
        print(f"e2e latency with background load at {int(peak / 10)} msgs/s ...", file=sys.stderr)
        background = subprocess.Popen([str(ROOT / "bin" / "kafka-producer-perf-test.sh"), "--topic",
                                       "bench-1k", "--num-records", str(int(peak / 10) * 60),
                                       "--record-size", "1024", "--throughput", str(int(peak / 10)),
                                       "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      env={"KAFKA_HA_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
        time.sleep(2)
        latency = e2e(bootstrap, "bench-e2e", 5000, 1024)
        background.kill()
        print(f"raw loopback socket copy (baseline, same run): **{baseline:.0f} MB/s**\n")
        print("| workload | msgs/s | MB/s | producer latency p50 / p99 |")
        print("|---|---:|---:|---:|")
        for (size, acks), r in results.items():
            print(f"| produce {size} B, acks={acks}, RF 3 | {r['msgs']:.0f} | {r['mb']:.2f} | "
                  f"{r['p50']} / {r['p99']} ms |")
        print(f"| consume 1 KiB (from the leaders) | {consumed['msgs']:.0f} | {consumed['mb']:.2f} | - |")
        print(f"\nend-to-end latency, 1 KiB, acks=all, with a producer at {int(peak / 10)} msgs/s "
              f"(10% of the acks=all peak): avg {latency['avg']:.2f} ms, p50 {latency['p50']} ms, "
              f"p99 {latency['p99']} ms, p99.9 {latency['p999']} ms")
    finally:
        cluster.stop()
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
