"""``kafka-consumer-perf-test.sh``: consume N messages and report throughput (Kafka 2.x format).

Like 2.x's ConsumerPerformance it reads from the beginning (``--from-latest``
to start at the end), polls until ``--messages`` were read or nothing came
for ``--timeout`` ms, and prints the header and one row::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

Partitions are assigned directly (no group join), so rebalance.time.ms is 0.
``--threads`` is accepted and ignored, as in 2.x.  Without
``--show-detailed-stats`` a progress line goes to stderr every reporting
interval.
"""
from __future__ import annotations

import sys
import time

from kafka_ha.client.cli import (ToolArgumentParser, UsageError, consumer_kwargs, java_date,
                                 read_properties_file, run_reporting_errors, warn_unknown)
from kafka_ha.client.consumer import Consumer
from kafka_ha.clock import now_ms

MB = 1024.0 * 1024.0
EXTRA_HEADER = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"


def build_parser() -> ToolArgumentParser:
    p = ToolArgumentParser(prog="kafka-consumer-perf-test.sh",
                           description="This tool helps in performance test for the full zookeeper "
                                       "consumer")
    p.add_argument("--broker-list", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--bootstrap-server", help="Alias of --broker-list.")
    p.add_argument("--topic", help="REQUIRED: The topic to consume from.")
    p.add_argument("--messages", type=int, help="REQUIRED: The number of messages to send or consume")
    p.add_argument("--fetch-size", type=int, default=1048576,
                   help="The amount of data to fetch in a single request (default: 1048576).")
    p.add_argument("--threads", type=int, default=10, help="Number of processing threads (ignored).")
    p.add_argument("--num-fetch-threads", type=int, default=1, help="Ignored.")
    p.add_argument("--group", default=None, help="The group id to consume on.")
    p.add_argument("--from-latest", action="store_true")
    p.add_argument("--timeout", type=int, default=10000,
                   help="The maximum allowed time in ms between returned records (default: 10000).")
    p.add_argument("--reporting-interval", type=int, default=5000)
    p.add_argument("--show-detailed-stats", action="store_true")
    p.add_argument("--hide-header", action="store_true")
    p.add_argument("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS",
                   help="Only the default, yyyy-MM-dd HH:mm:ss:SSS, is supported.")
    p.add_argument("--consumer.config", dest="consumer_config")
    p.add_argument("--socket-buffer-size", type=int, default=2097152, help="Ignored.")
    p.add_argument("--print-metrics", action="store_true", help="Ignored.")
    return p


def header(detailed: bool) -> str:
    first = "time, threadId" if detailed else "start.time, end.time"
    return first + ", data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec" + EXTRA_HEADER


def summary_row(start_ms: float, end_ms: float, total_bytes: int, messages: int,
                join_ms: int = 0) -> str:
    """The final row, exactly as 2.x ConsumerPerformance formats it.

    >>> summary_row(0, 2000, 2 * 1024 * 1024, 1000).split(", ")[2:]
    ['2.0000', '1.0000', '1000', '500.0000', '0', '2000', '1.0000', '500.0000']
    """
    elapsed_s = max(end_ms - start_ms, 1) / 1000.0
    fetch_ms = max(int(end_ms - start_ms) - join_ms, 1)
    mb = total_bytes / MB
    return "%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f" % (
        perf_date(start_ms), perf_date(end_ms), mb, mb / elapsed_s, messages,
        messages / elapsed_s, join_ms, int(end_ms - start_ms) - join_ms,
        mb / (fetch_ms / 1000.0), messages / (fetch_ms / 1000.0))


def detailed_row(thread_id: int, now_ms: float, last_ms: float, total_bytes: int,
                 last_bytes: int, messages: int, last_messages: int, join_ms: int = 0) -> str:
    """printBasicProgress + printExtendedProgress of a --show-detailed-stats interval."""
    elapsed = max(now_ms - last_ms, 1.0)
    interval_mb = (total_bytes - last_bytes) / MB
    fetch_ms = int(now_ms - last_ms) - join_ms
    fetch_rates = ((0.0, 0.0) if fetch_ms <= 0 else
                   (1000.0 * interval_mb / fetch_ms, 1000.0 * (messages - last_messages) / fetch_ms))
    return "%s, %d, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f" % (
        perf_date(now_ms), thread_id, total_bytes / MB, 1000.0 * interval_mb / elapsed, messages,
        (messages - last_messages) / elapsed * 1000.0, join_ms, fetch_ms, *fetch_rates)


def perf_date(ms: float) -> str:
    return java_date(ms, sep=":")


class PerfRun:
    """The consume loop of ConsumerPerformance.consume()."""

    def __init__(self, consumer: Consumer, args, out=None) -> None:
        self.consumer, self.args, self.out = consumer, args, out or sys.stdout
        self.messages = self.bytes = 0
        self.last_messages = self.last_bytes = 0

    def run(self) -> None:
        now = self.last_report = self.last_consumed = time.time() * 1000
        while self.messages < self.args.messages and now - self.last_consumed <= self.args.timeout:
            records = self.consumer.poll(100)
            now = time.time() * 1000
            if records:
                self.last_consumed = now
            for record in records:
                self.messages += 1
                self.bytes += len(record.key or b"") + len(record.value or b"")
            if records and now - self.last_report >= self.args.reporting_interval:
                self._report(now)
        if self.messages < self.args.messages:
            print(f"WARNING: Exiting before consuming the expected number of messages: timeout "
                  f"({self.args.timeout} ms) exceeded. You can use the --timeout option to "
                  f"increase the timeout.", file=self.out)

    def _report(self, now: float) -> None:
        if self.args.show_detailed_stats:
            print(detailed_row(0, now, self.last_report, self.bytes, self.last_bytes,
                               self.messages, self.last_messages), file=self.out, flush=True)
        else:
            print(f"{perf_date(now)}: consumed {self.messages} messages "
                  f"({self.bytes / MB:.4f} MB) so far", file=sys.stderr, flush=True)
        self.last_report, self.last_bytes, self.last_messages = now, self.bytes, self.messages


def make_consumer(args, servers: str) -> Consumer:
    props = read_properties_file(args.consumer_config) if args.consumer_config else {}
    kwargs, unknown = consumer_kwargs(props)
    warn_unknown(unknown)
    kwargs.update(bootstrap_servers=servers, max_partition_fetch_bytes=args.fetch_size,
                  auto_offset_reset="latest" if args.from_latest else "earliest")
    if args.group:
        kwargs["group_id"] = args.group
    kwargs.setdefault("client_id", "consumer-perf")
    return Consumer(**kwargs)


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    servers = args.broker_list or args.bootstrap_server
    for value, name in ((servers, "broker-list"), (args.topic, "topic"),
                        (args.messages, "messages")):
        if value is None:
            parser.die(f'Missing required argument "[{name}]"')
    try:
        consumer = make_consumer(args, servers)
    except (UsageError, ValueError, OSError) as exc:
        parser.die(str(exc))

    def consume() -> int:
        consumer.assign([(args.topic, p) for p in consumer.partitions_for(args.topic)])
        if not args.group:
            (consumer.seek_to_end if args.from_latest else consumer.seek_to_beginning)()
        if not args.hide_header:
            print(header(args.show_detailed_stats), file=out)
        run = PerfRun(consumer, args, out)
        start_ms = now_ms()
        run.run()
        end_ms = now_ms()
        if not args.show_detailed_stats:
            print(summary_row(start_ms, end_ms, run.bytes, run.messages), file=out, flush=True)
        return 0

    return run_reporting_errors(consume, consumer)


if __name__ == "__main__":
    sys.exit(main())
