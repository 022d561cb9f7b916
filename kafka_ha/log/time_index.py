"""A segment's time index: from a timestamp to an offset where a search may start.

The ``.timeindex`` file has Kafka's layout: 12-byte entries ``timestamp i64,
relative offset i32``.  An entry ``(T, O)`` says "the largest timestamp of the
segment up to offset O is T, first reached at O".  Entries are added when the
offset index adds one (every ``index.interval.bytes``) and the segment's
largest timestamp has grown since the last entry, and once more when the
segment is flushed or closed, so that the last entry holds the segment's
largest timestamp (Kafka writes that one when a segment is rolled).  Both
columns therefore only grow.

A lookup for the first record at or after ``target``: nothing up to the offset
of the last entry with ``T < target`` can qualify, so a header scan from that
offset (found by the offset index) finds the first entry whose max timestamp
reaches the target.

As with the offset index, the whole index is in memory; a file that is
missing, has a partial entry or entries that do not grow, or names offsets
outside its segment is rebuilt from the segment's headers when it is loaded.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "00000000000000000100.timeindex")
>>> ti = TimeIndex(path, 100)
>>> for ts, offset in ((10, 100), (30, 105), (20, 107), (50, 110)):
...     ti.observe(ts, offset)
...     ti.add_entry()
>>> ti.entries()
[(10, 100), (30, 105), (50, 110)]
>>> ti.start_offset_for(5), ti.start_offset_for(30), ti.start_offset_for(31), ti.max_timestamp
(100, 100, 105, 50)
>>> ti.write(); os.path.getsize(path)
36
>>> again = TimeIndex(path, 100); again.load(next_offset=111)
True
>>> again.entries() == ti.entries() and again.max_timestamp == 50
True
>>> again.load(next_offset=108)    # names offset 110, beyond the segment: rebuilt by the caller
False
"""
from __future__ import annotations

import bisect
import logging
import os
import struct
from typing import Callable

from .file_writes import append_index_entries, replace_contents

log = logging.getLogger(__name__)

TIME_INDEX_ENTRY = struct.Struct(">qi")


class TimeIndex:
    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.reset()

    def reset(self) -> None:
        """Forget everything (before a rebuild from the log)."""
        self.timestamps: list[int] = []
        self.offsets: list[int] = []          # absolute
        self.unwritten = bytearray()
        self.max_timestamp = -1               # of everything observed, indexed or not
        self.offset_of_max = self.base_offset

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.timestamps, self.offsets))

    # --- building -------------------------------------------------------------------------

    def observe(self, max_timestamp: int, last_offset: int) -> None:
        """An entry of the segment (appended or found by a scan) up to ``last_offset``."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max = max_timestamp, last_offset

    def add_entry(self) -> None:
        """Index the largest timestamp so far, if it grew since the last entry."""
        if self.max_timestamp < 0 or (self.timestamps and self.max_timestamp <= self.timestamps[-1]):
            return
        self.timestamps.append(self.max_timestamp)
        self.offsets.append(self.offset_of_max)
        self.unwritten += TIME_INDEX_ENTRY.pack(self.max_timestamp, self.offset_of_max - self.base_offset)

    def truncate(self, next_offset: int) -> None:
        """Drop the entries naming offsets >= ``next_offset`` (the segment was cut there);
        the caller observes what is left after the last entry again."""
        keep = bisect.bisect_left(self.offsets, next_offset)
        del self.timestamps[keep:], self.offsets[keep:]
        self.max_timestamp = self.timestamps[-1] if self.timestamps else -1
        self.offset_of_max = self.offsets[-1] if self.offsets else self.base_offset
        self.rewrite()

    # --- lookups --------------------------------------------------------------------------

    def start_offset_for(self, target: int) -> int:
        """An offset no later than the first record with a timestamp >= ``target``."""
        i = bisect.bisect_left(self.timestamps, target)
        return self.offsets[i - 1] if i else self.base_offset

    @property
    def last_indexed_offset(self) -> int:
        return self.offsets[-1] if self.offsets else self.base_offset

    # --- the file -------------------------------------------------------------------------

    def load(self, next_offset: int) -> bool:
        """Read the file; False (and nothing kept) if it is missing or implausible for a
        segment holding offsets below ``next_offset``."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return False
        if len(data) % TIME_INDEX_ENTRY.size:
            log.warning("time index %s has a partial entry (%d bytes); rebuilding it", self.path, len(data))
            return False
        pairs = list(TIME_INDEX_ENTRY.iter_unpack(data))
        stamps = [ts for ts, _ in pairs]
        offsets = [self.base_offset + rel for _, rel in pairs]
        sane = all(a < b for a, b in zip(stamps, stamps[1:])) and \
            all(a <= b for a, b in zip(offsets, offsets[1:])) and \
            all(rel >= 0 for _, rel in pairs) and (not offsets or offsets[-1] < next_offset)
        if not sane:
            log.warning("time index %s is inconsistent with its log; rebuilding it", self.path)
            return False
        self.timestamps, self.offsets, self.unwritten = stamps, offsets, bytearray()
        if pairs:
            self.max_timestamp, self.offset_of_max = stamps[-1], offsets[-1]
        return True

    def write(self, sync: bool = False, fsync: Callable[[int], None] | None = None) -> None:
        """Append the unwritten entries to the file (fsync it with ``sync``)."""
        append_index_entries(self, sync, fsync)

    def rewrite(self) -> None:
        """Replace the file with the in-memory index (after a rebuild or truncation)."""
        data = b"".join(TIME_INDEX_ENTRY.pack(t, o - self.base_offset)
                        for t, o in zip(self.timestamps, self.offsets))
        replace_contents(self.path, data)
        self.unwritten = bytearray()


def write_merged(indexes: list[TimeIndex], last_offset: int) -> None:
    """Write the time index of a cleaned copy of consecutive segments (over the first one's
    file): their entries in order, each kept if its timestamp grows, offsets capped at the
    copy's ``last_offset``.  Compaction only removes records, so every entry stays true as
    an upper bound ("nothing up to O is later than T"), and the copy needs no header scan
    (which would run on the event loop, where the swap runs).

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> a, b = TimeIndex(os.path.join(d, "a.timeindex"), 0), TimeIndex(os.path.join(d, "b.timeindex"), 10)
    >>> for ix, entries in ((a, [(5, 3), (9, 8)]), (b, [(7, 12), (20, 15)])):
    ...     for ts, offset in entries:
    ...         ix.observe(ts, offset); ix.add_entry()
    >>> write_merged([a, b], last_offset=14)
    >>> again = TimeIndex(a.path, 0); again.load(next_offset=15), again.entries()
    (True, [(5, 3), (9, 8), (20, 14)])
    """
    merged = TimeIndex(indexes[0].path, indexes[0].base_offset)
    for index in indexes:
        for ts, offset in [*zip(index.timestamps, index.offsets), (index.max_timestamp, index.offset_of_max)]:
            if ts > merged.max_timestamp:
                merged.max_timestamp, merged.offset_of_max = ts, max(min(offset, last_offset), merged.offset_of_max)
                merged.add_entry()
    merged.rewrite()
