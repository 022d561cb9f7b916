"""The leader epoch cache of one partition: which epoch started at which offset.

KIP-101 / KIP-279 (Kafka's ``LeaderEpochFileCache``).  The cache is pure
logic over a sorted list of ``(epoch, start_offset)``; when given a checkpoint
file it rewrites it after every change so that a restart sees the same epochs.

Those rewrites are atomic (a rename) but not durable: an fsync per epoch
change of thousands of partitions would stall a failover, and before the
log's own records reach the disk the epochs describing them need not either.
:meth:`LeaderEpochCache.sync` makes the file durable; the log calls it when it
flushes its records (as Kafka since KAFKA-15046), and the loader checks the
file against the epochs in the batches after a crash.

Deferred checkpoint writes.  A partition that becomes leader records its new
epoch at its log end offset (:meth:`LeaderEpochCache.assign_deferred`); the
file is written later, by the broker in one pass over all such partitions
after the LeaderAndIsr, or by the next flush, whichever comes first.  A follower
defers the same way the epochs of the batches it appends (after a failover, the
first batch of the new leader's epoch in each of thousands of partitions).  A new
log's cache is held (:meth:`LeaderEpochCache.hold`) until its directory exists.
A crash before that write cannot make truncation answer wrong epochs:

- while the write is pending, the file holds a *prefix* of the entries (entries
  are only appended in that time; a truncation or a log start change writes
  the whole list at once, as before);
- an entry whose epoch has no records yet starts at the log end offset, and the
  loader drops entries at or beyond the recovered log end: on a restart such an
  entry is gone whether it had been written or not, and the broker only leads
  again in a newer epoch, which it records anew;
- once records of the pending epoch were appended, the log's last batch carries
  that epoch, newer than any in the stale file, so the loader's check of the
  last batch finds the disagreement and rebuilds the cache from the batches;
- durability is unchanged: :meth:`LeaderEpochCache.sync`, which the log calls
  before fsyncing its records, writes a pending change too.

So a crash in the window costs at most the loader's rebuild scan, which a
power loss could already cost before.

Epochs dropped at load.  The loader forgets the epochs that start at or beyond
the log's end (Kafka's ``truncateFromEnd`` at load).  Those that start exactly
at the end are epochs this broker led without appending, common after it took
over partitions and restarted; rewriting the file for them (a new file and a
rename, about 0.7 ms each) made a restart with 10,000 such logs load 2.5-5x
slower.  So the file keeps them, and the change is pending like a deferred one:
the next load drops them again; any other change of the epochs rewrites the
whole list; and records appended at or after that offset without a change of
epoch (a follower fetching more of the epoch it holds) end with a batch whose
epoch is older than the entries the file keeps there, so a load after a crash
in that window finds the last batch disagreeing and rebuilds from the batches.
Entries beyond the end (a crash lost records they described) are dropped from
the file at once, as before.

>>> cache = LeaderEpochCache()
>>> cache.assign(0, 0); cache.assign(3, 1200); cache.assign(2, 1500)   # 2 < 3: ignored
True
True
False
>>> cache.entries()
[EpochEntry(epoch=0, start_offset=0), EpochEntry(epoch=3, start_offset=1200)]
>>> cache.end_offset_for(0, 2000), cache.end_offset_for(2, 2000), cache.end_offset_for(3, 2000)
((0, 1200), (0, 1200), (3, 2000))
>>> cache.end_offset_for(4, 2000)
(-1, -1)
"""
from __future__ import annotations

import bisect
from typing import Iterable, NamedTuple

from .checkpoints import CorruptCheckpointError, LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """``epoch -> start offset`` for one partition, strictly increasing in both."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None = None,
                 entries: Iterable[tuple[int, int]] = ()) -> None:
        self._checkpoint = checkpoint
        self._entries: list[EpochEntry] = []
        self._unsynced = False             # the file may differ from what is on the disk
        # The file is older than the entries: a change was kept in memory only,
        # to be written in a batch (:meth:`assign_deferred`) or once the log's
        # directory exists (:meth:`hold`).  See "Deferred checkpoint writes" above.
        self.pending = False
        self._held = False
        for epoch, start in entries:
            self.assign(epoch, start, flush=False)

    @classmethod
    def load(cls, checkpoint: LeaderEpochCheckpointFile) -> LeaderEpochCache | None:
        """The cache stored in ``checkpoint``; None if the file does not exist.

        Raises :class:`CorruptCheckpointError` if the file does not parse or
        its entries are not strictly increasing (the caller rebuilds it).
        """
        stored = checkpoint.read()
        if stored is None:
            return None
        for (e1, s1), (e2, s2) in zip(stored, stored[1:]):
            if e2 <= e1 or s2 < s1:
                raise CorruptCheckpointError(checkpoint.path, None,
                                             f"entries ({e1}, {s1}) then ({e2}, {s2}) are not increasing")
        cache = cls(checkpoint)
        cache._entries = [EpochEntry(e, s) for e, s in stored]
        cache._unsynced = True             # a crashed process may have left it in the page cache only
        return cache

    # --- queries -----------------------------------------------------------------------

    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def epoch_at(self, offset: int) -> int:
        """The epoch whose records hold ``offset`` (the last to start at or before it), -1 if none."""
        starts = [e.start_offset for e in self._entries]
        i = bisect.bisect_right(starts, offset)
        return self._entries[i - 1].epoch if i else UNDEFINED_EPOCH

    def start_offset_of(self, epoch: int) -> int | None:
        """Start offset of exactly ``epoch`` (KAFKA-7128's check), None if unknown."""
        for entry in self._entries:
            if entry.epoch == epoch:
                return entry.start_offset
        return None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """KIP-279 answer to OffsetsForLeaderEpoch: ``(epoch, end_offset)``.

        - the latest epoch ends at the log end offset;
        - otherwise answer the largest known epoch <= requested, ending where the
          next higher epoch starts;
        - a requested epoch below every known epoch ends where the first known
          epoch starts (Kafka answers with the requested epoch itself then);
        - an undefined or newer-than-latest epoch, or an empty cache: ``(-1, -1)``.

        The third rule is Kafka's since 2.1 (its docstring still describes 2.0's
        ``(-1, -1)``).  It matters on both sides: a leader whose log start moved
        past a follower's epochs still tells it where to cut, and a follower
        whose log start moved past the epoch its leader answered with cuts what
        it holds in later epochs, instead of falling back to its high watermark
        and keeping them (tests/unit/test_truncation.py).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)   # first entry with epoch > requested
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        end = self._entries[higher].start_offset
        if higher == 0:
            return requested_epoch, end
        return epochs[higher - 1], end

    # --- changes -----------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; False if ignored.

        As in Kafka before 2.4, only a strictly larger epoch starting at or after
        the latest start offset is recorded; older or repeated epochs are
        ignored (a follower sees the same epoch on many batches).
        """
        if epoch < 0 or start_offset < 0:
            return False
        if self._entries:
            last = self._entries[-1]
            if epoch <= last.epoch or start_offset < last.start_offset:
                return False
        self._entries.append(EpochEntry(epoch, start_offset))
        if flush:
            self.flush()
        return True

    def truncate_from_end(self, end_offset: int, defer_at_end: bool = False) -> None:
        """Forget epochs starting at or after ``end_offset`` (the log was truncated there).

        ``defer_at_end`` (the loader): if every epoch forgotten starts exactly at
        ``end_offset`` (epochs this broker led without appending), the file keeps them
        until a later write; see the module doc for why that is safe."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            at_end = all(e.start_offset == end_offset for e in self._entries[len(kept):])
            self._entries = kept
            if defer_at_end and at_end and self._checkpoint is not None:
                self.pending = True
            else:
                self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly below a new log start; the epoch spanning it now starts there."""
        before = [e for e in self._entries if e.start_offset <= start_offset]
        if not before or (len(before) == 1 and before[0].start_offset == start_offset):
            return
        after = self._entries[len(before):]
        self._entries = [EpochEntry(before[-1].epoch, start_offset)] + after
        self.flush()

    def clear(self) -> None:
        self._entries = []
        self.flush()

    def replace(self, entries: Iterable[tuple[int, int]]) -> None:
        """Reset to ``entries`` (a rebuild from the log) and persist."""
        self._entries = []
        for epoch, start in entries:
            self.assign(epoch, start, flush=False)
        self.flush()

    def assign_deferred(self, epoch: int, start_offset: int) -> bool:
        """:meth:`assign`, leaving the file to a later :meth:`write_pending` (or
        :meth:`sync`): a LeaderAndIsr for thousands of partitions writes their
        checkpoints in one pass after it, not one file per partition inside it."""
        assigned = self.assign(epoch, start_offset, flush=False)
        if assigned and self._checkpoint is not None:
            self.pending = True
        return assigned

    def hold(self) -> None:
        """Keep every change in memory until :meth:`release` (the log's directory does
        not exist yet)."""
        self._held = True

    def release(self) -> None:
        """Writes go to the file again.  One that was held back stays pending, for
        :meth:`write_pending` or :meth:`sync`: the first append to a new log should
        not pay for a checkpoint file that its records can rebuild."""
        self._held = False

    def write_pending(self) -> bool:
        """Write a change that was kept in memory only; False if there was none (or the
        cache is still held)."""
        if not self.pending or self._held:
            return False
        self.flush()
        return True

    def flush(self) -> None:
        """Rewrite the checkpoint file: atomically, not yet durably (see :meth:`sync`)."""
        if self._checkpoint is None:
            return
        if self._held:
            self.pending = True
            return
        self._checkpoint.write(self._entries, durable=False)
        self._unsynced = True
        self.pending = False

    def sync(self) -> None:
        """Make the checkpoint durable if it changed since the last sync (fsync, rename,
        fsync of the directory), a pending change included; not while held."""
        if self._checkpoint is not None and (self._unsynced or self.pending) and not self._held:
            self._checkpoint.write(self._entries, durable=True)
            self._unsynced = self.pending = False
