"""The value parsers of the broker's configuration keys (kafka_ha/config.py): each takes
what a YAML or ``.properties`` file holds (a string, or an int/bool YAML already typed)
and returns the typed value, or raises ConfigError naming what is wrong."""
from __future__ import annotations

import re
from typing import Any, Callable


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


def _compression_type(value: Any) -> str:
    """compression.type: a codec name, ``uncompressed`` or ``producer`` (Kafka's ValidString)."""
    text = _str(value).strip().lower()
    if text not in ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"):
        raise ValueError("String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer")
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


_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "OFF")


def _logger_levels(value: Any) -> tuple[tuple[str, str], ...]:
    """``name=LEVEL`` pairs, comma-separated (or a YAML mapping).

    >>> _logger_levels("kafka.controller=DEBUG, kafka=warn")
    (('kafka.controller', 'DEBUG'), ('kafka', 'WARN'))
    """
    pairs = (list(value.items()) if isinstance(value, dict) else
             [p.partition("=")[::2] for p in _str(value).split(",") if p.strip()])
    out = []
    for name, level in pairs:
        level = _str(level).strip().upper()
        if not str(name).strip() or level not in _LEVELS:
            raise ValueError(f"expected logger=LEVEL with LEVEL one of {', '.join(_LEVELS)}, "
                             f"got {name}={level}")
        out.append((str(name).strip(), level))
    return tuple(out)


_REPLICA_LIST = re.compile(r"\d+:\d+(,\d+:\d+)*")


def _throttled_replicas(value: Any) -> str:
    """Kafka's ThrottledReplicaListValidator: ``*``, empty, or ``partition:broker`` pairs,
    normalized without blanks.

    >>> _throttled_replicas(" 0:1 , 1:2 "), _throttled_replicas("*")
    ('0:1,1:2', '*')
    >>> _throttled_replicas("0-1")
    Traceback (most recent call last):
    ...
    ValueError: must be the literal '*' or a list of replicas in the following format: \
[partitionId]:[brokerId],[partitionId]:[brokerId],...
    """
    text = _str(value).strip()
    text = ",".join(item.strip() for item in text.split(",")) if text else ""
    if text in ("", "*") or _REPLICA_LIST.fullmatch(text):
        return text
    raise ValueError("must be the literal '*' or a list of replicas in the following format: "
                     "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
