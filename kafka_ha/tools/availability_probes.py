"""Client-side probes for ``kafka-failover-bench.sh``: they see a cluster as users do.

- ``LoopProbe``: in a child process, one thread per broker sends ApiVersions every
  ``interval_s`` on a connection of its own and records how long each answer took.  ApiVersions does no
  work in the broker, so a slow answer is time the broker's event loop spent on
  something else (the loop stall a ZooKeeper heartbeat suffers too).
- ``python -m kafka_ha.tools.availability_probes produce ...``: a producer process
  (the project's own, or with ``--client confluent`` confluent-kafka's librdkafka,
  each with Kafka's producer defaults for retries) that connects,
  loads metadata, waits for ``go`` on stdin, then sends one record to each given
  partition and prints, as JSON, the wall-clock time each one was acknowledged.
  It runs in a process of its own so that its retries and waits are not slowed by
  the bench process's ZooKeeper client and threads.
"""
from __future__ import annotations

import argparse
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import IO

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.framing import encode_request

PROBE_TIMEOUT_S = 30.0


class LoopProbe:
    """ApiVersions round trips to each broker every ``interval_s`` while running.

    The probing runs in a child process (``availability_probes loop-probe``), which
    stamps each round trip itself: a bench that parses logs meanwhile holds its own
    GIL for seconds inside a regular expression, and a probe in its threads would
    record that as a broker stall."""

    def __init__(self, ports: dict[int, int], interval_s: float = 0.05) -> None:
        self.ports = dict(ports)
        self.interval_s = interval_s
        self.samples: dict[int, list[tuple[float, float]]] = {b: [] for b in ports}  # (sent at, s)
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._synced = threading.Condition()
        self._last_sync = 0
        self._syncs = 0

    def __enter__(self) -> "LoopProbe":
        brokers = [f"{b}={p}" for b, p in self.ports.items()]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "kafka_ha.tools.availability_probes", "loop-probe",
             "--interval-ms", str(self.interval_s * 1000), *brokers],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        # Probing has begun when the context is entered: a busy machine takes a while to
        # start a Python process, and a window measured before then would see no probe.
        if self._proc.stdout.readline().strip() != "probing":
            self._proc.kill()
            raise RuntimeError("the loop probe process did not start")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._proc is not None and self._reader is not None
        self._proc.stdin.close()                 # end of input: the child stops probing
        try:
            self._proc.wait(PROBE_TIMEOUT_S + 2)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(5)

    def stop_broker(self, broker: int) -> None:
        """Stop probing ``broker`` (it is about to be killed): its errors are not stalls.
        Returns once the child has taken the order."""
        self._command(f"stop {broker}")
        self._sync()

    def summary(self, since: float = 0.0, until: float = float("inf")) -> dict[int, dict]:
        """Per broker: probes, the longest answer and when it was sent, in [since, until)."""
        if self._proc is not None and self._proc.poll() is None:
            self._sync()                         # every round trip finished so far is in
        out = {}
        for broker, samples in self.samples.items():
            window = [(t, s) for t, s in list(samples) if since <= t < until]
            if window:
                at, longest = max(window, key=lambda x: x[1])
                out[broker] = {"probes": len(window), "max_ms": round(longest * 1000, 1),
                               "max_at": at, "over_500ms": sum(1 for _, s in window if s > 0.5)}
        return out

    def _command(self, line: str) -> None:
        assert self._proc is not None, "use LoopProbe as a context manager"
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()

    def _sync(self, timeout_s: float = 10.0) -> None:
        """Wait until the child has echoed a marker sent now: its samples come in order on
        one pipe, so every round trip it finished before reading the marker is read."""
        with self._synced:
            self._syncs += 1
            mark = self._syncs
        self._command(f"sync {mark}")
        with self._synced:
            if not self._synced.wait_for(lambda: self._last_sync >= mark, timeout_s):
                raise TimeoutError("the loop probe process did not answer")

    def _read(self) -> None:
        assert self._proc is not None
        for line in self._proc.stdout:
            kind, *rest = line.split()
            if kind == "sample":
                broker, started, took = int(rest[0]), float(rest[1]), float(rest[2])
                self.samples.setdefault(broker, []).append((started, took))
            elif kind == "synced":
                with self._synced:
                    self._last_sync = int(rest[0])
                    self._synced.notify_all()


def probe_loops(ports: dict[int, int], interval_s: float, commands: IO[str], out: IO[str]) -> None:
    """The child's side of :class:`LoopProbe`: a thread per broker; ``stop <broker>`` and
    ``sync <n>`` lines on ``commands`` until its end, samples and ``synced <n>`` on ``out``."""
    ports = dict(ports)
    lock = threading.Lock()
    done = threading.Event()

    def say(line: str) -> None:
        with lock:
            out.write(line + "\n")
            out.flush()

    def run(broker: int) -> None:
        sock = None
        correlation = 0
        while not done.is_set() and broker in ports:
            started = time.time()
            try:
                if sock is None:
                    sock = socket.create_connection(("127.0.0.1", ports[broker]), PROBE_TIMEOUT_S)
                correlation += 1
                sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, correlation, "loop-probe", {}))
                _read_frame(sock)
            except OSError:
                # No answer for this long is a stall too (the probe gave up at its
                # timeout, or the connection broke while waiting).
                if sock is not None:
                    sock.close()
                sock = None
            if broker in ports:
                say(f"sample {broker} {started:.6f} {time.time() - started:.6f}")
            done.wait(max(0.0, interval_s - (time.time() - started)))
        if sock is not None:
            sock.close()

    threads = [threading.Thread(target=run, args=(b,), daemon=True) for b in ports]
    say("probing")                 # the first line, before any sample can be printed
    for t in threads:
        t.start()
    for line in commands:
        kind, _, arg = line.strip().partition(" ")
        if kind == "stop":
            ports.pop(int(arg), None)
        elif kind == "sync":
            say(f"synced {arg}")
    done.set()
    for t in threads:
        t.join(PROBE_TIMEOUT_S + 1)


def _read_frame(sock: socket.socket) -> bytes:
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the broker closed the probe connection")
        data += chunk
    return data


# ---- the producer process ---------------------------------------------------------

def produce_each(args: argparse.Namespace) -> dict:
    import gevent
    from kafka_ha.client.producer import Producer

    partitions = [int(p) for p in args.partitions.split(",") if p]
    producer = Producer(args.bootstrap, acks=args.acks, retries=10**9, retry_backoff_ms=100,
                        request_timeout_ms=args.request_timeout_ms,
                        delivery_timeout_ms=args.delivery_timeout_ms, linger_ms=5,
                        client_id=f"failover-bench-acks-{args.acks}")
    producer.partitions_for(args.topic)        # metadata before the clock starts
    print("ready", flush=True)
    sys.stdin.readline()                       # "go": the broker has just been killed
    started = time.time()
    acked: dict[int, float] = {}
    failed: dict[int, str] = {}

    def done(partition: int):
        def callback(future) -> None:
            if future.succeeded():
                acked[partition] = time.time()
            else:
                failed[partition] = repr(future.exception())
        return callback

    for p in partitions:
        producer.send(args.topic, b"x" * 100, partition=p).add_done_callback(done(p))
    deadline = time.monotonic() + args.delivery_timeout_ms / 1000 + 10
    while len(acked) + len(failed) < len(partitions) and time.monotonic() < deadline:
        gevent.sleep(0.05)
    producer.close(timeout=1)
    return {"started": started, "acked": acked, "failed": failed}


def produce_each_confluent(args: argparse.Namespace) -> dict:
    """The same with confluent-kafka (librdkafka), the client the issue's 34-37 s came from.
    With ``--log-leader-moves`` librdkafka writes its "topic" debug log to stderr, with its
    own time stamps, which say when it moved each partition to a new leader
    (failover_timeline.leader_moves).  No Python log callback: with one, a producer of 10k
    partitions timed out loading metadata and then hung in its destructor."""
    from confluent_kafka import Producer

    partitions = [int(p) for p in args.partitions.split(",") if p]
    conf = {"bootstrap.servers": args.bootstrap, "acks": args.acks,
            "request.timeout.ms": args.request_timeout_ms,
            "message.timeout.ms": args.delivery_timeout_ms, "linger.ms": 5,
            "retry.backoff.ms": 100, "client.id": f"failover-bench-acks-{args.acks}"}
    if args.log_leader_moves:
        conf["debug"] = "topic"
    producer = Producer(conf)
    producer.list_topics(args.topic, timeout=120)    # metadata before the clock starts
    print("ready", flush=True)
    sys.stdin.readline()
    started = time.time()
    acked: dict[int, float] = {}
    failed: dict[int, str] = {}

    def delivered(err, msg) -> None:
        if err is None:
            acked[msg.partition()] = time.time()
        else:
            failed[msg.partition()] = str(err)

    for p in partitions:
        producer.produce(args.topic, b"x" * 100, partition=p, on_delivery=delivered)
    deadline = time.monotonic() + args.delivery_timeout_ms / 1000 + 10
    while len(acked) + len(failed) < len(partitions) and time.monotonic() < deadline:
        producer.poll(0.01)                # delivery callbacks run here: stamps are +-10 ms
    producer.flush(1)
    return {"started": started, "acked": acked, "failed": failed}


CLIENTS = {"kafka_ha": produce_each, "confluent": produce_each_confluent}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="availability_probes", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    produce = sub.add_parser("produce", help="one record to each partition after 'go' on stdin")
    produce.add_argument("--bootstrap", required=True)
    produce.add_argument("--topic", required=True)
    produce.add_argument("--partitions", required=True, help="comma list")
    produce.add_argument("--acks", default="all")
    produce.add_argument("--request-timeout-ms", type=int, default=30000)
    produce.add_argument("--delivery-timeout-ms", type=int, default=120000)
    produce.add_argument("--client", choices=sorted(CLIENTS), default="kafka_ha")
    produce.add_argument("--log-leader-moves", action="store_true",
                         help="confluent: librdkafka's topic debug log to stderr (when it moved each "
                              "partition to a new leader)")
    loops = sub.add_parser("loop-probe", help="LoopProbe's child: ApiVersions round trips, one "
                                              "'sample <broker> <sent at> <seconds>' line each")
    loops.add_argument("--interval-ms", type=float, default=50.0)
    loops.add_argument("brokers", nargs="+", metavar="ID=PORT")
    args = p.parse_args(argv)
    if args.command == "loop-probe":
        ports = {int(b): int(port) for b, port in (item.split("=") for item in args.brokers)}
        probe_loops(ports, args.interval_ms / 1000, sys.stdin, sys.stdout)
        return 0
    print(json.dumps(CLIENTS[args.client](args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
