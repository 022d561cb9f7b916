"""One log segment: a ``.log`` file of whole entries plus its sparse ``.index``.

Files are ``<base_offset, 20 digits>.log`` and ``.index``.  The index holds
8-byte entries ``relative offset i32, position i32``, one per append once
``index_interval_bytes`` have been written since the previous one (Kafka's
rule).  Each maps the *first* offset of an append to the position where that
append starts, so "the largest indexed offset <= target" gives a position from
which a header-only scan finds the entry holding the target.  (Kafka indexes
the append's last offset; the first is as good for lookups and keeps the index
monotonic after a truncation without re-reading anything.)

The segment never looks inside an entry except during :meth:`recover`, which
CRC-checks everything.  Reads return :class:`FileSlice` positions on ``fd``
for ``os.pread`` or ``sendfile``; the data is not copied into Python.
"""
from __future__ import annotations

import bisect
import errno
import logging
import os
import struct
from typing import Iterator, NamedTuple

from kafka_ha.records.errors import CorruptRecordError
from kafka_ha.records.format import LEGACY_PREFIX, LOG_OVERHEAD, V0_MIN_SIZE, V2_HEADER_SIZE
from kafka_ha.records.shallow import Entry, iter_entries, read_header, validate_entry

log = logging.getLogger(__name__)

INDEX_ENTRY = struct.Struct(">ii")
MAX_RELATIVE_OFFSET = 2**31 - 1
MAX_SEGMENT_BYTES = 2**31 - 1      # positions are i32 in the index
SCAN_CHUNK = 8 * 1024              # header scans read this much at a time
TAIL_ENTRIES = 256                 # bound of the in-memory index of the tail (see _recent_offsets)
RECOVERY_CHUNK = 1 << 20           # recovery reads (and CRC-checks) this much at a time


class FileSlice(NamedTuple):
    """``length`` bytes at ``position`` of an open segment file."""

    fileno: int
    path: str
    position: int
    length: int
    first_entry_offset: int        # first offset of the first entry (its last for a
    #                                compressed magic 0/1 wrapper, which has no other)

    def read(self) -> bytes:
        return os.pread(self.fileno, self.length, self.position)


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``segment_file_name(5, ".log")`` -> ``'00000000000000000005.log'``."""
    return f"{base_offset:020d}{suffix}"


_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
INDEX_WRITE_BATCH = 16  # index entries per write: one write per ~64 KiB appended


def _write_all(fd: int, data) -> None:
    # The view is released even when a write fails: a traceback kept by a caller
    # must not pin ``data`` (an exported bytearray cannot grow).
    with memoryview(data) as view:
        written = os.write(fd, view)
        while written < len(view):
            written += os.write(fd, view[written:])


class PartialWriteError(OSError):
    """An append failed and the part of it already in the file could not be cut off."""


def _append_whole(fd: int, data, size: int) -> None:
    """Append ``data`` to the file of ``fd``, ``size`` bytes long, or leave it at ``size`` bytes.

    A full disk makes ``write`` short before it fails, leaving part of ``data``
    in the file; a later append would land after that part, where nobody
    expects an entry to start.  So the part is cut off again before the
    write's OSError is re-raised; if the cut fails too, PartialWriteError.
    """
    try:
        _write_all(fd, data)
    except OSError as write_error:
        try:
            os.ftruncate(fd, size)
        except OSError as cut_error:
            raise PartialWriteError(write_error.errno, f"{write_error.strerror}; cutting the partial write "
                                                       f"back to {size} bytes failed too: {cut_error}") \
                from write_error
        raise


class LogSegment:
    """An append-only file of entries with offsets from ``base_offset``."""

    def __init__(self, dir: str, base_offset: int, index_interval_bytes: int = 4096) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = os.path.join(dir, segment_file_name(base_offset, ".log"))
        self.index_path = os.path.join(dir, segment_file_name(base_offset, ".index"))
        self._fd: int | None = None
        index_existed = os.path.exists(self.index_path)
        # An empty segment keeps no file open until it is written or read:
        # a broker with tens of thousands of idle partitions would otherwise
        # need as many descriptors (Kafka asks operators for a huge ulimit).
        fd = os.open(self.log_path, _FLAGS, 0o644)
        self._size = os.fstat(fd).st_size
        if self._size:
            self._fd = fd
        else:
            os.close(fd)
        # Index entries not yet written to the .index file.  The file is opened
        # only to write a batch of them: keeping a second descriptor open for
        # every partition would double a broker's open files (10k partitions
        # on a broker is 20k descriptors), and the index lives in memory anyway.
        self._unwritten_index = bytearray()
        self._offsets: list[int] = []      # absolute first offsets of indexed appends
        self._positions: list[int] = []
        self._bytes_since_index = 0
        # Where each append of this process began since the last index entry
        # (an entry boundary; an append may hold several entries): a denser
        # in-memory index of the tail, where followers and consumers read, so
        # reads there scan few or no headers.  At most TAIL_ENTRIES; truncation
        # and recovery empty it.
        self._recent_offsets: list[int] = []   # first offset of each append
        self._recent_positions: list[int] = []
        self.next_offset = base_offset
        self.largest_timestamp = -1        # of the entries this process has seen
        self.tail_damaged = False          # a partial or corrupt tail: needs recover()
        if not (index_existed and self._load_index()):
            self._rebuild_index()
        self._scan_tail()

    # --- properties ----------------------------------------------------------------------

    @property
    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.log_path, _FLAGS, 0o644)
        return self._fd

    @property
    def size(self) -> int:
        return self._size

    def is_empty(self) -> bool:
        return self._size == 0

    def last_modified_ms(self) -> int:
        st = os.fstat(self._fd) if self._fd is not None else os.stat(self.log_path)
        return int(st.st_mtime * 1000)

    # --- append ------------------------------------------------------------------------------

    def append(self, first_offset: int, last_offset: int, buffer, max_timestamp: int = -1) -> None:
        """Write whole entries holding ``first_offset..last_offset`` at the end.

        The entries are appended whole or not at all: if their write fails
        (OSError), the file and this object are as they were.  Index entries
        are written afterwards, in batches; an OSError from that comes with the
        entries appended (the index file is checked against the log and rebuilt
        at start-up when it does not match).
        """
        if first_offset < self.next_offset or last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            raise ValueError(f"segment {self.log_path}: cannot append offsets {first_offset}..{last_offset} "
                             f"(next offset {self.next_offset})")
        if self.tail_damaged:
            raise OSError(errno.EIO, f"segment {self.log_path} ends in part of an entry after position "
                                     f"{self._size}; it takes no appends until it is recovered")
        position = self._size
        try:
            _append_whole(self.fd, buffer, position)
        except PartialWriteError:
            self.tail_damaged = True       # the next start-up's recovery cuts it
            raise
        # Only now that the entries are in the file does this object know of them.
        self._size += len(buffer)
        if self._bytes_since_index > self.index_interval_bytes:
            self._add_index(first_offset, position)
        elif len(self._recent_offsets) >= TAIL_ENTRIES:
            self._forget_recent()
        self._recent_offsets.append(first_offset)
        self._recent_positions.append(position)
        self._bytes_since_index += len(buffer)
        self.next_offset = last_offset + 1
        self.largest_timestamp = max(self.largest_timestamp, max_timestamp)
        # Written in batches (and on flush/close); an index file that misses its
        # last entries after a crash is only sparser: lookups scan a little more.
        if len(self._unwritten_index) >= INDEX_WRITE_BATCH * INDEX_ENTRY.size:
            self._write_index()

    def _add_index(self, offset: int, position: int) -> None:
        """Index the entry at ``position`` (in memory; :meth:`_write_index` writes it out)."""
        self._offsets.append(offset)
        self._positions.append(position)
        self._bytes_since_index = 0
        self._forget_recent()          # the index covers everything before this entry
        self._unwritten_index += INDEX_ENTRY.pack(offset - self.base_offset, position)

    def _write_index(self, sync: bool = False) -> None:
        if self._unwritten_index or sync:
            fd = os.open(self.index_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                # Whole entries or nothing, so that a retry does not follow a partial one.
                _append_whole(fd, self._unwritten_index, os.fstat(fd).st_size)
                self._unwritten_index = bytearray()
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)

    def _rewrite_index(self) -> None:
        """Replace the index file with the in-memory index (after a rebuild or truncation)."""
        data = b"".join(INDEX_ENTRY.pack(o - self.base_offset, p)
                        for o, p in zip(self._offsets, self._positions))
        fd = os.open(self.index_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        self._unwritten_index = bytearray()

    # --- scanning ------------------------------------------------------------------------------

    def _forget_recent(self) -> None:
        self._recent_offsets, self._recent_positions = [], []

    def _lookup(self, offset: int) -> int:
        """A position at or before the entry holding ``offset`` (0 if none indexed)."""
        recent = self._recent_offsets
        if recent and offset >= recent[0]:
            return self._recent_positions[bisect.bisect_right(recent, offset) - 1]
        i = bisect.bisect_right(self._offsets, offset)
        return self._positions[i - 1] if i else 0

    def headers(self, start: int = 0, end: int | None = None) -> Iterator[Entry]:
        """Entries of ``[start, end)`` read from their headers only; stops at a partial tail."""
        end = self._size if end is None else end
        buf, buf_start, pos, peek = b"", start, start, SCAN_CHUNK
        while pos + LOG_OVERHEAD <= end:
            rel = pos - buf_start
            if rel + V2_HEADER_SIZE > len(buf) and buf_start + len(buf) < end:
                buf, buf_start, rel = os.pread(self.fd, min(peek, end - pos), pos), pos, 0
            if rel + LOG_OVERHEAD > len(buf):
                return
            _, size = LEGACY_PREFIX.unpack_from(buf, rel)
            if size >= V0_MIN_SIZE and pos + LOG_OVERHEAD + size > end:
                return                                     # partial trailing entry
            if rel + min(LOG_OVERHEAD + max(size, 0), V2_HEADER_SIZE) > len(buf):
                return
            entry = read_header(buf, rel, pos)            # raises on impossible sizes
            # Large entries: peek at headers only instead of reading their bodies.
            peek = V2_HEADER_SIZE if entry.size > SCAN_CHUNK else SCAN_CHUNK
            yield entry
            pos = entry.end

    def position_of(self, offset: int) -> int | None:
        """Position of the first entry whose last offset >= ``offset``; None if none."""
        for entry in self.headers(self._lookup(offset)):
            if entry.last_offset >= offset:
                return entry.position
        return None

    # --- read ------------------------------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int, max_position: int | None = None,
             min_one_message: bool = True, cut_oversized: bool = True) -> FileSlice | None:
        """Whole entries from the one holding ``start_offset``, at most ``max_bytes``.

        Entries at or beyond ``max_position`` are not returned.  If the first
        entry alone exceeds ``max_bytes`` it is returned whole when
        ``min_one_message`` (Fetch v3+, KIP-74); otherwise it is cut at
        ``max_bytes`` when ``cut_oversized``, as Kafka does for Fetch v0-2 so
        that the client reports it as too large, or nothing of it is sent (an
        empty slice: Fetch v3+ partitions after the first).  None when no entry
        qualifies.
        """
        limit = self._size if max_position is None else min(max_position, self._size)
        first = next((e for e in self.headers(self._lookup(start_offset), limit)
                      if e.last_offset >= start_offset), None)
        if first is None:
            return None
        start = first.position
        end = self._whole_entries_end(start, min(limit, start + max_bytes))
        if end == start:
            if min_one_message:
                end = first.end
            elif cut_oversized:
                end = start + min(max_bytes, first.size)
                if end == start:
                    return None
        offset = first.first_offset if first.first_offset is not None else first.last_offset
        return FileSlice(self.fd, self.log_path, start, end - start, offset)

    def _whole_entries_end(self, start: int, bound: int) -> int:
        """The largest entry boundary <= ``bound`` reachable from ``start``."""
        # Indexed positions and recent appends are entry boundaries: jump to the
        # last one in range, then scan headers only for the remainder.
        recent = self._recent_positions
        if recent and bound >= recent[0]:
            if bound >= self._size:
                return self._size      # the end of this process's last append
            end = max(start, recent[bisect.bisect_right(recent, bound) - 1])
        else:
            i = bisect.bisect_right(self._positions, bound)
            end = max(start, self._positions[i - 1]) if i else start
        for entry in self.headers(end, bound):
            end = entry.end
        return end

    # --- loading and recovery -----------------------------------------------------------------

    def _load_index(self) -> bool:
        """Read the index file; False if it is not plausible (then it is rebuilt)."""
        with open(self.index_path, "rb") as f:
            data = f.read()
        if not data and self._size > self.index_interval_bytes:
            log.warning("index %s is empty but its log has %d bytes; rebuilding it", self.index_path, self._size)
            return False
        if len(data) % INDEX_ENTRY.size:
            log.warning("index %s has a partial entry (%d bytes); rebuilding it", self.index_path, len(data))
            return False
        pairs = list(INDEX_ENTRY.iter_unpack(data))
        offsets = [self.base_offset + rel for rel, _ in pairs]
        positions = [pos for _, pos in pairs]
        sane = all(a < b for a, b in zip(offsets, offsets[1:])) and \
            all(a < b for a, b in zip(positions, positions[1:])) and \
            all(rel >= 0 for rel, _ in pairs) and (not positions or 0 < positions[0] and positions[-1] < self._size)
        if sane and positions:
            sane = self._indexed_entry_matches(offsets[-1], positions[-1])
        if not sane:
            log.warning("index %s is inconsistent with its log; rebuilding it", self.index_path)
            return False
        self._offsets, self._positions = offsets, positions
        return True

    def _indexed_entry_matches(self, offset: int, position: int) -> bool:
        try:
            entry = next(self.headers(position), None)
        except CorruptRecordError:
            return False
        if entry is None:
            return False
        return entry.first_offset == offset if entry.first_offset is not None else entry.last_offset >= offset

    def _rebuild_index(self) -> None:
        """Rebuild the index from entry headers (no CRC check: see :meth:`recover`)."""
        self._offsets, self._positions, self._bytes_since_index = [], [], 0
        self._unwritten_index = bytearray()
        prev_last = self.base_offset - 1
        try:
            for entry in self.headers():
                self._maybe_index(entry, prev_last)
                prev_last = entry.last_offset
        except CorruptRecordError:
            self.tail_damaged = True
        self._rewrite_index()

    def _maybe_index(self, entry: Entry, prev_last: int) -> None:
        if self._bytes_since_index > self.index_interval_bytes:
            first = entry.first_offset if entry.first_offset is not None else prev_last + 1
            self._add_index(first, entry.position)
        self._bytes_since_index += entry.size

    def _scan_tail(self) -> None:
        """Find ``next_offset`` by scanning headers after the last index entry."""
        start = self._positions[-1] if self._positions else 0
        end = start
        self._bytes_since_index = 0
        try:
            for entry in self.headers(start):
                self.next_offset = entry.last_offset + 1
                self.largest_timestamp = max(self.largest_timestamp, entry.max_timestamp)
                end = entry.end
        except CorruptRecordError:
            pass
        self._bytes_since_index = end - start
        if end != self._size:
            self.tail_damaged = True

    def recover(self, max_message_bytes: int) -> int:
        """CRC-check every entry, rebuild the index, cut a corrupt or partial tail.

        Returns the number of bytes truncated.  Entries are not rejected for
        being larger than ``max_message_bytes`` (Kafka's recovery neither: a
        lowered limit must not destroy data); it only sizes the reads.
        """
        self._offsets, self._positions, self._bytes_since_index = [], [], 0
        self._forget_recent()
        self._unwritten_index = bytearray()
        valid, prev_last, self.largest_timestamp = 0, self.base_offset - 1, -1
        try:
            for buf, entry in self._whole_entries(max(RECOVERY_CHUNK, max_message_bytes)):
                validate_entry(buf, entry)
                first = entry.first_offset
                if entry.last_offset <= prev_last or (first is not None and first <= prev_last) \
                        or entry.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    raise CorruptRecordError(f"entry at position {valid} has offsets {first}.."
                                             f"{entry.last_offset} after offset {prev_last}")
                self._maybe_index(entry._replace(position=valid), prev_last)
                prev_last, valid = entry.last_offset, valid + entry.size
                self.largest_timestamp = max(self.largest_timestamp, entry.max_timestamp)
        except CorruptRecordError as exc:
            log.warning("segment %s: %s; truncating to %d bytes", self.log_path, exc, valid)
        truncated = self._size - valid
        if truncated:
            log.warning("segment %s: removed %d bytes of partial or corrupt tail after offset %d",
                        self.log_path, truncated, prev_last)
            os.ftruncate(self.fd, valid)
            self._size = valid
        self.next_offset = prev_last + 1
        self.tail_damaged = False
        self._rewrite_index()
        return truncated

    def _whole_entries(self, chunk: int) -> Iterator[tuple[bytes, Entry]]:
        """``(buffer, entry)`` pairs with whole entries, ``entry.position`` relative to ``buffer``."""
        pos = 0
        while pos + LOG_OVERHEAD <= self._size:
            buf = os.pread(self.fd, min(chunk, self._size - pos), pos)
            consumed = 0
            for entry in iter_entries(buf):
                yield buf, entry
                consumed = entry.end
            if not consumed:                      # one entry larger than the chunk
                _, size = LEGACY_PREFIX.unpack_from(buf, 0)
                if size < V0_MIN_SIZE or pos + LOG_OVERHEAD + size > self._size:
                    return                        # garbage size or partial tail: stop here
                buf = os.pread(self.fd, LOG_OVERHEAD + size, pos)
                entry = read_header(buf, 0)
                yield buf, entry
                consumed = entry.end
            pos += consumed

    # --- truncation and lifecycle --------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove the entries holding offsets >= ``offset``; returns bytes removed.

        The cut is at an entry boundary: an entry that holds ``offset`` goes
        entirely, so ``next_offset`` may end up below ``offset``.
        """
        position = self.position_of(offset)
        if position is None:
            return 0
        removed = self._size - position
        os.ftruncate(self.fd, position)
        self._size = position
        self._forget_recent()
        keep = bisect.bisect_left(self._positions, position)
        if keep != len(self._positions):
            del self._offsets[keep:], self._positions[keep:]
            self._rewrite_index()
        self.next_offset, self.largest_timestamp = self.base_offset, -1
        self._scan_tail()
        return removed

    def flush(self) -> None:
        os.fsync(self.fd)
        self._write_index(sync=True)

    def close(self) -> None:
        try:
            self._write_index()
        except OSError:
            pass
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def delete(self, close: bool = True) -> None:
        """Remove the files; with ``close=False`` the fd stays readable until :meth:`close`
        (a FileSlice handed to the network layer may still be in flight)."""
        if close:
            self.close()
        for path in (self.log_path, self.index_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, next_offset={self.next_offset})"
