"""The state-change log: one line per partition transition, written in batches.

A failover touches thousands of partitions and each gets a line at the
controller (changed, requested) and at each broker (received, completed).
Emitting them as separate logging records cost more than the ZooKeeper writes
themselves (Kafka hit the same wall, fixed in 1.1), so lines are collected per
event and emitted as one record; ``PrefixEachLine`` gives every line the usual
``[time] LEVEL ... (state.change)`` frame in the file.
"""
from __future__ import annotations

import logging

LOGGER_NAME = "state.change"
_logger = logging.getLogger(LOGGER_NAME)


class StateChangeBatch:
    """Collects INFO lines; ``emit()`` writes them as one record (warnings go out at once).
    The state-change log's by default; any per-partition INFO line that a failover repeats
    thousands of times goes through one too (``StateChangeBatch(its_logger)``)."""

    def __init__(self, logger: logging.Logger = _logger) -> None:
        self.logger = logger
        self.lines: list[str] = []

    def info(self, line: str) -> None:
        self.lines.append(line)

    def warning(self, line: str) -> None:
        self.logger.warning("%s", line)

    def emit(self) -> None:
        if self.lines and self.logger.isEnabledFor(logging.INFO):
            # The text is the message itself, not a "%s" argument: the broker's flood
            # guard cuts long arguments (client strings) to 256 characters, which would
            # leave one quoted, truncated line of the whole batch.  With no arguments,
            # logging does not %-format it, so a "%" in a topic name is harmless.
            self.logger.info("\n".join(self.lines))
        self.lines = []


class PrefixEachLine(logging.Formatter):
    """Formats a multi-line record as one formatted line per message line."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if "\n" not in message:
            return super().format(record)
        head, _, tail = super().format(_with_message(record, "\0")).partition("\0")
        return "\n".join(f"{head}{line}{tail}" for line in message.split("\n"))


def _with_message(record: logging.LogRecord, message: str) -> logging.LogRecord:
    copy = logging.makeLogRecord(record.__dict__)
    copy.msg, copy.args = message, None
    return copy
