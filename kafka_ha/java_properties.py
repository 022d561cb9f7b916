"""Java ``.properties`` text as ``java.util.Properties.load`` reads it.

Comment lines start with ``#`` or ``!``; a key ends at the first unescaped ``=``,
``:`` or whitespace; a line ending in an odd number of backslashes continues on
the next (whose leading whitespace is dropped); ``\\t \\n \\r \\f \\uXXXX`` are
escapes and any other escaped character stands for itself.

>>> parse("# c\\n! c\\na=1\\nb: 2\\nc 3\\nd = x\\\\\\n    y\\ne\\\\:f=\\\\u0041\\n")
{'a': '1', 'b': '2', 'c': '3', 'd': 'xy', 'e:f': 'A'}
"""
from __future__ import annotations

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SPACE = " \t\f"


def _logical_lines(text: str) -> list[str]:
    lines, pending = [], None
    for raw in text.splitlines():
        line = raw.lstrip(_SPACE)   # continuation lines lose their indent too
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        lines.append((pending or "") + line)
        pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                try:
                    out.append(chr(int(text[i + 2:i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    raise ValueError(f"malformed \\uxxxx escape in {text!r}") from None
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _SPACE:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(_SPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_SPACE)
    return _unescape(key), _unescape(rest)


def parse(text: str) -> dict[str, str]:
    """Keys to values, later lines winning, as ``Properties.load`` does."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        result[key] = value
    return result
