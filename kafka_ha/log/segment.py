"""One log segment: a ``.log`` file of whole entries plus its sparse ``.index`` and
``.timeindex``.

Files are ``<base_offset, 20 digits>.log``, ``.index`` and ``.timeindex``; the
index is an :class:`~kafka_ha.log.offset_index.OffsetIndex`, which tells where
to start a header-only scan for the entry holding an offset, the time index a
:class:`~kafka_ha.log.time_index.TimeIndex`, which holds the segment's largest
timestamp and tells from which offset to search for a timestamp.  Either index
is rebuilt from the headers when its file is missing or implausible.

The segment never looks inside an entry except during :meth:`recover`, which
CRC-checks everything.  Reads return :class:`FileSlice` positions on ``fd``
for ``os.pread`` or ``sendfile``; the data is not copied into Python.
"""
from __future__ import annotations

import errno
import logging
import os
from typing import Callable, Iterator, NamedTuple

from kafka_ha import clock
from kafka_ha.records.errors import CorruptRecordError
from kafka_ha.records.reader import decode_records
from kafka_ha.records.format import LEGACY_PREFIX, LOG_OVERHEAD, V0_MIN_SIZE, V2_HEADER_SIZE
from kafka_ha.records.shallow import Entry, read_header, validate_entry

from .file_writes import PartialWriteError, append_whole
from .offset_index import OffsetIndex
from .segment_scan import whole_entries
from .time_index import TimeIndex

log = logging.getLogger(__name__)

MAX_RELATIVE_OFFSET = 2**31 - 1
MAX_SEGMENT_BYTES = 2**31 - 1      # positions are i32 in the index
SCAN_CHUNK = 8 * 1024              # header scans read this much at a time
RECOVERY_CHUNK = 1 << 20           # recovery reads (and CRC-checks) this much at a time
TIME_INDEX_WRITE_BYTES = 16 * 12   # time index entries are written 16 at a time (and on flush)


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


class LogSegment:
    """An append-only file of entries with offsets from ``base_offset``."""

    def __init__(self, dir: str, base_offset: int, index_interval_bytes: int = 4096, *,
                 new: bool = False) -> None:
        """The segment's files are opened (created if missing) and checked; with ``new``
        nothing is touched: the segment is empty, and its files are created by the
        first write (a log created lazily, whose directory may not exist yet)."""
        self.dir = dir
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = os.path.join(dir, segment_file_name(base_offset, ".log"))
        self.index = OffsetIndex(os.path.join(dir, segment_file_name(base_offset, ".index")),
                                 base_offset, index_interval_bytes)
        self.time_index = TimeIndex(os.path.join(dir, segment_file_name(base_offset, ".timeindex")),
                                    base_offset)
        self._fd: int | None = None
        self._files_replaced = False
        self.next_offset = base_offset
        self.tail_damaged = False          # a partial or corrupt tail: needs recover()
        # Time-based rolling (:mod:`.rolling`): wall-clock creation (or load) time, the
        # jitter the owning log drew for it, and its first batch's timestamp, read lazily.
        self.created_ms = clock.now_ms()
        self._made_ms = self.created_ms    # its age until it has a file
        self.roll_jitter_ms = 0
        self._first_batch_timestamp: int | None = None
        if new:
            self._size = 0
            return
        index_existed = os.path.exists(self.index.path)
        # An empty segment keeps no file open until it is written or read:
        # a broker with tens of thousands of idle partitions would otherwise
        # need as many descriptors (Kafka asks operators for a huge ulimit).
        fd = os.open(self.log_path, _FLAGS, 0o644)
        self._size = os.fstat(fd).st_size
        if self._size:
            self._fd = fd
        else:
            os.close(fd)
        index_ok = index_existed and self.index.load(self._size, self._indexed_entry_matches)
        if not index_ok:
            self._rebuild_index()              # the time index too
        time_ok = index_ok and self.time_index.load(MAX_RELATIVE_OFFSET + base_offset + 1)
        self._scan_tail()
        if index_ok and not (time_ok and self.time_index.last_indexed_offset < max(self.next_offset, base_offset + 1)):
            if time_ok:
                log.warning("time index %s names offsets beyond its log; rebuilding it", self.time_index.path)
            self._rebuild_index()
            self._scan_tail()

    @property
    def largest_timestamp(self) -> int:
        """The largest timestamp in the segment (-1 if none): retention.ms ages it by this."""
        return self.time_index.max_timestamp

    @property
    def time_index_path(self) -> str:
        return self.time_index.path

    # --- properties ----------------------------------------------------------------------

    @property
    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.log_path, _FLAGS, 0o644)
        return self._fd

    @property
    def index_path(self) -> str:
        return self.index.path

    @property
    def size(self) -> int:
        return self._size

    def is_empty(self) -> bool:
        return self._size == 0

    def last_modified_ms(self) -> int:
        try:
            st = os.fstat(self._fd) if self._fd is not None else os.stat(self.log_path)
        except FileNotFoundError:
            return self._made_ms           # a new segment, not written yet
        return int(st.st_mtime * 1000)

    def first_batch_timestamp(self) -> int:
        """The max timestamp of the first entry (-1 if none or empty); read once, then kept."""
        if self._first_batch_timestamp is None:
            if not self._size:
                return -1
            try:
                first = next(self.headers(0, self._size), None)
            except CorruptRecordError:           # recovery's business; time-based rolling waits
                first = None
            self._first_batch_timestamp = first.max_timestamp if first is not None else -1
        return self._first_batch_timestamp

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
        if not position:
            self._first_batch_timestamp = None     # read from the file when asked
        try:
            append_whole(self.fd, buffer, position)
        except PartialWriteError:
            self.tail_damaged = True       # the next start-up's recovery cuts it
            raise
        # Only now that the entries are in the file does this object know of them.
        self._size += len(buffer)
        self.next_offset = last_offset + 1
        self.time_index.observe(max_timestamp, last_offset)
        indexed = len(self.index.offsets)
        self.index.on_append(first_offset, position, len(buffer))
        if len(self.index.offsets) != indexed:
            self.time_index.add_entry()
            if len(self.time_index.unwritten) >= TIME_INDEX_WRITE_BYTES:
                self.time_index.write()

    # --- scanning ------------------------------------------------------------------------------

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
        for entry in self.headers(self.index.lookup(offset)):
            if entry.last_offset >= offset:
                return entry.position
        return None

    def offset_for_time(self, target: int, from_offset: int) -> tuple[int, int] | None:
        """ListOffsets: ``(offset, timestamp)`` of the first record at or after ``from_offset``
        whose timestamp is >= ``target``, or None.  The time index says where to start; the batch that
        reaches the target is read and decoded, so the answer is the record's own
        offset, as Kafka gives it, not its batch's first."""
        if self.largest_timestamp < target:
            return None
        start = max(self.time_index.start_offset_for(target), from_offset)
        for entry in self.headers(self.index.lookup(start)):
            if entry.last_offset < start or entry.max_timestamp < target:
                continue
            data = os.pread(self.fd, entry.size, entry.position)
            found = next(((r.offset, r.timestamp_ms) for r in decode_records(data, min_offset=start,
                                                                             check_crc=False)
                          if r.timestamp_ms >= target), None)
            return found or (max(start, entry.last_offset), entry.max_timestamp)
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
        first = next((e for e in self.headers(self.index.lookup(start_offset), limit)
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
        if bound >= self._size and self.index.recent_offsets:
            return self._size          # the end of this process's last append
        # Indexed positions and recent appends are entry boundaries: jump to the
        # last one in range, then scan headers only for the remainder.
        end = max(start, self.index.boundary_at_or_before(bound))
        for entry in self.headers(end, bound):
            end = entry.end
        return end

    # --- loading and recovery -----------------------------------------------------------------

    def _indexed_entry_matches(self, offset: int, position: int) -> bool:
        try:
            entry = next(self.headers(position), None)
        except CorruptRecordError:
            return False
        if entry is None:
            return False
        return entry.first_offset == offset if entry.first_offset is not None else entry.last_offset >= offset

    def _rebuild_index(self) -> None:
        """Rebuild both indexes from entry headers (no CRC check: see :meth:`recover`)."""
        self.index.reset()
        self.time_index.reset()
        prev_last = self.base_offset - 1
        try:
            for entry in self.headers():
                self._maybe_index(entry, prev_last)
                prev_last = entry.last_offset
        except CorruptRecordError:
            self.tail_damaged = True
        self.index.rewrite()
        self.time_index.add_entry()
        self.time_index.rewrite()

    def _maybe_index(self, entry: Entry, prev_last: int) -> None:
        # A compressed magic 0/1 wrapper names only its last offset.
        first = entry.first_offset if entry.first_offset is not None else prev_last + 1
        self.time_index.observe(entry.max_timestamp, entry.last_offset)
        indexed = len(self.index.offsets)
        self.index.on_entry(first, entry.position, entry.size)
        if len(self.index.offsets) != indexed:
            self.time_index.add_entry()

    def _scan_tail(self) -> None:
        """Find ``next_offset`` by scanning headers after the last index entry."""
        start = end = self.index.last_position
        try:
            for entry in self.headers(start):
                self.next_offset = entry.last_offset + 1
                self.time_index.observe(entry.max_timestamp, entry.last_offset)
                end = entry.end
        except CorruptRecordError:
            pass
        self.index.bytes_since_entry = end - start
        if end != self._size:
            self.tail_damaged = True

    def recover(self, max_message_bytes: int) -> int:
        """CRC-check every entry, rebuild the index, cut a corrupt or partial tail.

        Returns the number of bytes truncated.  Entries are not rejected for
        being larger than ``max_message_bytes`` (Kafka's recovery neither: a
        lowered limit must not destroy data); it only sizes the reads.
        """
        self.index.reset()
        self.time_index.reset()
        valid, prev_last = 0, self.base_offset - 1
        try:
            for buf, entry in whole_entries(self.fd, self._size, max(RECOVERY_CHUNK, max_message_bytes)):
                validate_entry(buf, entry)
                first = entry.first_offset
                if entry.last_offset <= prev_last or (first is not None and first <= prev_last) \
                        or entry.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    raise CorruptRecordError(f"entry at position {valid} has offsets {first}.."
                                             f"{entry.last_offset} after offset {prev_last}")
                self._maybe_index(entry._replace(position=valid), prev_last)
                prev_last, valid = entry.last_offset, valid + entry.size
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
        self.index.rewrite()
        self.time_index.add_entry()
        self.time_index.rewrite()
        return truncated

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
        self.index.truncate(position)
        self._first_batch_timestamp = None
        self.next_offset = self.base_offset
        self._scan_tail()
        # The tail scan saw only what follows the last offset-index entry: drop the
        # time entries past the cut and see that part again.
        self.time_index.truncate(self.next_offset)
        for entry in self.headers(self.index.last_position):
            self.time_index.observe(entry.max_timestamp, entry.last_offset)
        return removed

    def flush(self, fsync: Callable[[int], None] | None = None) -> None:
        """fsync the log and index files (with ``fsync`` if given, e.g. in a thread)."""
        (fsync or os.fsync)(self.fd)
        self.index.write(sync=True, fsync=fsync)
        self.time_index.add_entry()      # the last entry holds the segment's largest timestamp
        self.time_index.write(sync=True, fsync=fsync)

    def close(self) -> None:
        try:
            if not self._files_replaced:
                self.index.write()
                self.time_index.add_entry()
                self.time_index.write()
        except OSError:
            pass
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def drop_index_writes(self) -> None:
        """Before a cleaned copy replaces this segment's files: forget unwritten index entries
        (the copy's time index is written from the group's, :func:`.time_index.write_merged`)."""
        self.index.unwritten = bytearray()
        self.time_index.unwritten = bytearray()
        self._files_replaced = True     # close() writes no index over the copy's

    def delete(self, close: bool = True) -> None:
        """Remove the files; with ``close=False`` the fd stays readable until :meth:`close`
        (a FileSlice handed to the network layer may still be in flight)."""
        if close:
            self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, next_offset={self.next_offset})"
