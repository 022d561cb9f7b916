"""The broker-side timeline of a failover, read from the brokers' own logs (pure parsing).

Every function takes log text and wall-clock times (seconds since the epoch; the
logs' ``[%Y-%m-%d %H:%M:%S,mmm]`` stamps are local time with millisecond
resolution) and returns times relative to the kill, so the bench's phases can be
table-tested without a cluster.
"""
from __future__ import annotations

import math
import re
from datetime import datetime

STAMP = r"^\[(?P<ts>[\d-]+ [\d:]+,\d+)\] "
# How late a time derived from a line's stamp and its whole-millisecond durations may come out.
STAMP_ROUNDING_S = 0.002
HANDLED = re.compile(STAMP + r"INFO Broker failure \[(?P<dead>[\d, ]+)\] handled: (?P<affected>\d+) "
                     r"partitions affected, (?P<written>\d+) state znodes written .* in "
                     r"(?P<write_ms>\d+) ms; LeaderAndIsr acknowledged (?P<ack_ms>\d+) ms", re.M)
# controller/broker_failure.py: the elections of the dead broker's partitions, written and sent
# before its replicas leave the other ISRs.
ELECTED = re.compile(STAMP + r"INFO Broker failure \[(?P<dead>[\d, ]+)\]: (?P<elected>\d+) new leader "
                     r"states written in (?P<write_ms>\d+) ms and sent", re.M)
LEADER_AND_ISR_DONE = re.compile(
    STAMP + r"INFO Broker (?P<broker>\d+) completed LeaderAndIsr request .* for the "
    r"(?P<transition>become-leader|become-follower) transition for partition (?P<tp>\S+)", re.M)
# partition.py: every ISR follower of a new leader fetched from its epoch's start.
ISR_AT_EPOCH_START = re.compile(
    STAMP + r"INFO Partition (?P<tp>\S+) on broker (?P<broker>\d+): every ISR follower reached the "
    r"start offset \d+ of leader epoch \d+", re.M)
# replica_fetcher.py: a truncation round finished.
TRUNCATED = re.compile(
    STAMP + r"INFO Broker (?P<broker>\d+): truncation by leader epoch done for (?P<done>\d+) "
    r"partition\(s\) of leader (?P<leader>\d+)", re.M)
# broker/controlled_shutdown.py, on the broker that shuts down.
SHUTDOWN_SUCCEEDED = re.compile(STAMP + r"INFO Controlled shutdown of broker (?P<broker>\d+) succeeded",
                                re.M)
# controller/controlled_shutdown.py, each time the controller moves the broker's work.
SHUTDOWN_HANDLED = re.compile(STAMP + r"INFO Controlled shutdown of broker (?P<broker>\d+): "
                              r"(?P<changed>\d+) partitions changed, (?P<left>\d+) still led by it", re.M)
# broker/metadata_cache.py, at DEBUG (the bench turns state.change.logger to DEBUG).
UPDATE_METADATA = re.compile(
    STAMP + r"DEBUG Broker (?P<broker>\d+) cached UpdateMetadata correlation id \d+ from controller "
    r"\d+ epoch \d+: (?P<count>\d+) partitions, live brokers \[(?P<live>[\d, ]*)\]", re.M)
EXPANDING = re.compile(STAMP + r"INFO Partition (?P<tp>\S+) on broker (?P<broker>\d+): Expanding ISR",
                       re.M)
SHRINKING = re.compile(STAMP + r"INFO Partition (?P<tp>\S+) on broker (?P<broker>\d+): Shrinking ISR",
                       re.M)


def log_time(ts: str) -> float:
    """A log stamp as seconds since the epoch (the local time zone, as the logs write it)."""
    return datetime.strptime(ts, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    """Median, p90 and max (nearest rank), and how many values.

    >>> percentiles([5.0, 1.0, 3.0, 2.0, 4.0])
    {'n': 5, 'p50': 3.0, 'p90': 5.0, 'max': 5.0}
    >>> percentiles([])
    {'n': 0, 'p50': None, 'p90': None, 'max': None}
    """
    if not values:
        return {"n": 0, "p50": None, "p90": None, "max": None}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(len(ordered) * q) - 1))]
    return {"n": len(ordered), "p50": rank(0.5), "p90": rank(0.9), "max": ordered[-1]}


def _only_dead(match: re.Match, dead: int) -> bool:
    """Whether a controller line's ``[dead]`` list names ``dead`` alone."""
    return [int(b) for b in match["dead"].split(",")] == [dead]


def controller_failure_handled(text: str, dead: int, after: float) -> dict | None:
    """The controller's lines for the failure of ``dead`` logged after ``after``: when its
    event started, its elections and then all its states were written, and its LeaderAndIsr
    acknowledged (absolute).

    The start and the writes are derived from whole milliseconds (the lines' stamps and their
    durations), so each may come out up to 2 ms late: ``new_states_from`` is the bound below
    which a broker's line about the new states cannot be. A broker in the controller's own
    process can cache the UpdateMetadata within that 2 ms.

    >>> lines = ("[2026-01-01 10:00:01,004] INFO Broker failure [2]: 1 new leader states "
    ...          "written in 3 ms and sent\\n"
    ...          "[2026-01-01 10:00:01,010] INFO Broker failure [2] handled: 2 partitions "
    ...          "affected, 2 state znodes written (1 with a leader) in 6 ms; LeaderAndIsr "
    ...          "acknowledged 10 ms after the event started\\n")
    >>> cached = ("[2026-01-01 10:00:01,005] DEBUG Broker 1 cached UpdateMetadata correlation "
    ...           "id 9 from controller 1 epoch 1: 2 partitions, live brokers [1, 3] (x)\\n")
    >>> h = controller_failure_handled(lines, 2, 0)
    >>> [round(h[k] - log_time("2026-01-01 10:00:01,000"), 3) for k in ("leaders_written", "states_written")]
    [0.003, 0.006]
    >>> first_update_metadata(cached, h["new_states_from"]) == log_time("2026-01-01 10:00:01,005")
    True
    """
    for m in HANDLED.finditer(text):
        done = log_time(m["ts"])
        if done < after or not _only_dead(m, dead):
            continue
        started = done - int(m["ack_ms"]) / 1000
        written = started + int(m["write_ms"]) / 1000
        # Only a failure that moved leaderships logs its elections.
        elected = [started + int(e["write_ms"]) / 1000 for e in ELECTED.finditer(text)
                   if _only_dead(e, dead)
                   and started - STAMP_ROUNDING_S <= log_time(e["ts"]) <= done]
        leaders_written = elected[0] if elected else None
        return {"event_started": started, "leaders_written": leaders_written, "states_written": written,
                "new_states_from": (leaders_written or written) - STAMP_ROUNDING_S,
                "leader_and_isr_acked": done, "write_ms": int(m["write_ms"]),
                "affected": int(m["affected"]), "written": int(m["written"])}
    return None


def first_per_partition(pattern: re.Pattern, text: str, after: float, tps: set[str]) -> dict[str, float]:
    """For each partition of ``tps``, the first time ``pattern`` matched it after ``after``.

    >>> text = ("[2026-01-01 10:00:01,000] INFO Partition [t,1] on broker 2: every ISR "
    ...         "follower reached the start offset 5 of leader epoch 3, 40 ms after becoming leader (x)\\n"
    ...         "[2026-01-01 10:00:02,500] INFO Partition [t,2] on broker 2: every ISR "
    ...         "follower reached the start offset 9 of leader epoch 3, 40 ms after becoming leader (x)\\n")
    >>> at = first_per_partition(ISR_AT_EPOCH_START, text, 0, {"[t,2]"})
    >>> list(at), at["[t,2]"] - log_time("2026-01-01 10:00:01,000")
    (['[t,2]'], 1.5)
    """
    out: dict[str, float] = {}
    for m in pattern.finditer(text):
        if m["tp"] in tps and m["tp"] not in out:
            t = log_time(m["ts"])
            if t >= after:
                out[m["tp"]] = t
    return out


def last_match(pattern: re.Pattern, text: str, after: float) -> float | None:
    """The time of the last line matching ``pattern`` after ``after`` (None if there is none)."""
    times = [t for m in pattern.finditer(text) if (t := log_time(m["ts"])) >= after]
    return max(times) if times else None


def count_after(pattern: re.Pattern, text: str, after: float) -> int:
    return sum(1 for m in pattern.finditer(text) if log_time(m["ts"]) >= after)


def first_update_metadata(text: str, after: float, with_partitions: bool = True) -> float | None:
    """When the first UpdateMetadata after ``after`` was cached (with at least one partition
    state if ``with_partitions``: the controller's answer to a broker failure carries the new
    leaders), or None.

    >>> text = ("[2026-01-01 10:00:01,000] DEBUG Broker 2 cached UpdateMetadata correlation id 7 "
    ...         "from controller 1 epoch 1: 0 partitions, live brokers [1, 2] (x)\\n"
    ...         "[2026-01-01 10:00:01,250] DEBUG Broker 2 cached UpdateMetadata correlation id 8 "
    ...         "from controller 1 epoch 1: 3333 partitions, live brokers [1, 2] (x)\\n")
    >>> t0 = log_time("2026-01-01 10:00:00,000")
    >>> first_update_metadata(text, t0) - t0, first_update_metadata(text, t0, False) - t0
    (1.25, 1.0)
    >>> first_update_metadata(text, t0 + 2) is None
    True
    """
    for m in UPDATE_METADATA.finditer(text):
        t = log_time(m["ts"])
        if t >= after and (not with_partitions or int(m["count"]) > 0):
            return t
    return None


# librdkafka's default log line on stderr: "%7|<seconds since the epoch>|TOPICUPD|<client>| ..."
# and its "topic" debug line when a metadata answer gives a partition a new leader
# (rdkafka_topic.c); "to -1" is a leader it lost, not one it learned.
LEADER_MOVED = re.compile(r"^%\d\|(?P<ts>\d+\.\d+)\|\w+\|[^|]*\| ?.*?Topic (?P<topic>\S+) "
                          r"\[(?P<partition>\d+)\]: migrating from broker -?\d+ to (?P<leader>\d+)", re.M)


def leader_moves(text: str, topic: str, after: float, first: bool = False) -> dict[int, float]:
    """When librdkafka last (or ``first``) moved each partition of ``topic`` to a live leader
    after ``after``, by its own clock, from its debug log on stderr.  The two differ when it
    dropped a leader it had learned: librdkafka 2.16 does so when one metadata answer both
    leaves out a broker and moves that broker's partitions (its broker thread forgets the
    leaders the main thread has just set), and it asks again only on its 1 s scan.

    >>> text = ("%7|100.250|TOPICUPD|p#producer-1| [thrd:main]: Topic t [4]: migrating from "
    ...         "broker 3 to -1 (leader is -1): leader lost\\n"
    ...         "%7|101.500|TOPICUPD|p#producer-1| [thrd:main]: Topic t [4]: migrating from "
    ...         "broker -1 to 2 (leader is 2): leader updated\\n"
    ...         "%7|99.000|TOPICUPD|p#producer-1| [thrd:main]: Topic t [5]: migrating from "
    ...         "broker -1 to 3 (leader is 3): leader updated\\n"
    ...         "%7|101.700|TOPICUPD|p#producer-1| [thrd:main]: Topic u [6]: migrating from "
    ...         "broker 3 to 1 (leader is 1): leader updated\\n")
    >>> leader_moves(text, "t", after=100.0)
    {4: 101.5}
    >>> text += ("%7|102.500|TOPICUPD|p#producer-1| [thrd:main]: Topic t [4]: migrating from "
    ...          "broker -1 to 2 (leader is 2): leader updated\\n")
    >>> leader_moves(text, "t", after=100.0), leader_moves(text, "t", after=100.0, first=True)
    ({4: 102.5}, {4: 101.5})
    """
    out: dict[int, float] = {}
    for m in LEADER_MOVED.finditer(text):
        t, partition = float(m["ts"]), int(m["partition"])
        if m["topic"] == topic and t >= after and not (first and partition in out):
            out[partition] = t
    return out
