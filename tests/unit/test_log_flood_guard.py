"""Hostile input must not turn into gigabytes of logs: long strings are cut, floods are counted."""
from __future__ import annotations

import logging

from kafka_ha.broker.log_flood_guard import FloodGuard


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def capture(guard):
    lines = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(self.format(record))

    handler = Keep()
    handler.addFilter(guard)
    logger = logging.getLogger(f"test.flood.{id(guard)}")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return logger, lines


def test_client_supplied_strings_are_cut_in_log_lines():
    logger, lines = capture(FloodGuard(max_arg_chars=100))
    logger.warning("closing connection (client_id %r)", "x" * 32768)
    assert len(lines) == 1 and len(lines[0]) < 200
    assert "32668 more characters" in lines[0]


def test_a_repeated_warning_is_let_through_a_few_times_then_counted():
    clock = Clock()
    logger, lines = capture(FloodGuard(burst=5, window_s=10, clock=clock))
    for i in range(1000):
        logger.warning("malformed request from %s", f"peer{i}")
    assert len(lines) == 5
    clock.now = 11
    logger.warning("malformed request from %s", "late")
    assert len(lines) == 6
    assert "late" in lines[-1] and "995 similar messages suppressed" in lines[-1]


def test_different_messages_and_info_lines_are_not_limited():
    clock = Clock()
    logger, lines = capture(FloodGuard(burst=2, window_s=10, clock=clock))
    for _ in range(3):
        logger.warning("first kind %d", 1)
        logger.warning("second kind %d", 2)
        logger.info("routine %d", 3)
    assert len(lines) == 2 + 2 + 3


def test_one_record_seen_by_two_handlers_counts_once():
    clock = Clock()
    guard = FloodGuard(burst=3, window_s=10, clock=clock)
    logger, first = capture(guard)
    second = []

    class Keep(logging.Handler):
        def emit(self, record):
            second.append(record.getMessage())

    other = Keep()
    other.addFilter(guard)
    logger.addHandler(other)
    for _ in range(3):
        logger.warning("same")
    assert len(first) == len(second) == 3


def test_a_state_change_batch_keeps_every_line_under_the_guard():
    """The state-change log is ours: a failover's batch of thousands of lines must reach
    the file whole (a cut batch lost every transition past the first 256 characters)."""
    from kafka_ha.state_change_log import LOGGER_NAME, PrefixEachLine, StateChangeBatch

    lines = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(self.format(record))

    handler = Keep()
    handler.setFormatter(PrefixEachLine("%(levelname)s %(message)s"))
    handler.addFilter(FloodGuard())
    logger = logging.getLogger(LOGGER_NAME)
    # setLevel, not a plain assignment: it clears the logger's cache of isEnabledFor
    # answers, which an earlier test that logged state changes at WARNING filled.
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        batch = StateChangeBatch()
        for p in range(100):
            batch.info(f"Broker 1 completed LeaderAndIsr request for partition [t,{p}] (100%)")
        batch.emit()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    written = lines[0].split("\n")
    assert len(written) == 100
    assert written[99] == "INFO Broker 1 completed LeaderAndIsr request for partition [t,99] (100%)"
