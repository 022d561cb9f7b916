"""Where a read starts and ends: offsets, ``latest``/``earliest``, or record timestamps.

Spark's Kafka connector takes a start (and, in batch, an end) from three options,
the first one set winning:

- ``startingTimestamp`` (one timestamp for every partition),
- ``startingOffsetsByTimestamp`` (JSON ``{"t": {"0": ts}}``, naming every partition),
- ``startingOffsets`` (``earliest``, ``latest`` or JSON offsets);

and likewise ``endingTimestamp``, ``endingOffsetsByTimestamp``, ``endingOffsets``.
A timestamp means the offset of the first record whose timestamp is at or after
it: the brokers answer ListOffsets with that timestamp from their time index.  When
no committed record is that late, a start fails the query unless
``startingOffsetsByTimestampStrategy`` is ``latest`` (then it starts at the
latest offset), and an end becomes the latest offset (both as in Spark).

:meth:`Bounds.resolve` turns a bound into ``{(topic, partition): offset}``; the
look-ups are injected, so the decisions are tested without brokers:

>>> b = Bounds.parse({"startingTimestamp": "1000"}, "starting", default="earliest")
>>> b.resolve([("t", 0), ("t", 1)], earliest={("t", 0): 0, ("t", 1): 0},
...           latest={("t", 0): 10, ("t", 1): 10},
...           by_timestamp=lambda stamps: {("t", 0): 4, ("t", 1): None})
Traceback (most recent call last):
...
kafka_ha.spark.bounds.NoOffsetForTimestamp: no record of [t,1] has a timestamp at or after 1000 (startingTimestamp); set startingOffsetsByTimestampStrategy=latest to start at the latest offset instead
>>> b = Bounds.parse({"endingTimestamp": "1000"}, "ending", default="latest")
>>> b.resolve([("t", 0), ("t", 1)], earliest={}, latest={("t", 0): 10, ("t", 1): 10},
...           by_timestamp=lambda stamps: {("t", 0): 4, ("t", 1): None})
{('t', 0): 4, ('t', 1): 10}
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from .options import (EARLIEST, LATEST, option, parse_offsets_spec, parse_timestamp,
                      parse_timestamps_json)

TP = tuple[str, int]


class NoOffsetForTimestamp(ValueError):
    """A start timestamp later than every committed record (strategy ``error``)."""


def _tp(tp: TP) -> str:
    return f"[{tp[0]},{tp[1]}]"


@dataclass(frozen=True)
class Bounds:
    """One side (``starting`` or ``ending``) of a read, as the options give it."""

    side: str                                  # "starting" or "ending"
    offsets: str | dict | None = None          # "earliest" / "latest" / {tp: offset}
    timestamp: int | None = None               # startingTimestamp / endingTimestamp
    timestamps: dict | None = None             # ...OffsetsByTimestamp: {tp: timestamp}
    on_missing: str = "error"                  # startingOffsetsByTimestampStrategy

    @classmethod
    def parse(cls, options: Mapping[str, str], side: str, default: str, *,
              batch: bool = False) -> Bounds:
        offsets_name = f"{side}Offsets"
        offsets = parse_offsets_spec(offsets_name, option(options, offsets_name),
                                     batch_start=batch and side == "starting",
                                     batch_end=batch and side == "ending") or default
        strategy = (option(options, "startingOffsetsByTimestampStrategy") or "error").lower()
        if strategy not in ("error", "latest"):
            raise ValueError(f"option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                             f"'latest', not {strategy!r}")
        return cls(side, offsets, parse_timestamp(f"{side}Timestamp",
                                                  option(options, f"{side}Timestamp")),
                   parse_timestamps_json(f"{side}OffsetsByTimestamp",
                                         option(options, f"{side}OffsetsByTimestamp")),
                   strategy)

    @property
    def source(self) -> str:
        """The option that decides this bound (the first one set, in Spark's order)."""
        if self.timestamp is not None:
            return f"{self.side}Timestamp"
        if self.timestamps is not None:
            return f"{self.side}OffsetsByTimestamp"
        return f"{self.side}Offsets"

    def named_partitions(self) -> list[TP]:
        """Partitions the deciding option names explicitly (must be in the subscription)."""
        if self.timestamp is not None:
            return []
        if self.timestamps is not None:
            return sorted(self.timestamps)
        return sorted(self.offsets) if isinstance(self.offsets, dict) else []

    def resolve(self, tps: list[TP], earliest: Mapping[TP, int], latest: Mapping[TP, int],
                by_timestamp: Callable[[dict[TP, int]], dict[TP, int | None]]) -> dict[TP, int]:
        """``{tp: offset}`` for ``tps``; ``by_timestamp`` answers ListOffsets by timestamp
        (None where no record is that late)."""
        if self.timestamp is not None or self.timestamps is not None:
            if self.timestamp is not None:
                stamps = {tp: self.timestamp for tp in tps}
            else:
                missing = [tp for tp in tps if tp not in self.timestamps]
                if missing:
                    raise ValueError(f"{self.source} must give a timestamp for every partition "
                                     f"of the subscription; missing: "
                                     f"{', '.join(map(_tp, missing))}")
                stamps = {tp: self.timestamps[tp] for tp in tps}
            found = by_timestamp(stamps) if stamps else {}
            out = {}
            for tp in tps:
                if found.get(tp) is not None:
                    out[tp] = found[tp]
                elif self.side == "ending" or self.on_missing == "latest":
                    out[tp] = latest[tp]
                else:
                    raise NoOffsetForTimestamp(
                        f"no record of {_tp(tp)} has a timestamp at or after {stamps[tp]} "
                        f"({self.source}); set startingOffsetsByTimestampStrategy=latest to "
                        f"start at the latest offset instead")
            return out
        default = EARLIEST if self.side == "starting" else LATEST
        out = {}
        for tp in tps:
            if isinstance(self.offsets, dict):
                value = self.offsets.get(tp, default)
            else:
                value = EARLIEST if self.offsets == "earliest" else LATEST
            out[tp] = earliest[tp] if value == EARLIEST else latest[tp] if value == LATEST else value
        return out
