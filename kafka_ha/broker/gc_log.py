"""The garbage collector's log (``kafkaServer-gc.log``) and its times, as a JVM broker has them.

CPython's cycle collector runs on the thread that allocates, so while it runs the
broker's loop is stopped: no request is served and no ZooKeeper heartbeat goes out.
At 10,000 partitions a full collection took 150-500 ms, and until the thresholds
were raised (``long_lived.tune_collector``) a survivor of a kill -9 ran one about
every second; no log said so.  Kafka's start scripts have the JVM write every pause
to ``kafkaServer-gc.log``; a broker here writes each collection of at least
``LOGGED_MS`` to the file of the same name, and counts every collection and its time
per generation for ``/metrics`` (``python_gc_collection_seconds``, in the manner of
``jvm_gc_collection_seconds``).

The collector's callbacks only record.  A line is written by a greenlet once a
second: logging from inside a collection, which can start at any allocation, could
re-enter a handler in the middle of its write.
"""
from __future__ import annotations

import gc
import logging
import time
from typing import Callable

import gevent

from kafka_ha import metrics
from kafka_ha.state_change_log import StateChangeBatch

LOGGER_NAME = "kafka_ha.gc"
LOGGED_MS = 10.0         # shorter collections are only counted
MAX_PENDING = 1000       # lines held between two writes; more are counted, not logged
WRITE_EVERY_S = 1.0


class CollectorLog:
    """Times each collection from the collector's callbacks (:meth:`on_gc`)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 wall: Callable[[], float] = time.time) -> None:
        self._clock, self._wall = clock, wall
        self._started: float | None = None
        self._number = 0
        self._pending: list[str] = []
        self._dropped = 0

    def on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = self._clock()
            return
        if self._started is None:       # installed in the middle of a collection
            return
        took, self._started = self._clock() - self._started, None
        generation = info["generation"]
        self._number += 1
        metrics.collection_done(generation, took)
        if took * 1000 < LOGGED_MS:
            return
        if len(self._pending) >= MAX_PENDING:
            self._dropped += 1
            return
        at = self._wall() - took
        stamp = time.strftime("%H:%M:%S", time.localtime(at)) + f",{int(at * 1000) % 1000:03d}"
        self._pending.append(f"GC({self._number}) Pause generation {generation} {took * 1000:.1f}ms, "
                             f"{info['collected']} collected, {info['uncollectable']} uncollectable, "
                             f"started {stamp}")

    def take_lines(self) -> list[str]:
        lines, self._pending = self._pending, []
        if self._dropped:
            lines.append(f"{self._dropped} more collections of at least {LOGGED_MS:g}ms not logged")
            self._dropped = 0
        return lines

    def write(self, logger: logging.Logger) -> None:
        """The lines since the last write, as one record formatted a line each."""
        batch = StateChangeBatch(logger)
        for line in self.take_lines():
            batch.info(line)
        batch.emit()


def install() -> CollectorLog:
    """Start timing collections and writing them to ``LOGGER_NAME``; once per broker process."""
    collector_log = CollectorLog()
    gc.callbacks.append(collector_log.on_gc)
    logger = logging.getLogger(LOGGER_NAME)

    def write_forever() -> None:
        while True:
            gevent.sleep(WRITE_EVERY_S)
            collector_log.write(logger)
    gevent.spawn(write_forever)
    return collector_log
