"""``kafka-producer-perf-test.sh``: produce N records as fast as allowed and report latency.

The 0.9+ ``org.apache.kafka.tools.ProducerPerformance``: ``--topic
--num-records --record-size|--payload-file --throughput --producer-props``.
Every 5 s a window line is printed, and at the end the summary line with
percentiles, in Kafka's formats (its ProducerPerformance).  Latency is measured
per record from ``send()`` to its acknowledgement, and sampled like Kafka's
``Stats`` (at most ~500 000 kept for the percentiles).
"""
from __future__ import annotations

import random
import sys
import time

import gevent

from kafka_ha.client.cli import (ToolArgumentParser, UsageError, parse_properties,
                                 producer_kwargs, random_bytes, read_properties_file,
                                 run_reporting_errors, warn_unknown)
from kafka_ha.client.future import RecordFuture
from kafka_ha.client.producer import Producer

REPORTING_INTERVAL_MS = 5000
MB = 1024.0 * 1024.0


def build_parser() -> ToolArgumentParser:
    p = ToolArgumentParser(prog="kafka-producer-perf-test.sh",
                           description="This tool is used to verify the producer performance.")
    p.add_argument("--topic", required=True, help="produce messages to this topic")
    p.add_argument("--num-records", type=int, required=True, help="number of messages to produce")
    p.add_argument("--record-size", type=int, help="message size in bytes")
    p.add_argument("--payload-file", help="file of newline-separated payloads to pick from")
    p.add_argument("--throughput", type=float, required=True,
                   help="throttle to approximately THROUGHPUT messages/sec; -1 for no limit")
    p.add_argument("--producer-props", nargs="+", default=[], metavar="PROP-NAME=PROP-VALUE")
    p.add_argument("--producer.config", dest="producer_config", metavar="CONFIG-FILE")
    p.add_argument("--print-metrics", action="store_true", help="accepted for compatibility")
    return p


class Stats:
    """Kafka's ProducerPerformance.Stats: windowed and total latency/throughput."""

    def __init__(self, num_records: int, out=None, now_ms=None,
                 reporting_interval_ms: int = REPORTING_INTERVAL_MS) -> None:
        self.now_ms = now_ms or (lambda: time.time() * 1000)
        self.out = out or sys.stdout
        self.start = self.window_start = self.now_ms()
        self.sampling = num_records // max(1, min(num_records, 500000))
        self.latencies: list[int] = []
        self.reporting_interval_ms = reporting_interval_ms
        self.count = self.bytes = self.total_latency = self.max_latency = 0
        self._new_window(self.start)

    def record(self, iteration: int, latency: int, size: int, now: float) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency
        self.max_latency = max(self.max_latency, latency)
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency
        self.window_max_latency = max(self.window_max_latency, latency)
        if iteration % self.sampling == 0:
            self.latencies.append(latency)
        if now - self.window_start >= self.reporting_interval_ms:
            self.print_window(now)
            self._new_window(now)

    def print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        print("%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, "
              "%.1f ms max latency." % (
                  self.window_count, 1000.0 * self.window_count / elapsed,
                  1000.0 * self.window_bytes / elapsed / MB,
                  self.window_total_latency / max(self.window_count, 1),
                  float(self.window_max_latency)), file=self.out, flush=True)

    def print_total(self) -> None:
        elapsed = max(self.now_ms() - self.start, 1e-9)
        p50, p95, p99, p999 = percentiles(self.latencies, 0.5, 0.95, 0.99, 0.999)
        print("%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, "
              "%.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th." % (
                  self.count, 1000.0 * self.count / elapsed, 1000.0 * self.bytes / elapsed / MB,
                  self.total_latency / max(self.count, 1), float(self.max_latency),
                  p50, p95, p99, p999), file=self.out, flush=True)

    def _new_window(self, now: float) -> None:
        self.window_start = now
        self.window_count = self.window_bytes = 0
        self.window_total_latency = self.window_max_latency = 0


def percentiles(latencies: list[int], *points: float) -> list[int]:
    """Kafka's ``latencies[(int) (p * size)]`` over the sorted samples.

    >>> percentiles(list(range(1, 101)), 0.5, 0.99, 0.999)
    [51, 100, 100]
    """
    ordered = sorted(latencies)
    if not ordered:
        return [0 for _ in points]
    return [ordered[min(int(p * len(ordered)), len(ordered) - 1)] for p in points]


MIN_SLEEP_S = 0.002   # Kafka's ThroughputThrottler.MIN_SLEEP_NS


class Throttler:
    """Kafka's ThroughputThrottler: sleep so that ``sent`` records took sent/rate seconds.

    Like Kafka's, it sleeps only once it is at least 2 ms ahead: a sleep per
    record would cost the sending process more than the sends at low rates.
    """

    def __init__(self, per_second: float, start: float) -> None:
        self.per_second, self.start = per_second, start

    def throttle(self, sent: int, now: float) -> None:
        if self.per_second <= 0:
            return
        ahead = self.start + sent / self.per_second - now
        if ahead >= MIN_SLEEP_S:
            gevent.sleep(ahead)


def load_payloads(args) -> list[bytes]:
    if (args.record_size is None) == (args.payload_file is None):
        raise UsageError("Either --record-size or --payload-file must be specified but not both.")
    if args.payload_file:
        with open(args.payload_file, "rb") as f:
            payloads = [line for line in f.read().split(b"\n") if line]
        if not payloads:
            raise UsageError(f"File is empty: {args.payload_file}")
        print(f"Number of messages read: {len(payloads)}", file=sys.stderr)
        return payloads
    # Kafka fills one payload with random uppercase letters and reuses it.
    rng = random.Random()
    return [random_bytes(rng, args.record_size)]


def producer_config(args) -> dict:
    props = read_properties_file(args.producer_config) if args.producer_config else {}
    props.update(parse_properties(args.producer_props))
    if "bootstrap.servers" not in props:
        raise UsageError("Missing required property: bootstrap.servers (use --producer-props "
                         "bootstrap.servers=HOST:PORT)")
    kwargs, unknown = producer_kwargs(props)
    warn_unknown(unknown)
    kwargs.setdefault("client_id", "producer-performance")
    return kwargs


class PerfCallback:
    """Kafka's PerfCallback: records one send's latency when its ack arrives.

    A slotted object rather than a closure: one tracked object per record
    instead of a function and three cells, which the cyclic GC has to walk
    while tens of thousands of sends are in flight.
    """
    __slots__ = ("iteration", "sent_ms", "size", "stats", "failures")

    def __init__(self, iteration: int, sent_ms: float, size: int, stats: Stats,
                 failures: list[int]) -> None:
        self.iteration, self.sent_ms, self.size = iteration, sent_ms, size
        self.stats, self.failures = stats, failures

    def __call__(self, future: RecordFuture) -> None:
        now = time.time() * 1000
        self.stats.record(self.iteration, int(now - self.sent_ms), self.size, now)
        if future.exception() is not None:
            self.failures[0] += 1
            if self.failures[0] <= 10:
                print(f"ERROR: record {self.iteration}: {future.exception()}", file=sys.stderr)


def run(producer: Producer, topic: str, num_records: int, payloads: list[bytes],
        throughput: float, stats: Stats) -> int:
    """Send everything, wait for the acks; return the number of failed sends."""
    failures = [0]
    throttler = Throttler(throughput, time.monotonic())
    rng = random.Random()
    for i in range(num_records):
        payload = payloads[0] if len(payloads) == 1 else rng.choice(payloads)
        future = producer.send(topic, payload)
        future.add_done_callback(PerfCallback(i, time.time() * 1000, len(payload), stats, failures))
        throttler.throttle(i + 1, time.monotonic())
    producer.flush()
    return failures[0]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        payloads = load_payloads(args)
        producer = Producer(**producer_config(args))
    except (UsageError, ValueError, OSError) as exc:
        parser.die(str(exc))

    def send_all() -> int:
        producer.partitions_for(args.topic)  # unreachable cluster / unknown topic: fail now
        stats = Stats(args.num_records)
        failures = run(producer, args.topic, args.num_records, payloads, args.throughput, stats)
        stats.print_total()
        if failures:
            print(f"ERROR: {failures} of {args.num_records} records failed", file=sys.stderr)
        return 1 if failures else 0

    return run_reporting_errors(send_all, producer)


if __name__ == "__main__":
    sys.exit(main())
