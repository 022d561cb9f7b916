"""What kafka-consumer-groups.sh prints, laid out as Kafka 2.x's ConsumerGroupCommand
lays it out (pure: rows in, lines out).

Kafka pads its variable columns (group, topic, consumer id, host, client id) to the
widest value but never below 15 characters, gives the number columns fixed widths,
and leaves the last column unpadded.  Each table follows a blank line.

>>> print("\\n".join(reset_plan_lines([("g", "t", 0, 5)])).replace(" ", "."))
<BLANKLINE>
GROUP..........................TOPIC..........................PARTITION..NEW-OFFSET.....
g..............................t..............................0..........5..............
"""
from __future__ import annotations

import struct
from typing import Any, Iterable, Sequence

MISSING = "-"
MIN_WIDTH = 15


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The partitions of a consumer-protocol assignment (version, [topic, [partition]],
    user data); a member of another protocol, or unreadable bytes, has none.

    >>> raw = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">iii", 2, 0, 3) + struct.pack(">i", -1)
    >>> decode_assignment(raw)
    [('t', 0), ('t', 3)]
    >>> decode_assignment(b"")
    []
    """
    try:
        pos = 2
        (topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out = []
        for _ in range(topics):
            (length,) = struct.unpack_from(">h", data, pos)
            topic = bytes(data[pos + 2:pos + 2 + length]).decode()
            pos += 2 + length
            (count,) = struct.unpack_from(">i", data, pos)
            partitions = struct.unpack_from(f">{count}i", data, pos + 4)
            pos += 4 + 4 * count
            out += [(topic, p) for p in partitions]
        return out
    except (struct.error, UnicodeDecodeError):
        return []


def _width(values: Iterable[Any]) -> int:
    return max([MIN_WIDTH] + [len(str(v)) for v in values])


def _line(cells: Sequence[Any], widths: Sequence[int]) -> str:
    """Cells left-justified to ``widths``; cells past the widths are printed as they are."""
    padded = [str(c).ljust(w) for c, w in zip(cells, widths)]
    return " ".join(padded + [str(c) for c in cells[len(widths):]])


def _cell(value: Any) -> Any:
    return MISSING if value is None else value


OFFSET_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                 "CONSUMER-ID", "HOST", "CLIENT-ID")


def offset_lines(rows: list[tuple]) -> list[str]:
    """``--describe`` (--offsets): rows of (group, topic, partition, current, end, lag,
    consumer id, host, client id), None for an unknown value."""
    rows = [tuple(_cell(v) for v in row) for row in rows]
    widths = [_width(r[0] for r in rows), _width(r[1] for r in rows), 10, 15, 15, 15,
              _width(r[6] for r in rows), _width(r[7] for r in rows)]
    return [""] + [_line(r, widths) for r in [OFFSET_HEADER] + rows]


def offset_rows(group: str, members: list[dict[str, Any]], committed: dict[tuple[str, int], int],
                ends: dict[tuple[str, int], int]) -> list[tuple]:
    """Kafka's order: members with partitions, most partitions first, each one's
    partitions by number; then committed partitions no member holds."""
    rows, owned = [], set()
    holders = [(m, decode_assignment(m["member_assignment"])) for m in members]
    for m, tps in sorted((h for h in holders if h[1]), key=lambda h: -len(h[1])):
        for tp in sorted(tps, key=lambda tp: tp[1]):
            owned.add(tp)
            current = committed.get(tp)
            rows.append((group, tp[0], tp[1], current, ends.get(tp), _lag(current, ends.get(tp)),
                         m["member_id"], m["client_host"] or MISSING, m["client_id"]))
    for tp in sorted(set(committed) - owned):
        current = committed[tp]
        rows.append((group, tp[0], tp[1], current, ends.get(tp), _lag(current, ends.get(tp)),
                     MISSING, MISSING, MISSING))
    return rows


def _lag(current: int | None, end: int | None) -> int | None:
    return None if current is None or current < 0 or end is None else end - current


MEMBER_HEADER = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")


def assignment_text(tps: list[tuple[str, int]]) -> str:
    """``--verbose``'s ASSIGNMENT: ``topic(0,1), other(2)``, topics in order; ``-`` for none.

    >>> assignment_text([("b", 2), ("a", 1), ("a", 0)]), assignment_text([])
    ('a(0,1), b(2)', '-')
    """
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    parts = sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items())
    return ", ".join(parts) or MISSING


def member_lines(group: str, members: list[dict[str, Any]], verbose: bool) -> list[str]:
    """``--describe --members``: one line per member.  Kafka ends every line of this table
    with a space after #PARTITIONS (then ASSIGNMENT with ``--verbose``)."""
    rows = []
    for m in members:
        tps = decode_assignment(m["member_assignment"])
        rows.append((group, m["member_id"], m["client_host"] or MISSING, m["client_id"], len(tps),
                     assignment_text(tps)))
    widths = [_width(r[0] for r in rows), _width(r[1] for r in rows),
              _width(r[2] for r in rows), _width(r[3] for r in rows), 15]
    lines = [""]
    for row in [MEMBER_HEADER + ("ASSIGNMENT",)] + rows:
        cells = row if verbose else row[:5]
        line = " ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " "
        lines.append(line + (str(row[5]) if verbose else ""))
    return lines


STATE_HEADER = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")


def state_lines(group: str, coordinator: tuple[int, str, int], strategy: str, state: str,
                members: int) -> list[str]:
    """``--describe --state``.  Kafka sizes the first column by the coordinator's text
    (at least 25), and the coordinator column is 25 wide.

    >>> state_lines("g", (1, "h", 9092), "range", "Stable", 2)[1].split()
    ['GROUP', 'COORDINATOR', '(ID)', 'ASSIGNMENT-STRATEGY', 'STATE', '#MEMBERS']
    """
    node, host, port = coordinator
    where = f"{host}:{port} ({node})"
    widths = [max(25, len(where)), 25, 20, 15]
    return ["", _line(STATE_HEADER, widths), _line((group, where, strategy, state, members), widths)]


RESET_HEADER = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


def reset_plan_lines(plan: list[tuple[str, str, int, int]]) -> list[str]:
    """``--reset-offsets``: (group, topic, partition, new offset); fixed widths, and the
    last column padded too, as Kafka prints it."""
    widths = [30, 30, 10, 15]
    return [""] + [" ".join(str(c).ljust(w) for c, w in zip(row, widths))
                   for row in [RESET_HEADER] + plan]
