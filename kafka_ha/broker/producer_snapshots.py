"""Producer-state snapshots: a partition's idempotent producers written beside its log
(``<offset>.snapshot``), so that they outlive the segments that held their batches and
a new leader or a restarted broker reads them instead of scanning the whole log.

A snapshot named ``N`` holds the state of every batch below offset ``N``: a rebuild
reads the newest readable snapshot at or below the log end and scans only the
batches from ``N`` on.  Snapshots are written when the log rolls a segment and when
the broker shuts down cleanly (as Kafka does), and removed when a truncation
takes the log below them (their history is gone).

The format is Kafka's (``PidSnapshot`` version 1), so Kafka's tools read ours::

    version int16 (1) | crc uint32 (CRC-32C of everything after it) |
    count int32 | count x (producer_id int64, producer_epoch int16,
    last_sequence int32, last_offset int64, offset_delta int32, timestamp int64,
    coordinator_epoch int32, current_txn_first_offset int64)

Like Kafka's, a snapshot keeps each producer's last batch only: after a reload a
retry of that batch is still recognized, older ones until the producer has
written more.

File work (write, fsync, rename, delete) runs in gevent's threadpool, one
partition's operations in order (:class:`SnapshotFiles`), so the event loop
never waits for the disk.  A failed snapshot write is logged and costs only a
longer scan later: the log is the truth.
"""
from __future__ import annotations

import logging
import os
import struct
from collections import deque
from typing import Callable, Iterator

import gevent

from kafka_ha.broker.producer_state import MAX_SEQUENCE, BatchMetadata, ProducerStates
from kafka_ha.cooperative import in_a_thread
from kafka_ha.log.loader import PRODUCER_SNAPSHOT_SUFFIX as SUFFIX
from kafka_ha.records.format import crc32c

log = logging.getLogger(__name__)

VERSION = 1
KEEP = 3               # the newest snapshots kept; older ones are deleted as new ones come
_HEADER = struct.Struct(">hIi")          # version, crc, entry count
_CRC_FROM = 6                            # the CRC covers what follows the version and itself
_ENTRY = struct.Struct(">qhiqiqiq")
_NO_COORDINATOR_EPOCH, _NO_TRANSACTION = -1, -1


class CorruptSnapshot(ValueError):
    """A snapshot that cannot be trusted: wrong version, CRC or length."""


def encode(states: ProducerStates) -> bytes:
    """Each producer's last batch, in Kafka's snapshot format."""
    entries = [_ENTRY.pack(pid, last.producer_epoch, last.last_sequence, last.last_offset,
                           last.last_offset - last.first_offset, last.timestamp,
                           _NO_COORDINATOR_EPOCH, _NO_TRANSACTION)
               for pid, last in states.last_batches()]
    body = struct.pack(">i", len(entries)) + b"".join(entries)
    return struct.pack(">hI", VERSION, crc32c(body)) + body


def decode(data: bytes) -> ProducerStates:
    """The state a snapshot holds; raises :class:`CorruptSnapshot`."""
    if len(data) < _HEADER.size:
        raise CorruptSnapshot(f"{len(data)} bytes, shorter than a snapshot header")
    version, crc, count = _HEADER.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshot(f"unknown snapshot version {version}")
    if crc32c(data[_CRC_FROM:]) != crc:
        raise CorruptSnapshot("CRC mismatch")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptSnapshot(f"{len(data)} bytes do not hold {count} entries")
    states = ProducerStates()
    for (pid, epoch, last_sequence, last_offset, delta, timestamp, _coordinator_epoch,
         _txn_first_offset) in _ENTRY.iter_unpack(memoryview(data)[_HEADER.size:]):
        if pid < 0 or delta < 0:
            raise CorruptSnapshot(f"entry for producer id {pid} with offset delta {delta}")
        first_sequence = (last_sequence - delta) % (MAX_SEQUENCE + 1)   # may wrap past 2**31 - 1
        states.load(pid, BatchMetadata(epoch, first_sequence, last_sequence, last_offset - delta,
                                       last_offset, timestamp))
    return states


def file_name(offset: int) -> str:
    return f"{offset:020d}{SUFFIX}"


def _offsets_in(directory: str) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(n[:-len(SUFFIX)]) for n in names
                  if n.endswith(SUFFIX) and n[:-len(SUFFIX)].isdigit())


def _write(directory: str, offset: int, data: bytes) -> None:
    if not os.path.isdir(directory):       # a lazy log never written, or one being deleted
        return
    path = os.path.join(directory, file_name(offset))
    temporary = path + ".tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    for old in _offsets_in(directory)[:-KEEP]:
        _remove(directory, old)


def _remove(directory: str, offset: int) -> None:
    try:
        os.remove(os.path.join(directory, file_name(offset)))
    except FileNotFoundError:
        pass


def _remove_where(directory: str, doomed: Callable[[int], bool]) -> None:
    for offset in _offsets_in(directory):
        if doomed(offset):
            _remove(directory, offset)


def _read(directory: str, offset: int) -> bytes:
    with open(os.path.join(directory, file_name(offset)), "rb") as f:
        return f.read()


class SnapshotFiles:
    """One partition's snapshot files; every operation runs in the threadpool, in the
    order asked for, on a greenlet of its own (callers do not wait)."""

    def __init__(self, directory: Callable[[], str], name: object, offload=in_a_thread) -> None:
        self._directory = directory          # the log's, which may be renamed (deletion)
        self._name = name
        self._offload = offload
        self._pending: deque[tuple[str, Callable, tuple]] = deque()
        self._worker: gevent.Greenlet | None = None

    def write(self, offset: int, states: ProducerStates) -> None:
        self._submit(f"writing the producer snapshot at {offset}", _write, offset, encode(states))

    def remove_above(self, log_end_offset: int) -> None:
        self._submit("removing producer snapshots beyond the log end", _remove_where,
                     lambda offset: offset > log_end_offset)

    def remove_all(self) -> None:
        self._submit("removing producer snapshots", _remove_where, lambda _offset: True)

    def settle(self) -> None:
        """Wait for the operations asked for so far."""
        while self._worker is not None:
            self._worker.join()

    def newest(self, at_most: int) -> Iterator[tuple[int, ProducerStates]]:
        """The readable snapshots at or below ``at_most``, newest first; an unreadable
        one is removed (and so is any beyond ``at_most``: its history is gone)."""
        self.settle()
        directory = self._directory()
        offsets = self._offload(_offsets_in, directory)
        if offsets and offsets[-1] > at_most:
            self.remove_above(at_most)
        for offset in reversed([o for o in offsets if o <= at_most]):
            try:
                states = decode(self._offload(_read, directory, offset))
            except FileNotFoundError:
                continue
            except (OSError, CorruptSnapshot) as e:
                log.warning("%s: ignoring the producer snapshot %s: %s", self._name,
                            file_name(offset), e)
                self._submit("removing an unreadable producer snapshot", _remove, offset)
                continue
            yield offset, states

    def _submit(self, what: str, fn: Callable, *args) -> None:
        self._pending.append((what, fn, args))
        if self._worker is None:
            self._worker = gevent.spawn(self._drain)

    def _drain(self) -> None:
        try:
            while self._pending:
                what, fn, args = self._pending.popleft()
                try:
                    self._offload(fn, self._directory(), *args)
                except OSError as e:
                    # Only a longer scan later: the log itself is untouched.
                    log.warning("%s: %s failed: %s", self._name, what, e)
        finally:
            self._worker = None
