"""The state-change log as an operator reads it: one whole, framed line per transition."""
from __future__ import annotations

import logging

from kafka_ha.broker.log_flood_guard import FloodGuard
from kafka_ha.broker.logging_setup import DATEFMT, FORMAT
from kafka_ha.state_change_log import LOGGER_NAME, PrefixEachLine, StateChangeBatch


def test_a_batch_comes_out_as_whole_lines_through_the_broker_handlers():
    # The broker's handlers (logging_setup.configure): Kafka's frame per line and the
    # flood guard, which cuts long string arguments of log calls.
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.extend(self.format(record).split("\n"))

    handler = Keep()
    handler.setFormatter(PrefixEachLine(FORMAT, DATEFMT))
    handler.addFilter(FloodGuard())
    logger = logging.getLogger(LOGGER_NAME)
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        batch = StateChangeBatch()
        wanted = [f"Broker 1 completed LeaderAndIsr request correlation id 4 from controller 1 "
                  f"epoch 1 for the become-follower transition for partition [orders,{p}]"
                  for p in range(20)]
        for line in wanted:
            batch.info(line)
        batch.emit()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
    assert len(lines) == len(wanted)
    for line, text in zip(lines, wanted):
        assert line.startswith("[") and line.endswith(f"INFO {text} (state.change)"), line
