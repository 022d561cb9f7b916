"""Wall-clock time in milliseconds since the epoch, as Kafka stamps records, znodes and logs.

(Intervals and deadlines use ``time.monotonic()``, or :func:`monotonic_ms` where they
are configured in milliseconds: a wall-clock step must not stretch or skip them.)
"""
from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)
