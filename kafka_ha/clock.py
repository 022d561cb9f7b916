"""Wall-clock time in milliseconds since the epoch, as Kafka stamps records, znodes and logs.

(Intervals and deadlines use ``time.monotonic()``; this is only for timestamps.)
"""
from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
