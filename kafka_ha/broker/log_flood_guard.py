"""Keeps hostile input from filling the disk with logs.

A fuzzing client made brokers write 1.41 GB of logs in five minutes: 585k
warnings, many quoting 32 KB client ids verbatim.  ``FloodGuard`` is a
logging filter on the broker's handlers that

- cuts every string argument of a log line to ``max_arg_chars`` (the message
  template itself is ours and stays whole), and
- lets each warning template through ``burst`` times per ``window_s``; past
  that it drops the lines and counts them, and the first line after the
  window says how many similar ones were suppressed.

Lines below WARNING are not limited: they are ours, not a client's, and an
operator who turns DEBUG on wants all of them.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

MAX_ARG_CHARS = 256
BURST = 20
WINDOW_S = 10.0


def _cut(value: object, limit: int) -> object:
    if isinstance(value, (str, bytes, bytearray)) and len(value) > limit:
        return f"{value[:limit]!r}...({len(value) - limit} more characters)"
    return value


class FloodGuard(logging.Filter):
    def __init__(self, max_arg_chars: int = MAX_ARG_CHARS, burst: int = BURST,
                 window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.max_arg_chars, self.burst, self.window_s = max_arg_chars, burst, window_s
        self._clock = clock
        # template -> [window start, lines let through in it, lines suppressed since]
        self._windows: dict[tuple[str, object], list] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        verdict = getattr(record, "_flood_guard_verdict", None)
        if verdict is None:           # the first handler to see this record decides for all
            verdict = self._decide(record)
            record._flood_guard_verdict = verdict
        return verdict

    def _decide(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(_cut(a, self.max_arg_chars) for a in record.args)
        if record.levelno < logging.WARNING:
            return True
        now = self._clock()
        key = (record.name, record.msg)
        window = self._windows.get(key)
        if window is None or now - window[0] >= self.window_s:
            suppressed = window[2] if window else 0
            self._windows[key] = [now, 1, 0]
            if suppressed:
                record.msg = f"{record.msg} ({suppressed} similar messages suppressed before this one)"
            if len(self._windows) > 10000:   # templates are finite; this only bounds surprises
                self._windows = {key: self._windows[key]}
            return True
        if window[1] < self.burst:
            window[1] += 1
            return True
        window[2] += 1
        return False
