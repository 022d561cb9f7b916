"""``kafka-console-producer.sh``: publish one message per line of standard input.

Flags and defaults follow Kafka 2.x's ConsoleProducer (``--timeout`` is the
linger time, 1000 ms; ``--sync`` waits for each message).  With
``--property parse.key=true`` each line is ``key<key.separator>value``; a
line without the separator stops the tool with Kafka's "No key found on
line N" error.  A failed send is logged like Kafka's ErrorLoggingCallback,
and makes the exit code 1.
"""
from __future__ import annotations

import sys
from typing import BinaryIO

from kafka_ha.client.cli import (ToolArgumentParser, UsageError, iter_lines, log_line,
                                 parse_properties, producer_kwargs, run_reporting_errors,
                                 warn_unknown)
from kafka_ha.client.errors import KafkaError
from kafka_ha.client.future import RecordFuture
from kafka_ha.client.producer import Producer

CALLBACK_LOGGER = "org.apache.kafka.clients.producer.internals.ErrorLoggingCallback"


def build_parser() -> ToolArgumentParser:
    p = ToolArgumentParser(prog="kafka-console-producer.sh",
                           description="Read data from standard input and publish it to Kafka.")
    p.add_argument("--broker-list", help="REQUIRED: The broker list string in the form "
                                         "HOST1:PORT1,HOST2:PORT2.")
    p.add_argument("--bootstrap-server", help="Alias of --broker-list (Kafka 2.2+).")
    p.add_argument("--topic", help="REQUIRED: The topic id to produce messages to.")
    p.add_argument("--request-required-acks", default="1",
                   help="The required acks of the producer requests (default: 1).")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default="none",
                   help="'none' or 'gzip' (default 'gzip' if given without a value).")
    p.add_argument("--sync", action="store_true", help="Send each message synchronously.")
    p.add_argument("--timeout", type=int, default=1000,
                   help="Linger time in ms before a partial batch is sent (default: 1000).")
    p.add_argument("--max-partition-memory-bytes", type=int, default=16384,
                   help="Batch size per partition in bytes (default: 16384).")
    p.add_argument("--max-memory-bytes", type=int, default=33554432)
    p.add_argument("--message-send-max-retries", type=int, default=3)
    p.add_argument("--retry-backoff-ms", type=int, default=100)
    p.add_argument("--request-timeout-ms", type=int, default=1500)
    p.add_argument("--property", action="append", default=[],
                   help="parse.key=true|false, key.separator=<sep>, ignore.error=true|false")
    p.add_argument("--producer-property", action="append", default=[],
                   help="A producer config as key=value (overrides the flags).")
    return p


def producer_config(args) -> dict:
    """Producer keyword arguments from the flags, overridden by --producer-property."""
    servers = args.broker_list or args.bootstrap_server
    kwargs = {"bootstrap_servers": servers, "acks": args.request_required_acks,
              "compression": args.compression_codec, "linger_ms": args.timeout,
              "batch_size": args.max_partition_memory_bytes, "buffer_memory": args.max_memory_bytes,
              "retries": args.message_send_max_retries, "retry_backoff_ms": args.retry_backoff_ms,
              "request_timeout_ms": args.request_timeout_ms, "client_id": "console-producer"}
    overrides, unknown = producer_kwargs(parse_properties(args.producer_property))
    warn_unknown(unknown)
    kwargs.update(overrides)
    return kwargs


class LineReader:
    """Kafka's LineMessageReader: split each line into (key, value)."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").lower() == "true"
        self.separator = props.get("key.separator", "\t").encode()
        self.ignore_error = props.get("ignore.error", "false").lower() == "true"
        self.line_number = 0

    def parse(self, line: bytes) -> tuple[bytes | None, bytes]:
        self.line_number += 1
        if not self.parse_key:
            return None, line
        key, sep, value = line.partition(self.separator)
        if sep:
            return key, value
        if self.ignore_error:
            return None, line
        raise UsageError(f"org.apache.kafka.common.KafkaException: No key found on line "
                         f"{self.line_number}: {line.decode(errors='replace')}")


class ErrorCounter:
    """Logs failed sends the way ErrorLoggingCallback does, and counts them."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.failures = 0

    def callback(self, key: bytes | None, value: bytes):
        def on_done(future: RecordFuture) -> None:
            exc = future.exception()
            if exc is None:
                return
            self.failures += 1
            key_text = "null" if key is None else f"{len(key)} bytes"
            print(log_line("ERROR", f"Error when sending message to topic {self.topic} with key: "
                                    f"{key_text}, value: {len(value)} bytes with error:",
                           CALLBACK_LOGGER), file=sys.stderr)
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return on_done


def produce_lines(producer: Producer, topic: str, reader: LineReader, stream: BinaryIO,
                  sync: bool, errors: ErrorCounter) -> int:
    sent = 0
    for line in iter_lines(stream):
        key, value = reader.parse(line)
        future = producer.send(topic, value, key=key)
        future.add_done_callback(errors.callback(key, value))
        if sync:
            try:
                future.get()
            except KafkaError:
                pass  # already logged by the callback
        sent += 1
    return sent


def main(argv: list[str] | None = None, stdin: BinaryIO | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not (args.broker_list or args.bootstrap_server):
        parser.die('Missing required argument "[broker-list]"')
    if not args.topic:
        parser.die('Missing required argument "[topic]"')
    try:
        reader = LineReader(parse_properties(args.property))
        producer = Producer(**producer_config(args))
    except (UsageError, ValueError) as exc:
        parser.die(str(exc))
    errors = ErrorCounter(args.topic)

    def send_lines() -> int:
        producer.partitions_for(args.topic)  # fail fast: unreachable cluster, unknown topic
        try:
            produce_lines(producer, args.topic, reader, stdin or sys.stdin.buffer, args.sync,
                          errors)
        except UsageError as exc:
            print(exc, file=sys.stderr)
            return 1
        return 1 if errors.failures else 0

    return run_reporting_errors(send_lines, producer)


if __name__ == "__main__":
    sys.exit(main())
