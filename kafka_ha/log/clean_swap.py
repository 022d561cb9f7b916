"""The files of a cleaned segment group, and how they replace the originals even across a crash.

The cleaner copies a group of consecutive segments ``[B, ...]`` into one,
``<B>.log.cleaned`` and ``<B>.index.cleaned``, fsynced, and then swaps it in on
the event loop (Kafka's ``.cleaned``/``.swap`` protocol):

1. the group's later segments whose base offset lies beyond the copy's last
   offset are deleted: every record they held was removed by the cleaning
   (superseded by a later record of its key, or an expired tombstone), so the
   log without them is already a correctly compacted log;
2. ``.index.cleaned`` -> ``.index.swap``;
3. ``.log.cleaned`` -> ``.log.swap``: from here on the copy is the group, and a
   restart finishes the swap;
4. the group's other later segments are deleted;
5. ``.index.swap`` -> ``.index``, then ``.log.swap`` -> ``.log``, each an
   atomic ``rename`` over the original.

:func:`complete_interrupted_cleaning` runs before a log directory is loaded:
a ``.cleaned`` file is an unfinished copy and goes; a ``<B>.log.swap`` finishes
steps 4 and 5 (the segments to delete are those based in ``(B, last offset of
the copy]``: only the group's can be); an ``.index.swap`` without its
``.log.swap`` was never committed and goes.  When no ``.index.swap`` is left
for a ``.log.swap``, the ``.index`` is removed, since it may be the copy's or
the original's; it is rebuilt from the log when the segment is opened.  Every
crash point thus leaves the original group or its copy, whole, and each
record either at its offset or removed as the cleaning allowed.
"""
from __future__ import annotations

import logging
import os
import re
from typing import Callable, Sequence

from kafka_ha.records.format import LEGACY_PREFIX, LOG_OVERHEAD, V0_MIN_SIZE
from kafka_ha.records.shallow import iter_entries, read_header

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SEGMENT = re.compile(r"^(\d{20})\.log$")
_CHUNK = 1 << 20


def cleaned_paths(log_path: str, index_path: str) -> tuple[str, str]:
    """Where the cleaned copy of a group based at this segment is written: ``(log, index)``."""
    return log_path + CLEANED_SUFFIX, index_path + CLEANED_SUFFIX


def commit_cleaned(log_path: str, index_path: str, delete_before: Sequence[Callable[[], None]] = (),
                   delete_after: Sequence[Callable[[], None]] = ()) -> None:
    """Steps 1-5 of the module doc for the group based at ``log_path``: ``delete_before``
    removes the later segments beyond the copy's last offset, ``delete_after`` the others."""
    for delete in delete_before:
        delete()
    cleaned_log, cleaned_index = cleaned_paths(log_path, index_path)
    os.rename(cleaned_index, index_path + SWAP_SUFFIX)
    os.rename(cleaned_log, log_path + SWAP_SUFFIX)               # the commit point
    for delete in delete_after:
        delete()
    os.replace(index_path + SWAP_SUFFIX, index_path)
    os.replace(log_path + SWAP_SUFFIX, log_path)


def discard_cleaned(log_path: str, index_path: str) -> None:
    for path in cleaned_paths(log_path, index_path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def last_offset(path: str, base_offset: int) -> int:
    """The last offset of the whole entries in a segment file (``base_offset - 1`` if none)."""
    last = base_offset - 1
    with open(path, "rb") as f:
        size, pos = os.fstat(f.fileno()).st_size, 0
        while pos + LOG_OVERHEAD <= size:
            buf = os.pread(f.fileno(), min(_CHUNK, size - pos), pos)
            consumed = 0
            for entry in iter_entries(buf):
                last, consumed = entry.last_offset, entry.end
            if not consumed:                     # one entry larger than the chunk: its header
                _, length = LEGACY_PREFIX.unpack_from(buf, 0)
                if length < V0_MIN_SIZE or pos + LOG_OVERHEAD + length > size:
                    break
                entry = read_header(buf, 0)
                last, consumed = entry.last_offset, entry.size
            pos += consumed
    return last


def _unlink(path: str) -> None:
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
        base = int(os.path.basename(log_path)[:-len(".log")])
        last = last_offset(log_path + SWAP_SUFFIX, base)
        for other in sorted(names):
            m = _SEGMENT.match(other)
            if m and base < int(m.group(1)) <= last:
                log.info("deleting segment %s, replaced by the cleaned copy %s", other, name)
                _unlink(os.path.join(dir, other))
                _unlink(os.path.join(dir, other[:-len(".log")] + ".index"))
        if os.path.exists(index_path + SWAP_SUFFIX):
            os.replace(index_path + SWAP_SUFFIX, index_path)
        else:
            _unlink(index_path)                  # the copy's or the original's: rebuilt from the log
        os.replace(log_path + SWAP_SUFFIX, log_path)
        log.info("completed the interrupted swap of cleaned segment %s", log_path)
        swapped.append(log_path)
    for name in sorted(n for n in names if n.endswith(".index" + SWAP_SUFFIX)):
        path = os.path.join(dir, name)
        if os.path.exists(path):             # its .log.swap was never renamed: not committed
            log.info("removing the uncommitted cleaned index %s", path)
            os.unlink(path)
    return swapped
