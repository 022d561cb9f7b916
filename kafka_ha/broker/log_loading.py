"""Loading a broker's logs at start-up, and flushing them at shutdown, off its event loop, in threads.

Opening a log reads its directory, index files and checkpoints, and after an
unclean shutdown CRC-checks its unflushed segments.  On the event loop, a
broker with 4.5 GB of logs did nothing else for about 20 s: ZooKeeper heard no
heartbeat, the session expired, and start-up failed (issue 23).  Here the
openers run on a small threadpool (``num.recovery.threads.per.data.dir``
threads per directory), in batches (one hand-off per batch, not per log),
while the loop goes on serving the ZooKeeper session.  The clean shutdown's flush runs the same
way (``run_in_threads``): at 10,000 logs it is some 50,000 fsyncs, which held the loop for 47 s
and let the session expire.  The logs are plain objects: nothing in them is
bound to the thread that built them, and the log manager records them on the
loop's thread when a batch comes back.

Log lines: in a monkey-patched broker, the ``logging`` module's locks are
gevent locks, and a thread that is not the loop's may not wait for one (a
logging call from a pool thread deadlocked in a test of exactly this).  While
logs load, the loggers of the log layer keep the records made on other threads,
and the loop hands them to the handlers as batches come back, in the order they
were made.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from typing import Callable, Sequence, TypeVar

import gevent
from gevent.monkey import get_original
from gevent.threadpool import ThreadPool

from kafka_ha.broker import long_lived
from kafka_ha.log.log_manager import LogManager, OpenLogs

T = TypeVar("T")

log = logging.getLogger(__name__)

BATCH = 32                    # logs per hand-off to a thread
LOG_LAYER = ("kafka_ha.log", "kafka_ha.records")   # the loggers that log while a log opens
_thread_ident = get_original("_thread", "get_ident")   # the OS thread, not the greenlet


class RecordsFromThreads(logging.Filter):
    """A logger filter that keeps the records made off the loop's thread, for :meth:`emit`."""

    def __init__(self) -> None:
        super().__init__()
        self.loop_thread = _thread_ident()
        self.kept: deque[logging.LogRecord] = deque()   # appends are thread-safe
        self.loggers: list[logging.Logger] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if _thread_ident() == self.loop_thread:
            return True
        self.kept.append(record)
        return False

    def install(self, prefixes: Sequence[str] = LOG_LAYER) -> None:
        names = [n for n in logging.Logger.manager.loggerDict
                 if any(n == p or n.startswith(p + ".") for p in prefixes)]
        self.loggers = [logging.getLogger(n) for n in names]
        for logger in self.loggers:
            logger.addFilter(self)
            # Fill the level cache now: a miss takes the logging module's lock.
            for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR,
                          logging.CRITICAL):
                logger.isEnabledFor(level)

    def emit(self) -> None:
        """Hand the kept records to their loggers' handlers (on the loop's thread).  A run
        of INFO records of one logger goes as one record of their lines (the broker's
        formatter prefixes each line): a line per loaded log, 10,000 records through the
        file handler, had the loading threads wait on this thread for the GIL."""
        kept = self.kept
        while kept:
            record = kept.popleft()
            if record.levelno == logging.INFO and kept:
                lines = [record.getMessage()]
                while kept and kept[0].levelno == logging.INFO and kept[0].name == record.name:
                    lines.append(kept.popleft().getMessage())
                if len(lines) > 1:
                    record = logging.makeLogRecord(record.__dict__)
                    record.msg, record.args = "\n".join(lines), None
            logging.getLogger(record.name).handle(record)

    def uninstall(self) -> None:
        for logger in self.loggers:
            logger.removeFilter(self)
        self.emit()


class LoopLag:
    """The longest time the event loop was late to wake a greenlet that sleeps ``tick_s``
    at a time: how long the loop stalled (a ZooKeeper heartbeat waits as long)."""

    def __init__(self, tick_s: float = 0.05) -> None:
        self.tick_s = tick_s
        self.longest_s = 0.0
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            started = time.monotonic()
            gevent.sleep(self.tick_s)
            self.longest_s = max(self.longest_s, time.monotonic() - started - self.tick_s)

    def stop(self) -> float:
        self._greenlet.kill()
        return self.longest_s


def _open_all(openers: Sequence[Callable[[], T]]) -> list[T]:
    return [open_() for open_ in openers]


def recovery_threads(config) -> int:
    """How many threads load the logs at start-up and flush them at shutdown (a BrokerConfig's
    ``num.recovery.threads.per.data.dir`` for each log directory, as Kafka counts them)."""
    return config["num.recovery.threads.per.data.dir"] * len(config.log_dirs)


def run_in_threads(calls: Sequence[Callable[[], T]], threads: int) -> list[T]:
    """The results of ``calls`` (the logs' openers at start-up, their flushes at shutdown),
    in order, run in batches on a pool of ``threads`` threads of its own (the hub's shared
    pool does the fsyncs); the first error raised by one is raised here.  Every batch is
    queued at once, so a thread never waits for the loop to hand it the next one."""
    pool = ThreadPool(threads)
    batches = [calls[i:i + BATCH] for i in range(0, len(calls), BATCH)]
    results: list[T] = []
    relay = RecordsFromThreads()
    relay.install()
    try:
        pending = [pool.spawn(_open_all, batch) for batch in batches]
        for batch_result in pending:
            results.extend(batch_result.get())
            relay.emit()
    finally:
        pool.kill()           # after an error: the batches still queued are not run
        relay.uninstall()
    return results


def load_logs(make_log_manager: Callable[[OpenLogs], LogManager], threads: int) -> LogManager:
    """``make_log_manager(open_logs)`` with the logs opened in ``threads`` threads; logs how
    long loading took and the loop's longest stall meanwhile.  What loading built lives
    as long as the broker: it is frozen out of the garbage collector's way (``long_lived``)."""
    lag = LoopLag()
    started = time.monotonic()
    try:
        manager = make_log_manager(lambda openers: run_in_threads(openers, threads))
    finally:
        longest = lag.stop()
    long_lived.freeze()
    log.info("Loaded %d logs in %.2f s with %d threads; the event loop stalled at most %d ms "
             "meanwhile", len(manager.all_logs()), time.monotonic() - started, threads, round(longest * 1000))
    return manager
