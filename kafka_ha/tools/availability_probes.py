"""Client-side probes for ``kafka-failover-bench.sh``: they see a cluster as users do.

- ``LoopProbe``: one thread per broker sends ApiVersions every ``interval_s`` on a
  connection of its own and records how long each answer took.  ApiVersions does no
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
import sys
import threading
import time

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.framing import encode_request

PROBE_TIMEOUT_S = 30.0


class LoopProbe:
    """ApiVersions round trips to each broker every ``interval_s`` while running."""

    def __init__(self, ports: dict[int, int], interval_s: float = 0.05) -> None:
        self.ports = ports
        self.interval_s = interval_s
        self.samples: dict[int, list[tuple[float, float]]] = {b: [] for b in ports}  # (sent at, s)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(b,), daemon=True) for b in ports]

    def __enter__(self) -> "LoopProbe":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(PROBE_TIMEOUT_S + 1)

    def stop_broker(self, broker: int) -> None:
        """Stop probing ``broker`` (it is about to be killed): its errors are not stalls."""
        self.ports = {b: p for b, p in self.ports.items() if b != broker}

    def _run(self, broker: int) -> None:
        sock = None
        correlation = 0
        while not self._stop.is_set() and broker in self.ports:
            started = time.time()
            try:
                if sock is None:
                    sock = socket.create_connection(("127.0.0.1", self.ports[broker]), PROBE_TIMEOUT_S)
                correlation += 1
                sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, correlation, "loop-probe", {}))
                _read_frame(sock)
                self.samples[broker].append((started, time.time() - started))
            except OSError:
                # No answer for this long is a stall too (the probe gave up at its
                # timeout, or the connection broke while waiting).
                self.samples[broker].append((started, time.time() - started))
                if sock is not None:
                    sock.close()
                sock = None
            self._stop.wait(max(0.0, self.interval_s - (time.time() - started)))
        if sock is not None:
            sock.close()

    def summary(self, since: float = 0.0, until: float = float("inf")) -> dict[int, dict]:
        """Per broker: probes, the longest answer and when it was sent, in [since, until)."""
        out = {}
        for broker, samples in self.samples.items():
            window = [(t, s) for t, s in samples if since <= t < until]
            if window:
                at, longest = max(window, key=lambda x: x[1])
                out[broker] = {"probes": len(window), "max_ms": round(longest * 1000, 1),
                               "max_at": at, "over_500ms": sum(1 for _, s in window if s > 0.5)}
        return out


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
    args = p.parse_args(argv)
    print(json.dumps(CLIENTS[args.client](args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
