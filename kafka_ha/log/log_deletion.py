"""Deleting a partition's log so that no crash ever leaves half of it to load.

As Kafka does, the log directory is first renamed to
``<topic>-<partition>.<unique id>-delete``, a name that start-up never loads as
a log (it must end in ``-<partition>``); only then are its files removed, later
and off the request path.  A crash at any moment leaves either the whole log
under its own name or a ``-delete`` directory, which the next start-up removes.

The removal has two steps.  The files go at the next :meth:`DoomedLogs.remove_due`
(after an fsync of the parent directories, so that the renames are on disk
before anything inside them disappears).  The log's open descriptors are
closed only once ``file.delete.delay.ms`` has passed: a fetch response may
still be sending their data with sendfile, and a closed descriptor number can
be reused for another file.

>>> is_doomed_dir_name(doomed_dir_name(TopicPartition("my-topic", 3))), is_doomed_dir_name("my-topic-3")
(True, False)
"""
from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass
from typing import Callable

from kafka_ha.model import TopicPartition

from .checkpoints import fsync_dir
from .log import Log

log = logging.getLogger(__name__)

DELETE_SUFFIX = "-delete"


def doomed_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>.<32 hex digits>-delete``: unique, so a re-created partition never clashes."""
    return f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}"


def is_doomed_dir_name(name: str) -> bool:
    return name.endswith(DELETE_SUFFIX)


@dataclass
class _Doomed:
    path: str
    log: Log | None          # None: found at start-up, nothing of it is open
    close_at: float          # time.monotonic() after which nobody reads its descriptors
    removed: bool = False


class DoomedLogs:
    """Renamed logs waiting for their files to be removed and their descriptors closed."""

    def __init__(self) -> None:
        self._pending: list[_Doomed] = []

    def __len__(self) -> int:
        return len(self._pending)

    def doom(self, lg: Log, now: float) -> str:
        """Rename ``lg``'s directory out of the way; its files go at a later :meth:`remove_due`."""
        path = os.path.join(os.path.dirname(lg.dir), doomed_dir_name(lg.tp))
        lg.rename_dir(path)
        self._pending.append(_Doomed(path, lg, now + lg.config.file_delete_delay_ms / 1000))
        return path

    def found_at_start_up(self, path: str) -> None:
        log.info("Found the directory %s of a deleted log; it will be removed", path)
        self._pending.append(_Doomed(path, None, 0.0))

    def remove_due(self, now: float, remove_tree: Callable[[str], None]) -> int:
        """Remove the files of every renamed log and close the descriptors whose delay has
        passed; returns how many directories were removed.  ``remove_tree`` may run in a
        thread (it gets only a path); a removal that fails is logged and tried again."""
        waiting = [d for d in self._pending if not d.removed]
        for parent in sorted({os.path.dirname(d.path) for d in waiting}):
            fsync_dir(parent)
        removed = 0
        for doomed in waiting:
            try:
                remove_tree(doomed.path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.error("Cannot remove the directory %s of a deleted log (%s); trying again later",
                          doomed.path, exc)
                continue
            doomed.removed = True
            removed += 1
            log.info("Deleted log directory %s", doomed.path)
        for doomed in [d for d in self._pending if d.removed and d.close_at <= now]:
            if doomed.log is not None:
                doomed.log.close()
            self._pending.remove(doomed)
        return removed

    def close(self) -> None:
        """Close every descriptor (shutdown); directories not yet removed wait for the next start."""
        for doomed in self._pending:
            if doomed.log is not None:
                doomed.log.close()
        self._pending = []
