"""``--reset-offsets``: which partitions, and the new offset of each (pure).

The tool gathers what a mode needs (committed offsets, log start and end offsets,
offsets for a timestamp) and ``plan`` decides, as Kafka 2.x's ConsumerGroupCommand
decides: ``--to-offset`` and ``--shift-by`` are clamped into [log start, log end]
with a warning, ``--shift-by`` needs a committed offset, and a timestamp past every
record resets to the log end.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

TopicPartition = tuple[str, int]
MODES = ("to-earliest", "to-latest", "to-offset", "to-datetime", "shift-by")


class ResetError(ValueError):
    """The reset cannot be planned as asked: printed, exit code 1."""


class Plan(NamedTuple):
    offsets: dict[TopicPartition, int]
    warnings: list[str]


def parse_topics(args: list[str]) -> tuple[list[TopicPartition], list[str]]:
    """``--topic`` values: ``t:0,2`` names partitions, ``t`` means all of t's:
    (partitions named, whole topics).

    >>> parse_topics(["a:0,2", "b"])
    ([('a', 0), ('a', 2)], ['b'])
    >>> try:
    ...     parse_topics(["a:x"])
    ... except ResetError as e:
    ...     print(e)
    --topic a:x: partitions must be numbers, as in topic:0,1,2
    """
    named, whole = [], []
    for arg in args:
        topic, sep, partitions = arg.partition(":")
        if not topic:
            raise ResetError(f"--topic {arg}: no topic name")
        if not sep:
            whole.append(topic)
            continue
        try:
            named += [(topic, int(p)) for p in partitions.split(",")]
        except ValueError:
            raise ResetError(f"--topic {arg}: partitions must be numbers, as in topic:0,1,2") \
                from None
    return named, whole


_DATETIME = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3})(Z|[+-]\d{2}:?\d{2})?$")


def parse_datetime(text: str, local_tz: timezone | None = None) -> int:
    """``--to-datetime`` in ms since the epoch.  Kafka's format, YYYY-MM-DDTHH:mm:SS.sss,
    optionally followed by a zone (Z or +hh:mm); without one, the local zone.

    >>> parse_datetime("1970-01-01T00:00:01.500Z")
    1500
    >>> parse_datetime("1970-01-01T01:00:00.000+01:00")
    0
    >>> parse_datetime("1970-01-01T00:00:00.000", timezone(timedelta(hours=-2)))
    7200000
    """
    match = _DATETIME.match(text.strip())
    if match is None:
        raise ResetError(f"--to-datetime {text!r}: expected the format YYYY-MM-DDTHH:mm:SS.sss, "
                         "optionally followed by a zone (Z or +hh:mm)")
    when = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S.%f")
    zone = match.group(2)
    if zone == "Z":
        when = when.replace(tzinfo=timezone.utc)
    elif zone:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        when = when.replace(tzinfo=timezone(sign * timedelta(hours=int(digits[:2]),
                                                            minutes=int(digits[2:]))))
    elif local_tz is not None:
        when = when.replace(tzinfo=local_tz)
    else:
        when = when.astimezone()   # the machine's zone, as Kafka's tool uses the JVM's
    return int(when.timestamp() * 1000)


def _clamp(tp: TopicPartition, offset: int, starts: dict[TopicPartition, int],
           ends: dict[TopicPartition, int], warnings: list[str]) -> int:
    name = f"{tp[0]}-{tp[1]}"
    if offset > ends[tp]:
        warnings.append(f"New offset ({offset}) is higher than latest offset for topic partition "
                        f"{name}. Value will be set to {ends[tp]}")
        return ends[tp]
    if offset < starts[tp]:
        warnings.append(f"New offset ({offset}) is lower than earliest offset for topic partition "
                        f"{name}. Value will be set to {starts[tp]}")
        return starts[tp]
    return offset


def plan(mode: str, value: int | None, partitions: list[TopicPartition],
         committed: dict[TopicPartition, int], starts: dict[TopicPartition, int],
         ends: dict[TopicPartition, int],
         by_time: dict[TopicPartition, int] | None = None) -> Plan:
    """The new offset of each partition.  ``value``: the offset of to-offset, the shift
    of shift-by; ``by_time``: for to-datetime, the first offset at or after the time
    per partition (-1 or missing where no record is that late)."""
    warnings: list[str] = []
    out: dict[TopicPartition, int] = {}
    for tp in sorted(partitions):
        if mode == "to-earliest":
            out[tp] = starts[tp]
        elif mode == "to-latest":
            out[tp] = ends[tp]
        elif mode == "to-offset":
            out[tp] = _clamp(tp, value, starts, ends, warnings)
        elif mode == "shift-by":
            if committed.get(tp, -1) < 0:
                raise ResetError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there "
                                 "is no current committed offset")
            out[tp] = _clamp(tp, committed[tp] + value, starts, ends, warnings)
        elif mode == "to-datetime":
            found = (by_time or {}).get(tp, -1)
            out[tp] = ends[tp] if found < 0 else found
        else:
            raise ResetError(f"unknown reset mode {mode!r}")
    return Plan(out, warnings)
