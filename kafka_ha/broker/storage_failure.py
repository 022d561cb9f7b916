"""A failed write to a log directory halts the broker, as in Kafka 0.8-0.10 (``Runtime.halt``).

Why halt instead of answering an error and carrying on: after a failed write
(ENOSPC, EIO, a failed fsync) the broker can no longer vouch for what is on
disk.  A file may end in a partial entry, a checkpoint may be stale, and a
failed fsync may have dropped dirty pages of data that was written earlier.
A dead broker is a case the rest of the system already handles: its ZooKeeper
session ends, the controller elects new leaders from the ISR, and at the next
start log recovery cuts any partial tail and the replica catches up from the
leader.  A broker that kept running would have to do all of that itself.

``os._exit``, not ``sys.exit``: no ``finally`` block, atexit hook or other
greenlet runs after the failure, so no request waiting for its acks is
answered and no clean-shutdown marker is written.
"""
from __future__ import annotations

import logging
import os
from typing import Callable, NoReturn

log = logging.getLogger(__name__)

HALT_STATUS = 1
Halt = Callable[[str], NoReturn]


def halt_message(action: str, subject: object, path: str, error: OSError) -> str:
    """The FATAL line: what was being done, to what, where, and the error.

    >>> from kafka_ha.model import TopicPartition
    >>> halt_message("appending to", TopicPartition("t", 0), "/data/t-0", OSError(28, "No space left on device"))
    'Halting due to unrecoverable I/O error while appending to [t,0] in /data/t-0: [Errno 28] No space left on device'
    >>> halt_message("writing the high watermark checkpoint", None, "/data", OSError(5, "Input/output error"))
    'Halting due to unrecoverable I/O error while writing the high watermark checkpoint in /data: [Errno 5] Input/output error'
    """
    what = action if subject is None else f"{action} {subject}"
    return f"Halting due to unrecoverable I/O error while {what} in {path}: {error}"


def halt(message: str) -> NoReturn:
    """Log ``message`` as CRITICAL (Kafka's FATAL) and end the process at once."""
    log.critical(message)
    os._exit(HALT_STATUS)


class HaltOnIOError:
    """``with HaltOnIOError(halt, "appending to", tp, dir):`` calls ``halt`` with
    :func:`halt_message` if the block raises an :class:`OSError`.

    A class rather than a ``contextlib`` generator: it wraps every append, and
    the message is only formatted when something failed.

    >>> def fake_halt(message):
    ...     raise SystemExit(message)
    >>> with HaltOnIOError(fake_halt, "appending to", "[t,0]", "/d"):
    ...     raise OSError(28, "No space left on device")
    Traceback (most recent call last):
    ...
    SystemExit: Halting due to unrecoverable I/O error while appending to [t,0] in /d: [Errno 28] No space left on device
    """

    __slots__ = ("_halt", "_action", "_subject", "_path")

    def __init__(self, halt: Halt, action: str, subject: object, path: str) -> None:
        self._halt, self._action, self._subject, self._path = halt, action, subject, path

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None and issubclass(exc_type, OSError):
            self._halt(halt_message(self._action, self._subject, self._path, exc))
        return False
