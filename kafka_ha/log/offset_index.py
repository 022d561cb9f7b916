"""A segment's offset index: where to start scanning for the entry that holds an offset.

The ``.index`` file holds 8-byte entries ``relative offset i32, position i32``,
one per append once ``interval_bytes`` have been written since the previous one
(Kafka's rule).  Each maps the *first* offset of an append to the position where
that append starts, so "the largest indexed offset <= target" gives a position
from which a header-only scan finds the entry holding the target.  (Kafka
indexes the append's last offset; the first is as good for lookups and keeps the
index monotonic after a truncation without re-reading anything.)

The whole index lives in memory; the file is written in batches of
``INDEX_WRITE_BATCH`` entries (and on flush and close).  An index file that
misses its last entries after a crash is only sparser: lookups scan a little
more.  It is checked against the log when loaded and rebuilt by the segment
when it does not match.

Besides the sparse entries, the index remembers where each append of this
process began since the last entry (at most ``TAIL_ENTRIES``): a denser index
of the tail, where followers and consumers read, so reads there scan few or no
headers.  Truncation and rebuilding forget it.
"""
from __future__ import annotations

import bisect
import logging
import os
import struct
from typing import Callable

from .file_writes import append_index_entries, replace_contents

log = logging.getLogger(__name__)

INDEX_ENTRY = struct.Struct(">ii")
INDEX_WRITE_BATCH = 16             # index entries per write: one write per ~64 KiB appended
TAIL_ENTRIES = 256                 # bound of the in-memory index of recent appends


class OffsetIndex:
    def __init__(self, path: str, base_offset: int, interval_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.interval_bytes = interval_bytes
        self.offsets: list[int] = []      # absolute first offsets of indexed appends
        self.positions: list[int] = []
        self.bytes_since_entry = 0
        self.unwritten = bytearray()      # entries not yet written to the file
        self.recent_offsets: list[int] = []   # first offset of each recent append
        self.recent_positions: list[int] = []

    # --- building -------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything (before a rebuild from the log)."""
        self.offsets, self.positions, self.bytes_since_entry = [], [], 0
        self.unwritten = bytearray()
        self.forget_recent()

    def on_append(self, first_offset: int, position: int, length: int) -> None:
        """An append of this process, ``length`` bytes at ``position``, is in the file.

        May raise the OSError of writing a due batch of entries to the file.
        """
        if self.bytes_since_entry > self.interval_bytes:
            self._add(first_offset, position)
        elif len(self.recent_offsets) >= TAIL_ENTRIES:
            self.forget_recent()
        self.recent_offsets.append(first_offset)
        self.recent_positions.append(position)
        self.bytes_since_entry += length
        if len(self.unwritten) >= INDEX_WRITE_BATCH * INDEX_ENTRY.size:
            self.write()

    def on_entry(self, first_offset: int, position: int, size: int) -> None:
        """An entry found in the file while the index is rebuilt from it."""
        if self.bytes_since_entry > self.interval_bytes:
            self._add(first_offset, position)
        self.bytes_since_entry += size

    def _add(self, offset: int, position: int) -> None:
        self.offsets.append(offset)
        self.positions.append(position)
        self.bytes_since_entry = 0
        self.forget_recent()          # the entry covers everything before it
        self.unwritten += INDEX_ENTRY.pack(offset - self.base_offset, position)

    def forget_recent(self) -> None:
        self.recent_offsets, self.recent_positions = [], []

    def truncate(self, position: int) -> None:
        """Drop what indexes positions >= ``position`` (the log was cut there)."""
        self.forget_recent()
        keep = bisect.bisect_left(self.positions, position)
        if keep != len(self.positions):
            del self.offsets[keep:], self.positions[keep:]
            self.rewrite()

    # --- lookups --------------------------------------------------------------------------

    def lookup(self, offset: int) -> int:
        """A position at or before the entry holding ``offset`` (0 if none indexed)."""
        recent = self.recent_offsets
        if recent and offset >= recent[0]:
            return self.recent_positions[bisect.bisect_right(recent, offset) - 1]
        i = bisect.bisect_right(self.offsets, offset)
        return self.positions[i - 1] if i else 0

    def boundary_at_or_before(self, position: int) -> int:
        """The largest known entry boundary <= ``position`` (0, the segment's start, if none)."""
        recent = self.recent_positions
        if recent and position >= recent[0]:
            return recent[bisect.bisect_right(recent, position) - 1]
        i = bisect.bisect_right(self.positions, position)
        return self.positions[i - 1] if i else 0

    @property
    def last_position(self) -> int:
        """Where the last indexed append starts (0 if none): the log after it is unindexed."""
        return self.positions[-1] if self.positions else 0

    # --- the file -------------------------------------------------------------------------

    def load(self, log_size: int, entry_matches: Callable[[int, int], bool]) -> bool:
        """Read the file; False if it is not plausible for a log of ``log_size`` bytes whose
        entry at a position starts with an offset (``entry_matches(offset, position)``)."""
        with open(self.path, "rb") as f:
            data = f.read()
        if not data and log_size > self.interval_bytes:
            log.warning("index %s is empty but its log has %d bytes; rebuilding it", self.path, log_size)
            return False
        if len(data) % INDEX_ENTRY.size:
            log.warning("index %s has a partial entry (%d bytes); rebuilding it", self.path, len(data))
            return False
        pairs = list(INDEX_ENTRY.iter_unpack(data))
        offsets = [self.base_offset + rel for rel, _ in pairs]
        positions = [pos for _, pos in pairs]
        sane = all(a < b for a, b in zip(offsets, offsets[1:])) and \
            all(a < b for a, b in zip(positions, positions[1:])) and \
            all(rel >= 0 for rel, _ in pairs) and (not positions or 0 < positions[0] and positions[-1] < log_size)
        if sane and positions:
            sane = entry_matches(offsets[-1], positions[-1])
        if not sane:
            log.warning("index %s is inconsistent with its log; rebuilding it", self.path)
            return False
        self.offsets, self.positions = offsets, positions
        return True

    def write(self, sync: bool = False, fsync: Callable[[int], None] | None = None) -> None:
        """Append the unwritten entries to the file (and fsync it with ``sync``, by ``fsync``
        if given: it may run the fsync in a thread)."""
        append_index_entries(self, sync, fsync)

    def rewrite(self) -> None:
        """Replace the file with the in-memory index (after a rebuild or truncation)."""
        data = b"".join(INDEX_ENTRY.pack(o - self.base_offset, p) for o, p in zip(self.offsets, self.positions))
        replace_contents(self.path, data)
        self.unwritten = bytearray()
