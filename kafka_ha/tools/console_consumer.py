"""``kafka-console-consumer.sh``: print the messages of a topic, one per line.

Follows Kafka 2.x's ConsoleConsumer: ``--offset`` needs ``--partition``,
``--from-beginning`` and ``--offset`` exclude each other, the formatter
honours ``print.key``, ``print.value``, ``print.timestamp``, ``key.separator``
and ``line.separator``, and ``print.headers`` with ``headers.separator`` (KIP-431,
Kafka 2.7: ``k1:v1,k2:v2`` after the timestamp, ``NO_HEADERS`` when there are none), and the run ends with ``Processed a total of N
messages`` on stderr.  Without ``--partition`` every partition of the topic
is assigned (there is no group membership); with ``--group`` positions start
from the group's committed offsets and are committed on exit.
"""
from __future__ import annotations

import sys
import time
from typing import BinaryIO

from kafka_ha.client.cli import (ToolArgumentParser, UsageError, consumer_kwargs, log_line,
                                 parse_properties, warn_unknown)
from kafka_ha.client.consumer import Consumer, ConsumerRecord
from kafka_ha.client.errors import KafkaError

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def build_parser() -> ToolArgumentParser:
    p = ToolArgumentParser(prog="kafka-console-consumer.sh",
                           description="Consume messages from a topic and print them to stdout.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--broker-list", help="Alias of --bootstrap-server.")
    p.add_argument("--topic", help="The topic id to consume on.")
    p.add_argument("--partition", type=int, help="The partition to consume from.")
    p.add_argument("--offset", help="'earliest', 'latest' (default) or a non-negative offset; "
                                    "needs --partition.")
    p.add_argument("--from-beginning", action="store_true",
                   help="Start with the earliest message present instead of the latest.")
    p.add_argument("--max-messages", type=int, help="Exit after consuming this many messages.")
    p.add_argument("--timeout-ms", type=int,
                   help="Exit if no message is available for consumption for this long.")
    p.add_argument("--group", help="The consumer group id (offsets are committed on exit).")
    p.add_argument("--property", action="append", default=[],
                   help="print.key, print.value, print.timestamp, print.headers, key.separator, "
                        "headers.separator, line.separator")
    p.add_argument("--consumer-property", action="append", default=[])
    p.add_argument("--skip-message-on-error", action="store_true")
    return p


def start_offset(args, parser: ToolArgumentParser) -> int | str:
    """The validated start: "earliest", "latest" or an offset (ConsoleConsumerConfig's rules)."""
    if args.partition is not None:
        if args.from_beginning and args.offset is not None:
            parser.die("Options from-beginning and offset cannot be specified together.")
    elif args.offset is not None:
        parser.die("The partition is required when offset is specified.")
    if args.offset is None:
        return "earliest" if args.from_beginning else "latest"
    text = args.offset.lower()
    if text in ("earliest", "latest"):
        return text
    try:
        offset = int(text)
    except ValueError:
        offset = -1
    if offset < 0:
        parser.die(f"The provided offset value '{args.offset}' is incorrect. Valid values are "
                   "'earliest', 'latest', or a non-negative long.")
    return offset


class MessageFormatter:
    """Kafka's DefaultMessageFormatter."""

    def __init__(self, props: dict[str, str]) -> None:
        self.print_key = props.get("print.key", "false").lower() == "true"
        self.print_value = props.get("print.value", "true").lower() == "true"
        self.print_timestamp = props.get("print.timestamp", "false").lower() == "true"
        self.print_headers = props.get("print.headers", "false").lower() == "true"
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.key_separator = props.get("key.separator", "\t").encode()
        self.line_separator = props.get("line.separator", "\n").encode()

    def format(self, record: ConsumerRecord) -> bytes:
        out = []
        if self.print_timestamp:
            kind = TIMESTAMP_TYPES.get(record.timestamp_type)
            out.append(f"{kind}:{record.timestamp_ms}".encode() if kind else b"NO_TIMESTAMP")
            out.append(self.key_separator if self.print_key or self.print_value
                       else self.line_separator)
        if self.print_headers:
            out.append(self.headers_separator.join(
                k.encode() + b":" + (b"null" if v is None else v) for k, v in record.headers)
                if record.headers else b"NO_HEADERS")
            out.append(self.key_separator if self.print_key or self.print_value
                       else self.line_separator)
        if self.print_key:
            out.append(b"null" if record.key is None else record.key)
            out.append(self.key_separator if self.print_value else self.line_separator)
        if self.print_value:
            out.append(b"null" if record.value is None else record.value)
            out.append(self.line_separator)
        return b"".join(out)


def assign(consumer: Consumer, topic: str, partition: int | None, start: int | str,
           use_group: bool) -> None:
    partitions = consumer.partitions_for(topic)
    if partition is not None and partition not in partitions:
        raise UsageError(f"Error: partition {partition} of topic {topic} does not exist "
                         f"(partitions: {', '.join(map(str, partitions))})")
    tps = [(topic, p) for p in ([partition] if partition is not None else partitions)]
    consumer.assign(tps)
    if isinstance(start, int):
        consumer.seek(tps[0], start)
    elif not use_group:
        (consumer.seek_to_beginning if start == "earliest" else consumer.seek_to_end)()


class ConsumeLoop:
    """Print records until max_messages or the idle timeout; remember what was printed."""

    def __init__(self, consumer: Consumer, formatter: MessageFormatter, out: BinaryIO,
                 max_messages: int | None, timeout_ms: int | None) -> None:
        self.consumer, self.formatter, self.out = consumer, formatter, out
        self.max_messages, self.timeout_ms = max_messages, timeout_ms
        self.count = 0
        self.next_offsets: dict[tuple[str, int], int] = {}  # what a group commit may claim

    def run(self) -> bool:
        """Consume; True if it stopped because nothing arrived for timeout_ms."""
        idle_since = time.monotonic()
        while self.max_messages is None or self.count < self.max_messages:
            records = self.consumer.poll(self._poll_ms(idle_since))
            if records:
                idle_since = time.monotonic()
            elif self.timeout_ms is not None and self._idle_ms(idle_since) >= self.timeout_ms:
                return True
            for record in records:
                if self.max_messages is not None and self.count >= self.max_messages:
                    break
                self.out.write(self.formatter.format(record))
                self.count += 1
                self.next_offsets[(record.topic, record.partition)] = record.offset + 1
            self.out.flush()
        return False

    def _idle_ms(self, since: float) -> float:
        return (time.monotonic() - since) * 1000

    def _poll_ms(self, idle_since: float) -> float:
        if self.timeout_ms is None:
            return 1000
        return max(0.0, min(1000.0, self.timeout_ms - self._idle_ms(idle_since)))


def main(argv: list[str] | None = None, out: BinaryIO | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    servers = args.bootstrap_server or args.broker_list
    if not servers:
        parser.die('Missing required argument "[bootstrap-server]"')
    if not args.topic:
        parser.die("Exactly one of whitelist/topic is required.")
    start = start_offset(args, parser)
    try:
        formatter = MessageFormatter(parse_properties(args.property))
        kwargs, unknown = consumer_kwargs(parse_properties(args.consumer_property))
    except UsageError as exc:
        parser.die(str(exc))
    warn_unknown(unknown)
    kwargs.setdefault("group_id", args.group)
    kwargs.setdefault("auto_offset_reset", "earliest" if args.from_beginning else "latest")
    kwargs.update(bootstrap_servers=servers)
    kwargs.setdefault("client_id", "console-consumer")
    try:
        consumer = Consumer(**kwargs)
    except ValueError as exc:
        parser.die(str(exc))
    loop = ConsumeLoop(consumer, formatter, out or sys.stdout.buffer, args.max_messages,
                       args.timeout_ms)
    rc = 0
    try:
        assign(consumer, args.topic, args.partition, start, bool(kwargs["group_id"]))
        if loop.run():
            print(log_line("ERROR", "Error processing message, terminating consumer process: ",
                           "kafka.tools.ConsoleConsumer$"), file=sys.stderr)
            print("org.apache.kafka.common.errors.TimeoutException", file=sys.stderr)
        if kwargs["group_id"] and loop.next_offsets:
            consumer.commit(loop.next_offsets)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        rc = 1
    except KafkaError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        rc = 1
    except KeyboardInterrupt:
        rc = 130
    except BrokenPipeError:
        pass  # `| head` closed our stdout: not a failure of ours
    finally:
        consumer.close()
    print(f"Processed a total of {loop.count} messages", file=sys.stderr)
    return rc

if __name__ == "__main__":
    sys.exit(main())
