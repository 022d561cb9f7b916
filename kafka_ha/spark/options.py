"""Option parsing for the ``kafka_ha`` Spark data source (pure; no Spark, no network).

Option names and value shapes follow Spark's Kafka source: exactly one of
``subscribe`` / ``subscribePattern`` / ``assign``, offsets as ``earliest`` /
``latest`` or per-partition JSON (``-2`` earliest, ``-1`` latest).

>>> s = Subscription.parse({"subscribe": "a, b"})
>>> s.kind, s.topics
('subscribe', ('a', 'b'))
>>> Subscription.parse({"assign": '{"t": [1, 0]}'}).partitions
(('t', 0), ('t', 1))
>>> Subscription.parse({"subscribe": "a", "assign": '{"t":[0]}'})
Traceback (most recent call last):
...
ValueError: exactly one of the options 'subscribe', 'subscribePattern' or 'assign' is needed, got assign and subscribe
>>> parse_offsets_spec("startingOffsets", '{"t": {"0": 23, "1": -2}}', batch_start=True)
{('t', 0): 23, ('t', 1): -2}
>>> parse_offsets_spec("startingOffsets", "latest", batch_start=True)
Traceback (most recent call last):
...
ValueError: startingOffsets 'latest' is not allowed in batch queries (use 'earliest' or JSON offsets)
>>> parse_bool("failOnDataLoss", "False"), parse_int("minPartitions", "3", minimum=1)
(False, 3)
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Mapping

EARLIEST = -2
LATEST = -1
SUBSCRIPTION_KEYS = ("subscribe", "subscribePattern", "assign")


def _get(options: Mapping[str, str], name: str) -> str | None:
    """A case-insensitive look-up (Spark's options are case-insensitive; plain dicts in tests)."""
    if name in options:
        return options[name]
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return value
    return None


def option(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    value = _get(options, name)
    return default if value is None else value


def parse_bool(name: str, text: str | None, default: bool = True) -> bool:
    if text is None:
        return default
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"option {name!r} must be true or false, not {text!r}")
    return lowered == "true"


def parse_int(name: str, text: str | None, default: int | None = None,
              minimum: int | None = None) -> int | None:
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"option {name!r} must be an integer, not {text!r}") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"option {name!r} must be >= {minimum}, not {value}")
    return value


@dataclass(frozen=True)
class Subscription:
    """What to read: ``kind`` is "subscribe", "subscribePattern" or "assign"."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[tuple[str, int], ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Subscription:
        given = sorted(k for k in SUBSCRIPTION_KEYS if _get(options, k) is not None)
        if len(given) != 1:
            raise ValueError("exactly one of the options 'subscribe', 'subscribePattern' or "
                             f"'assign' is needed, got {' and '.join(given) or 'none'}")
        kind = given[0]
        text = _get(options, kind) or ""
        if kind == "subscribe":
            topics = tuple(t.strip() for t in text.split(",") if t.strip())
            if not topics:
                raise ValueError("option 'subscribe' names no topic")
            return cls(kind, topics=topics)
        if kind == "subscribePattern":
            try:
                re.compile(text)
            except re.error as exc:
                raise ValueError(f"option 'subscribePattern' is not a valid regex: {exc}") from None
            return cls(kind, pattern=text)
        return cls(kind, partitions=parse_assign(text))

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` belongs to the subscription (whole-name match for patterns)."""
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.partitions)

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={format_partition_list(self.partitions)}"


def format_partition_list(tps) -> str:
    out: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        out.setdefault(t, []).append(p)
    return json.dumps(out, separators=(",", ":"))


def _json_object(name: str, text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"option {name!r} is neither a keyword nor valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"option {name!r} must be a JSON object, not {text!r}")
    return value


def parse_assign(text: str) -> tuple[tuple[str, int], ...]:
    """``{"t":[0,1]}`` to sorted ``(topic, partition)`` pairs.

    >>> parse_assign('{"b": [2], "a": [0]}')
    (('a', 0), ('b', 2))
    >>> parse_assign('{"a": [-1]}')
    Traceback (most recent call last):
    ...
    ValueError: option 'assign' must look like {"topicA":[0,1],"topicB":[2,4]}, not '{"a": [-1]}'
    """
    value = _json_object("assign", text)
    pairs = set()
    for topic, parts in value.items():
        if (not isinstance(topic, str) or not topic or not isinstance(parts, list)
                or not all(type(p) is int and p >= 0 for p in parts)):
            raise ValueError("option 'assign' must look like "
                             f'{{"topicA":[0,1],"topicB":[2,4]}}, not {text!r}')
        pairs.update((topic, p) for p in parts)
    if not pairs:
        raise ValueError("option 'assign' names no partition")
    return tuple(sorted(pairs))


def parse_offsets_spec(name: str, text: str | None, *, batch_start: bool = False,
                       batch_end: bool = False) -> str | dict[tuple[str, int], int] | None:
    """``"earliest"``, ``"latest"`` or ``{(topic, partition): offset}`` (None if unset).

    In JSON, -2 means earliest and -1 latest.  Batch queries may not start at
    latest nor end at earliest (as in Spark).
    """
    if text is None:
        return None
    keyword = text.strip().lower()
    if keyword in ("earliest", "latest"):
        if batch_start and keyword == "latest":
            raise ValueError(f"{name} 'latest' is not allowed in batch queries "
                             f"(use 'earliest' or JSON offsets)")
        if batch_end and keyword == "earliest":
            raise ValueError(f"{name} 'earliest' is not allowed in batch queries "
                             f"(use 'latest' or JSON offsets)")
        return keyword
    value = _json_object(name, text)
    result: dict[tuple[str, int], int] = {}
    shape = '{"topicA":{"0":23,"1":-2}}'
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            raise ValueError(f"option {name!r} must look like {shape}, not {text!r}")
        for part, offset in parts.items():
            if not str(part).isdigit() or type(offset) is not int or offset < EARLIEST:
                raise ValueError(f"option {name!r} must look like {shape}, not {text!r}")
            if batch_start and offset == LATEST:
                raise ValueError(f"{name}: -1 (latest) for [{topic},{part}] is not allowed "
                                 f"in batch queries")
            if batch_end and offset == EARLIEST:
                raise ValueError(f"{name}: -2 (earliest) for [{topic},{part}] is not allowed "
                                 f"in batch queries")
            result[(topic, int(part))] = offset
    return result


def offsets_to_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` to Spark's Kafka offset shape, in a canonical (sorted) order.

    Spark compares checkpointed offsets as JSON text, so the order must be stable.

    >>> offsets_to_json({("b", 10): 5, ("b", 2): 7, ("a", 0): 1})
    {'a': {'0': 1}, 'b': {'2': 7, '10': 5}}
    """
    out: dict[str, dict[str, int]] = {}
    for (topic, partition) in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def offsets_from_json(value: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, int], int]:
    """The inverse of :func:`offsets_to_json`.

    >>> offsets_from_json({"a": {"0": 1, "3": 9}})
    {('a', 0): 1, ('a', 3): 9}
    """
    return {(topic, int(p)): int(o) for topic, parts in value.items() for p, o in parts.items()}


_DURATION_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60000, "min": 60000, "h": 3600000,
                   "d": 86400000}


def parse_duration_ms(name: str, text: str | None, default: str) -> int:
    """Spark's time strings (``500ms``, ``30s``, ``15m``, ``1h``; a bare number is ms).

    >>> parse_duration_ms("maxTriggerDelay", None, "15m"), parse_duration_ms("d", "2s", "0")
    (900000, 2000)
    >>> parse_duration_ms("maxTriggerDelay", "soon", "15m")
    Traceback (most recent call last):
    ...
    ValueError: option 'maxTriggerDelay' must be a duration like 500ms, 30s, 15m or 1h, not 'soon'
    """
    raw = (default if text is None else text).strip().lower()
    match = re.fullmatch(r"(\d+)\s*([a-z]*)", raw)
    if not match or match.group(2) not in ("",) + tuple(_DURATION_UNITS):
        raise ValueError(f"option {name!r} must be a duration like 500ms, 30s, 15m or 1h, "
                         f"not {text!r}")
    return int(int(match.group(1)) * _DURATION_UNITS.get(match.group(2) or "ms", 1))


def parse_timestamp(name: str, text: str | None) -> int | None:
    """A timestamp option in milliseconds since the epoch (None if unset).

    >>> parse_timestamp("startingTimestamp", "1700000000000")
    1700000000000
    >>> parse_timestamp("startingTimestamp", "-5")
    Traceback (most recent call last):
    ...
    ValueError: option 'startingTimestamp' must be milliseconds since the epoch (>= 0), not '-5'
    """
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"option {name!r} must be milliseconds since the epoch (>= 0), "
                         f"not {text!r}")
    return value


def parse_timestamps_json(name: str, text: str | None) -> dict[tuple[str, int], int] | None:
    """``{"t": {"0": 1700000000000}}`` to ``{(topic, partition): timestamp}`` (None if unset).

    >>> parse_timestamps_json("startingOffsetsByTimestamp", '{"t": {"1": 5, "0": 7}}')
    {('t', 1): 5, ('t', 0): 7}
    """
    if text is None:
        return None
    value = _json_object(name, text)
    shape = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
    result = {}
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            raise ValueError(f"option {name!r} must look like {shape}, not {text!r}")
        for part, stamp in parts.items():
            if not str(part).isdigit() or type(stamp) is not int or stamp < 0:
                raise ValueError(f"option {name!r} must look like {shape}, not {text!r}")
            result[(topic, int(part))] = stamp
    return result
