"""``kafka-e2e-latency.sh``: Kafka 2.x's EndToEndLatency, one message at a time.

Usage: ``broker_list topic num_messages producer_acks message_size_bytes
[properties_file]``.  Each message is produced synchronously (linger 0), then
consumed from the end of every partition of the topic before the next one is
sent.  The consumer busy-polls (fetch.max.wait.ms 0) as in Kafka's tool, unless
the properties file sets ``fetch.max.wait.ms`` (Kafka's tool ignores it): on a
small machine a spinning consumer takes a core from the brokers it measures,
and a long poll, answered when the high watermark moves, is what a consumer
with default settings does.  Every 1000th message prints ``<i>\\t<ms>``; the
end prints ``Avg latency: %.4f ms``, a blank line, and the 50th/99th/99.9th
percentiles in whole milliseconds.
"""
from __future__ import annotations

import random
import sys
import time

from kafka_ha.client.cli import (consumer_kwargs, random_bytes, read_properties_file,
                                 run_reporting_errors, warn_unknown)
from kafka_ha.client.consumer import Consumer
from kafka_ha.client.producer import Producer

USAGE = ("USAGE: java kafka.tools.EndToEndLatency$ broker_list topic num_messages "
         "producer_acks message_size_bytes [optional] properties_file")
POLL_TIMEOUT_MS = 60000


class LatencyTestError(Exception):
    """The test itself failed (timeout, wrong message): Kafka throws, we exit 1."""


def java_double(value: float) -> str:
    """Scala's Double.toString for the progress lines (plain digits in this range).

    >>> java_double(1.5), java_double(2.0)
    ('1.5', '2.0')
    """
    return repr(float(value))


def summary(latencies_ns: list[int]) -> list[str]:
    """The closing lines, from per-message latencies in nanoseconds.

    >>> summary([1_000_000, 2_000_000, 3_000_000])
    ['Avg latency: 2.0000 ms', '', 'Percentiles: 50th = 2, 99th = 3, 99.9th = 3']
    """
    n = len(latencies_ns)
    ms = sorted(ns // 1000 // 1000 for ns in latencies_ns)
    pick = [ms[min(int(n * p), n - 1)] for p in (0.5, 0.99, 0.999)]
    return [f"Avg latency: {sum(latencies_ns) / n / 1000.0 / 1000.0:.4f} ms", "",
            "Percentiles: 50th = %d, 99th = %d, 99.9th = %d" % tuple(pick)]


def measure(producer: Producer, consumer: Consumer, topic: str, count: int, size: int,
            out=None) -> list[int]:
    out = out or sys.stdout
    rng = random.Random(0)
    latencies = []
    for i in range(count):
        message = random_bytes(rng, size)
        begin = time.perf_counter_ns()
        producer.send(topic, message).get()
        records = consumer.poll(POLL_TIMEOUT_MS)
        elapsed = time.perf_counter_ns() - begin
        if not records:
            raise LatencyTestError(f"poll() timed out before finding a result "
                                   f"(timeout:[{POLL_TIMEOUT_MS}])")
        if records[0].value != message:
            raise LatencyTestError(f"The message read [{records[0].value!r}] did not match "
                                   f"the message sent [{message!r}]")
        if len(records) > 1:
            raise LatencyTestError(f"Only one result was expected during this test. "
                                   f"We found [{len(records)}]")
        if i % 1000 == 0:
            print(f"{i}\t{java_double(elapsed / 1000.0 / 1000.0)}", file=out, flush=True)
        latencies.append(elapsed)
    return latencies


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["--help"], ["-h"]):
        print(USAGE, file=out)
        return 0
    if len(args) not in (5, 6):
        print(USAGE, file=sys.stderr)
        return 1
    brokers, topic, num, acks, size = args[:5]
    if acks not in ("1", "all"):
        print("java.lang.IllegalArgumentException: Latency testing requires synchronous "
              "acknowledgement. Please use 1 or all", file=sys.stderr)
        return 1
    try:
        count, message_len = int(num), int(size)
        props = read_properties_file(args[5]) if len(args) == 6 else {}
        kwargs, unknown = consumer_kwargs(props)
        warn_unknown([k for k in unknown if k not in ("acks", "linger.ms")])
    except (ValueError, OSError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    if count <= 0:
        print("ERROR: num_messages must be positive", file=sys.stderr)
        return 1
    kwargs.setdefault("fetch_max_wait_ms", 0)
    kwargs.update(bootstrap_servers=brokers, auto_offset_reset="latest", group_id=None)
    try:
        producer = Producer(brokers, acks=acks, linger_ms=0, client_id="e2e-latency")
        consumer = Consumer(**kwargs)
    except ValueError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1

    def measure_all() -> int:
        consumer.assign([(topic, p) for p in consumer.partitions_for(topic)])
        consumer.seek_to_end()
        consumer.poll(0)  # resolve the end offsets before the first send
        latencies = measure(producer, consumer, topic, count, message_len, out)
        for line in summary(latencies):
            print(line, file=out)
        return 0

    return run_reporting_errors(measure_all, consumer, producer, also=(LatencyTestError,))


if __name__ == "__main__":
    sys.exit(main())
