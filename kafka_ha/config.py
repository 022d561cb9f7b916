"""Broker configuration: Kafka's property names, typed, validated, with defaults.

The file is YAML with Kafka's dotted keys (``broker.id: 1``).  An unknown or
mistyped key is an error that names it: Jepsen's Kafka harness once ran with
``zookeeper.session.tmeout.ms`` silently ignored, and we do not repeat that.
"""
from __future__ import annotations

import difflib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from kafka_ha.records.format import LOG_OVERHEAD, V0_MIN_SIZE

LONG_MAX = (1 << 63) - 1      # Kafka's "never" for its flush intervals
MIN_ENTRY_BYTES = LOG_OVERHEAD + V0_MIN_SIZE   # the smallest log entry: segments and batches hold one


class ConfigError(ValueError):
    """A configuration file or value that cannot be used; the message names the key."""


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"expected true or false, got {value!r}")


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise ValueError(f"expected an integer, got {value!r}")


def _str(value: Any) -> str:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"expected a string, got {value!r}")


def _at_least(minimum: int) -> Callable[[Any], int]:
    """An integer parser with Kafka's range message (``ConfigDef.Range.atLeast``)."""
    def parse(value: Any) -> int:
        number = _int(value)
        if number < minimum:
            raise ValueError(f"Value must be at least {minimum}")
        return number
    return parse


def _float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {value!r}") from None


def _ratio(value: Any) -> float:
    number = _float(value)
    if not 0 <= number <= 1:
        raise ValueError("Value must be between 0 and 1")
    return number


def _cleanup_policy(value: Any) -> str:
    """``delete``, ``compact`` or both (any order, Kafka's list syntax), normalized
    to ``delete``, ``compact`` or ``compact,delete``.

    >>> _cleanup_policy("delete, compact"), _cleanup_policy("[compact]")
    ('compact,delete', 'compact')
    """
    text = _str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    policies = {p.strip() for p in text.split(",")}
    if not policies or not policies <= {"compact", "delete"}:
        raise ValueError("String must be one of: compact, delete")
    return ",".join(sorted(policies))


def _timestamp_type(value: Any) -> str:
    """message.timestamp.type: ``CreateTime`` or ``LogAppendTime`` (Kafka's ValidString)."""
    text = _str(value).strip()
    if text not in ("CreateTime", "LogAppendTime"):
        raise ValueError("String must be one of: CreateTime, LogAppendTime")
    return text


def _dirs(value: Any) -> tuple[str, ...]:
    if isinstance(value, list):
        items = [_str(v) for v in value]
    else:
        items = [d.strip() for d in _str(value).split(",")]
    items = [d for d in items if d]
    if not items:
        raise ValueError("expected at least one directory")
    return tuple(items)


@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    doc: str
    minimum: int | None = None


# Kafka 0.8.2 names and defaults (its server/KafkaConfig.scala), except where a
# later Kafka changed a default for safety: unclean election is off (0.11+,
# KIP-106) and topic deletion is on (1.0+).
KEYS: tuple[Key, ...] = (
    Key("broker.id", _int, None, "unique id of this broker (required)", 0),
    Key("port", _int, 9092, "port the broker listens on", 0),
    Key("host.name", _str, "", "address to bind; empty binds all interfaces"),
    Key("listeners", _str, "", "PLAINTEXT://host:port; overrides host.name and port"),
    Key("advertised.host.name", _str, "", "host published in ZooKeeper for clients"),
    Key("advertised.port", _int, 0, "port published in ZooKeeper for clients", 0),
    Key("zookeeper.connect", _str, None, "host:port[,host:port...][/chroot] (required)"),
    Key("zookeeper.session.timeout.ms", _int, 6000, "ZooKeeper session timeout", 1),
    Key("zookeeper.connection.timeout.ms", _int, 0,
        "time one start-up attempt to connect waits (attempts repeat until ZooKeeper "
        "answers); 0 means the session timeout", 0),
    Key("log.dirs", _dirs, None, "comma-separated data directories"),
    Key("num.recovery.threads.per.data.dir", _int, 1,
        "threads per log directory that load (and recover) logs at start-up", 1),
    Key("log.dir", _dirs, ("/tmp/kafka-logs",), "used when log.dirs is not set"),
    Key("num.partitions", _int, 1, "partitions of an auto-created topic", 1),
    Key("default.replication.factor", _int, 1, "replication factor of an auto-created topic", 1),
    Key("auto.create.topics.enable", _bool, True, "create topics on first metadata request"),
    Key("offsets.topic.num.partitions", _int, 50, "partitions of __consumer_offsets", 1),
    Key("offsets.topic.replication.factor", _int, 3,
        "replication factor of __consumer_offsets; its creation waits for this many brokers", 1),
    Key("offsets.topic.segment.bytes", _int, 104857600,
        "segment size of __consumer_offsets (small, so the cleaner compacts it soon)", 1),
    Key("offsets.commit.timeout.ms", _int, 5000,
        "how long an offset commit waits for the offsets topic's replicas", 1),
    Key("offsets.retention.minutes", _int, 1440,
        "how long a commit is kept once its group has no members", 1),
    Key("offsets.retention.check.interval.ms", _int, 600000, "how often expired offsets go", 1),
    Key("transactional.id.expiration.ms", _int, 604800000,
        "an idempotent producer that wrote nothing to a partition for this long is forgotten there", 1),
    Key("producer.id.expiration.check.interval.ms", _int, 600000,
        "how often idle producers are forgotten", 1),
    Key("offset.metadata.max.bytes", _int, 4096, "largest metadata string of a commit", 0),
    Key("group.min.session.timeout.ms", _int, 6000, "shortest session a group member may ask", 0),
    Key("group.max.session.timeout.ms", _int, 300000, "longest session a group member may ask", 0),
    Key("group.initial.rebalance.delay.ms", _int, 3000,
        "wait for more members before a new group's first rebalance", 0),
    Key("unclean.leader.election.enable", _bool, False,
        "let a replica outside the ISR lead when no ISR member is alive (may lose data)"),
    Key("min.insync.replicas", _int, 1, "ISR size an acks=all produce needs", 1),
    Key("auto.leader.rebalance.enable", _bool, True, "move leadership back to preferred replicas"),
    Key("leader.imbalance.check.interval.seconds", _int, 300, "rebalance check period", 1),
    Key("leader.imbalance.per.broker.percentage", _int, 10, "imbalance that triggers rebalance", 0),
    Key("controlled.shutdown.enable", _bool, True, "move leadership away before stopping"),
    Key("controlled.shutdown.max.retries", _int, 3, "controlled shutdown attempts", 0),
    Key("controlled.shutdown.retry.backoff.ms", _int, 5000, "pause between attempts", 0),
    Key("delete.topic.enable", _bool, True, "let the controller carry out topic deletion"),
    Key("replica.lag.time.max.ms", _int, 10000, "follower lag before it leaves the ISR", 1),
    Key("replica.fetch.wait.max.ms", _int, 500, "follower fetch long-poll time", 0),
    Key("replica.fetch.min.bytes", _int, 1, "follower fetch minimum bytes", 0),
    Key("replica.fetch.max.bytes", _int, 1048576, "follower fetch bytes per partition", 1),
    Key("num.replica.fetchers", _int, 1, "fetcher connections per source broker", 1),
    Key("max.incremental.fetch.session.cache.slots", _int, 1000,
        "fetch sessions (KIP-227) a broker keeps; 0 turns them off", 0),
    Key("min.incremental.fetch.session.eviction.ms", _int, 120000,
        "idle time before a full cache may evict a session", 0),
    Key("replica.high.watermark.checkpoint.interval.ms", _int, 5000, "HW checkpoint period", 1),
    Key("controller.socket.timeout.ms", _int, 30000, "controller-to-broker request timeout", 1),
    Key("socket.request.max.bytes", _int, 104857600, "largest request frame accepted", 1),
    # Kafka's default is -1 (no bound); a bound keeps slow or hostile clients from
    # exhausting memory with many large frames at once, so ours has one.
    Key("queued.max.request.bytes", _int, 104857600,
        "bytes of requests being read or served at once, over all connections; past it, "
        "connections stop reading until memory is released; -1 is no bound", -1),
    Key("fetch.max.bytes", _int, 57671680,
        "most bytes one Fetch answer carries, whatever the request asks for", 1024),
    Key("connections.max.idle.ms", _int, 600000,
        "close a connection that has sent nothing for this long", 1),
    # Not a Kafka key: Kafka bounds a slow request only by the idle timeout.
    Key("socket.request.read.timeout.ms", _int, 30000,
        "a request must arrive whole within this time of its size prefix, or its "
        "connection is closed", 1),
    Key("max.connections.per.ip", _int, 2147483647,
        "connections accepted from one address; more are closed at once", 1),
    Key("message.max.bytes", _int, 1000012, "largest record batch accepted", MIN_ENTRY_BYTES),
    Key("log.segment.bytes", _int, 1073741824, "segment size before rolling", MIN_ENTRY_BYTES),
    Key("log.retention.hours", _int, 168, "time-based retention", -1),
    Key("log.retention.bytes", _int, -1, "size-based retention per partition; -1 is none", -1),
    Key("log.retention.check.interval.ms", _int, 300000, "retention check period", 1),
    Key("log.roll.hours", _int, 168, "age of the active segment's first record before an append "
        "rolls it (topics: segment.ms)", 1),
    Key("log.roll.ms", _int, None, "as log.roll.hours, in ms; overrides it when set", 1),
    Key("log.roll.jitter.hours", _int, 0, "random amount subtracted from each segment's roll time", 0),
    Key("log.roll.jitter.ms", _int, None, "as log.roll.jitter.hours, in ms; overrides it when set", 0),
    Key("log.cleanup.policy", _cleanup_policy, "delete",
        "delete (retention), compact (keep the last record per key) or compact,delete"),
    Key("log.cleaner.enable", _bool, True, "run the log cleaner for compacted topics"),
    Key("log.cleaner.min.cleanable.ratio", _ratio, 0.5,
        "share of a log that must be uncleaned before the cleaner works on it"),
    Key("log.cleaner.min.compaction.lag.ms", _int, 0, "records younger than this are not compacted", 0),
    Key("log.cleaner.delete.retention.ms", _int, 86400000,
        "how long a tombstone (null value) stays after it was compacted", 0),
    Key("log.cleaner.io.max.bytes.per.second", _float, 1.7976931348623157e308,
        "bytes the cleaner reads and writes per second, at most", 1),
    Key("log.cleaner.backoff.ms", _int, 15000, "pause of the cleaner when no log needs cleaning", 0),
    Key("log.cleaner.dedupe.buffer.size", _int, 134217728,
        "memory for the key map of one cleaning pass (each key costs its length plus about "
        "100 bytes); a dirty section with more keys is cleaned in several passes", 1024),
    Key("log.flush.interval.messages", _int, LONG_MAX, "appended messages before a log is fsynced", 1),
    Key("log.flush.interval.ms", _int, None,
        "time appends may stay unflushed; unset: log.flush.scheduler.interval.ms", 0),
    Key("log.flush.scheduler.interval.ms", _int, LONG_MAX, "how often logs are checked against flush.ms", 1),
    Key("log.flush.offset.checkpoint.interval.ms", _int, 60000,
        "period of the recovery-point checkpoint, which bounds recovery after a crash", 1),
    Key("reserved.broker.max.id", _int, 1000, "highest id a broker may configure", 0),
    Key("log.message.timestamp.type", _timestamp_type, "CreateTime",
        "CreateTime keeps the producer's record timestamps, LogAppendTime stamps the leader's clock"),
    Key("log.message.timestamp.difference.max.ms", _int, LONG_MAX,
        "CreateTime: how far a record's timestamp may be from the leader's clock", 0),
    # Not a Kafka key (Kafka exports JMX; Prometheus users add jmx_exporter).
    Key("metrics.port", _int, -1, "port of the Prometheus /metrics endpoint (on the listener's "
        "host); -1 turns it off, 0 binds an ephemeral port", -1),
)
KEYS_BY_NAME = {k.name: k for k in KEYS}
REQUIRED = ("broker.id", "zookeeper.connect")


class BrokerConfig:
    """Parsed broker configuration; look keys up by Kafka name: ``cfg["broker.id"]``."""

    def __init__(self, values: dict[str, Any], source: str = "<dict>") -> None:
        self.source = source
        self._values = _parse(values, source)
        # The keys the file sets (DescribeConfigs tells them from defaults).
        self.explicit = frozenset(str(name) for name in values)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    @property
    def broker_id(self) -> int:
        return self._values["broker.id"]

    @property
    def log_dirs(self) -> tuple[str, ...]:
        return self._values["log.dirs"] or self._values["log.dir"]

    @property
    def session_timeout_ms(self) -> int:
        return self._values["zookeeper.session.timeout.ms"]

    @property
    def bind_address(self) -> tuple[str, int]:
        host, port = _listener(self._values)
        return host, port

    @property
    def advertised_address(self) -> tuple[str, int]:
        host, port = _listener(self._values)
        host = self._values["advertised.host.name"] or host or socket.gethostname()
        port = self._values["advertised.port"] or port
        return host, port

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BrokerConfig:
        text = Path(path).read_text(encoding="utf-8")
        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        if values is None:
            values = {}
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: expected a mapping of Kafka property names to values")
        return cls(values, str(path))


def _listener(values: dict[str, Any]) -> tuple[str, int]:
    listeners = values["listeners"]
    if not listeners:
        return values["host.name"], values["port"]
    first = listeners.split(",")[0].strip()
    proto, _, rest = first.partition("://")
    host, _, port = rest.rpartition(":")
    return host, int(port)


def _parse(values: dict[str, Any], source: str) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for name, raw in values.items():
        key = KEYS_BY_NAME.get(str(name))
        if key is None:
            close = difflib.get_close_matches(str(name), KEYS_BY_NAME, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{source}: unknown configuration key {name!r}{hint}")
        try:
            value = key.parse(raw)
        except ValueError as e:
            raise ConfigError(f"{source}: invalid value for {name}: {e}") from None
        if key.minimum is not None and value < key.minimum:
            raise ConfigError(f"{source}: invalid value for {name}: must be >= {key.minimum}")
        parsed[key.name] = value
    for name in REQUIRED:
        if name not in parsed:
            raise ConfigError(f"{source}: missing required configuration key {name!r}")
    for key in KEYS:
        parsed.setdefault(key.name, key.default)
    if parsed["listeners"]:
        first = parsed["listeners"].split(",")[0].strip()
        proto, sep, rest = first.partition("://")
        host, colon, port = rest.rpartition(":")
        if proto != "PLAINTEXT" or not sep or not colon or not port.isdigit():
            raise ConfigError(f"{source}: invalid value for listeners: expected "
                              f"PLAINTEXT://host:port, got {first!r}")
    if parsed["broker.id"] > parsed["reserved.broker.max.id"]:
        raise ConfigError(f"{source}: broker.id {parsed['broker.id']} exceeds "
                          f"reserved.broker.max.id {parsed['reserved.broker.max.id']}")
    return parsed


# Topic-level overrides stored in /config/topics/<t> and the broker key that
# supplies each one's default (Kafka's LogConfig names).
TOPIC_CONFIG_DEFAULTS: dict[str, tuple[str | None, Callable[[Any], Any]]] = {
    "unclean.leader.election.enable": ("unclean.leader.election.enable", _bool),
    "min.insync.replicas": ("min.insync.replicas", _at_least(1)),
    "retention.ms": (None, _at_least(-1)),
    "retention.bytes": ("log.retention.bytes", _int),
    "segment.bytes": ("log.segment.bytes", _at_least(MIN_ENTRY_BYTES)),
    "max.message.bytes": ("message.max.bytes", _at_least(MIN_ENTRY_BYTES)),
    "flush.messages": ("log.flush.interval.messages", _at_least(0)),
    "flush.ms": (None, _at_least(0)),        # default: log.flush.interval.ms, else the scheduler's
    "segment.ms": (None, _at_least(1)),      # default: log.roll.ms, else log.roll.hours
    "segment.jitter.ms": (None, _at_least(0)),   # default: log.roll.jitter.ms, else .hours
    "cleanup.policy": ("log.cleanup.policy", _cleanup_policy),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", _at_least(0)),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", _ratio),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", _at_least(0)),
    "message.timestamp.type": ("log.message.timestamp.type", _timestamp_type),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms", _at_least(0)),
}


def validate_topic_config(overrides: dict[str, str]) -> dict[str, Any]:
    """Parse topic overrides; unknown names get Kafka's LogConfig message."""
    parsed = {}
    for name, raw in overrides.items():
        spec = TOPIC_CONFIG_DEFAULTS.get(name)
        if spec is None:
            raise ConfigError(f'requirement failed: Unknown configuration "{name}".')
        try:
            parsed[name] = spec[1](raw)
        except ValueError as e:
            raise ConfigError(f"Invalid value {raw} for configuration {name}: {e}") from None
    return parsed


def topic_setting(name: str, overrides: dict[str, str], broker: BrokerConfig) -> Any:
    """A topic's effective value: its override if valid, else the broker default."""
    broker_key, parse = TOPIC_CONFIG_DEFAULTS[name]
    if name in overrides:
        try:
            return parse(overrides[name])
        except ValueError:
            pass  # a bad override was already reported when the config was loaded
    return broker[broker_key] if broker_key else None


def broker_roll_ms(broker: BrokerConfig) -> tuple[int, int]:
    """``(segment.ms, segment.jitter.ms)`` defaults: the ``.ms`` keys win over ``.hours``."""
    roll = broker["log.roll.ms"]
    jitter = broker["log.roll.jitter.ms"]
    return (broker["log.roll.hours"] * 3600000 if roll is None else roll,
            broker["log.roll.jitter.hours"] * 3600000 if jitter is None else jitter)
