"""Helpers shared by the client command-line tools (console, perf, verification).

Kafka's tools die with the message and the usage on stderr and exit 1 on bad
arguments (``CommandLineUtils.printUsageAndDie``); :class:`ToolArgumentParser`
does the same.  Property lists (``k=v``) map onto the client's keyword
arguments, and timestamps are printed in Java's ``SimpleDateFormat`` styles.

>>> parse_properties(["acks=all", "linger.ms=5"])
{'acks': 'all', 'linger.ms': '5'}
>>> producer_kwargs({"bootstrap.servers": "h:1", "acks": "all", "linger.ms": "0"})
({'bootstrap_servers': 'h:1', 'acks': 'all', 'linger_ms': 0}, [])
>>> java_date(0, sep=",", utc=True)
'1970-01-01 00:00:00,000'
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any, BinaryIO, Callable, Iterator, NoReturn

import gevent

from kafka_ha.clock import now_ms

from .errors import KafkaError


def run_reporting_errors(body: Callable[[], int], *closing: Any,
                         also: tuple[type[Exception], ...] = ()) -> int:
    """Run a client tool's main work with Kafka's exits; return the exit code.

    A :class:`KafkaError` (or one of ``also``) prints ``ERROR: <it>`` on stderr and
    gives 1; Ctrl-C gives 130.  ``closing`` (the tool's clients) are closed either way.
    """
    try:
        return body()
    except (KafkaError, *also) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        for resource in closing:
            resource.close()


# Each byte value maps to an upper-case letter (A-Z), nearly uniformly.
_LETTERS = bytes(65 + b % 26 for b in range(256))


def random_bytes(rng: random.Random, length: int) -> bytes:
    """``length`` random upper-case letters, the payload Kafka's perf and latency
    tools send (``Array.fill(len)((random.nextInt(26) + 65).toByte)``).

    One call for the whole message: drawing a letter per byte in Python cost
    0.5 ms of CPU per 1 KiB message, taken from the brokers being measured.

    >>> m = random_bytes(random.Random(0), 1000)
    >>> len(m), set(m) <= set(range(65, 91)), len(set(m)) == 26
    (1000, True, True)
    """
    return rng.randbytes(length).translate(_LETTERS)


class UsageError(Exception):
    """Bad command-line input: printed with the usage, exit code 1."""


class ToolArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.die(message)

    def die(self, message: str) -> NoReturn:
        """Kafka's printUsageAndDie: the message, then the usage, on stderr; exit 1."""
        print(message, file=sys.stderr)
        self.print_usage(sys.stderr)
        raise SystemExit(1)


def parse_properties(items: list[str] | None) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"Invalid property {item!r}: expected key=value")
        props[key.strip()] = value.strip()
    return props


def read_properties_file(path: str) -> dict[str, str]:
    """A Java ``.properties`` file (``k=v`` or ``k: v`` lines, ``#``/``!`` comments)."""
    props = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            if sep < 0:
                props[line] = ""
            else:
                props[line[:sep].strip()] = line[sep + 1:].strip()
    return props


def _int(value: str) -> int:
    return int(value)


def _bool(value: str) -> bool:
    return value.strip().lower() == "true"


_PRODUCER = {
    "bootstrap.servers": ("bootstrap_servers", str), "acks": ("acks", str),
    "compression.type": ("compression", str), "batch.size": ("batch_size", _int),
    "linger.ms": ("linger_ms", _int), "retries": ("retries", _int),
    "retry.backoff.ms": ("retry_backoff_ms", _int),
    "request.timeout.ms": ("request_timeout_ms", _int), "client.id": ("client_id", str),
    "buffer.memory": ("buffer_memory", _int), "max.block.ms": ("max_block_ms", _int),
    "delivery.timeout.ms": ("delivery_timeout_ms", _int),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection", _int),
}
_CONSUMER = {
    "bootstrap.servers": ("bootstrap_servers", str), "group.id": ("group_id", str),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _int), "fetch.min.bytes": ("fetch_min_bytes", _int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _int),
    "fetch.max.bytes": ("fetch_max_bytes", _int), "auto.offset.reset": ("auto_offset_reset", str),
    "request.timeout.ms": ("request_timeout_ms", _int),
    "retry.backoff.ms": ("retry_backoff_ms", _int), "client.id": ("client_id", str),
    "check.crcs": ("check_crcs", _bool),
}


def _kwargs(props: dict[str, str], table: dict) -> tuple[dict[str, Any], list[str]]:
    kwargs, unknown = {}, []
    for key, value in props.items():
        if key not in table:
            unknown.append(key)
            continue
        name, convert = table[key]
        try:
            kwargs[name] = convert(value)
        except ValueError:
            raise UsageError(f"Invalid value {value} for configuration {key}") from None
    return kwargs, unknown


def producer_kwargs(props: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Producer keyword arguments for Kafka producer configs, plus the unknown names."""
    return _kwargs(props, _PRODUCER)


def consumer_kwargs(props: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Consumer keyword arguments for Kafka consumer configs, plus the unknown names."""
    return _kwargs(props, _CONSUMER)


def warn_unknown(names: list[str]) -> None:
    for name in names:
        print(f"WARN The configuration '{name}' was supplied but isn't a known config.",
              file=sys.stderr)


def java_date(ms: float, sep: str = ",", utc: bool = False) -> str:
    """``yyyy-MM-dd HH:mm:ss<sep>SSS`` in local time (``,``: log4j; ``:``: perf tools)."""
    ms = int(ms)
    stamp = (time.gmtime if utc else time.localtime)(ms // 1000)
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', stamp)}{sep}{ms % 1000:03d}"


def log_line(level: str, message: str, logger: str) -> str:
    """A line as Kafka's tools-log4j.properties prints it: ``[date] LEVEL msg (logger)``."""
    return f"[{java_date(now_ms())}] {level} {message} ({logger})"


def iter_lines(stream: BinaryIO, chunk_size: int = 65536) -> Iterator[bytes]:
    """Lines of ``stream`` without their ``\\n``/``\\r\\n``, read cooperatively.

    Reads happen in gevent's thread pool, so greenlets (the producer's
    sender) keep running while we wait for input, monkey-patched or not.
    """
    read: Callable[[int], bytes] = getattr(stream, "read1", stream.read)
    pool = gevent.get_hub().threadpool
    pending = b""
    while True:
        chunk = pool.apply(read, (chunk_size,))
        if not chunk:
            break
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if pending:
        yield pending[:-1] if pending.endswith(b"\r") else pending
