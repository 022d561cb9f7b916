"""The files of a cleaned segment, and how they replace the original even across a crash.

The cleaner writes a segment's cleaned copy beside it as ``<base>.log.cleaned``
and ``<base>.index.cleaned`` and fsyncs both.  Then, in one go on the event
loop (Kafka's ``.cleaned``/``.swap`` protocol, one segment at a time):

1. ``.index.cleaned`` -> ``.index.swap``;
2. ``.log.cleaned`` -> ``.log.swap``: from here on the cleaned copy is the
   segment, and a restart finishes the swap;
3. ``.index.swap`` -> ``.index``, then ``.log.swap`` -> ``.log``, each an
   atomic ``rename`` over the original.

:func:`complete_interrupted_cleaning` runs before a log directory is loaded:
a ``.cleaned`` file is an unfinished copy and goes; a ``.log.swap`` finishes
step 3; an ``.index.swap`` without its ``.log.swap`` was never committed (a
crash between steps 1 and 2) and goes.  When no ``.index.swap`` is left for a
``.log.swap``, the ``.index`` is removed, since it may be the copy's or the
original's; it is rebuilt from the log when the segment is opened.  Every
crash point thus leaves either the original segment or its cleaned copy,
whole, and both hold the same offsets for every record that a reader may
still need.
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def cleaned_paths(log_path: str, index_path: str) -> tuple[str, str]:
    """Where the cleaned copy of a segment is written: ``(log, index)``."""
    return log_path + CLEANED_SUFFIX, index_path + CLEANED_SUFFIX


def commit_cleaned(log_path: str, index_path: str) -> None:
    """Steps 1-3 of the module doc: the cleaned copy (fsynced) replaces the segment's files."""
    cleaned_log, cleaned_index = cleaned_paths(log_path, index_path)
    os.rename(cleaned_index, index_path + SWAP_SUFFIX)
    os.rename(cleaned_log, log_path + SWAP_SUFFIX)               # the commit point
    os.replace(index_path + SWAP_SUFFIX, index_path)
    os.replace(log_path + SWAP_SUFFIX, log_path)


def discard_cleaned(log_path: str, index_path: str) -> None:
    for path in cleaned_paths(log_path, index_path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def complete_interrupted_cleaning(dir: str) -> list[str]:
    """Remove unfinished cleaned copies and finish committed swaps in ``dir``
    (before its segments are opened); returns the log files that were swapped in."""
    names = set(os.listdir(dir))
    for name in sorted(names):
        if name.endswith(CLEANED_SUFFIX):
            log.info("removing the unfinished cleaned segment file %s", os.path.join(dir, name))
            os.unlink(os.path.join(dir, name))
    swapped = []
    for name in sorted(n for n in names if n.endswith(".log" + SWAP_SUFFIX)):
        log_path = os.path.join(dir, name[:-len(SWAP_SUFFIX)])
        index_path = log_path[:-len(".log")] + ".index"
        if os.path.exists(index_path + SWAP_SUFFIX):
            os.replace(index_path + SWAP_SUFFIX, index_path)
        elif os.path.exists(index_path):
            os.unlink(index_path)            # the copy's or the original's: rebuilt from the log
        os.replace(log_path + SWAP_SUFFIX, log_path)
        log.info("completed the interrupted swap of cleaned segment %s", log_path)
        swapped.append(log_path)
    for name in sorted(n for n in names if n.endswith(".index" + SWAP_SUFFIX)):
        path = os.path.join(dir, name)
        if os.path.exists(path):             # its .log.swap was never renamed: not committed
            log.info("removing the uncommitted cleaned index %s", path)
            os.unlink(path)
    return swapped
