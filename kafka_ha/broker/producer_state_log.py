"""A partition's producer state kept in step with its log: built from the log when
first needed, updated by every append (leader and follower), cut back by truncation.

The decisions are :mod:`producer_state`'s; this module finds the idempotent
batches in record sets and log segments (their v2 headers only, no record is
decoded) and decides when the state must be rebuilt.

Building: the state is built the first time a leader needs it (the first
idempotent batch it is asked to append), so a broker that starts, or a follower
that becomes leader, knows every producer its log (or its snapshots) remembers.
Until then nothing is kept, and a follower's appends cost nothing.  A build
starts from the newest producer snapshot at or below the log end
(:mod:`producer_snapshots`, written at each segment roll and at a clean
shutdown) and scans the headers of the batches from there (about 5 us a
batch), so producers outlive the segments that held their batches.  The scan
pauses for the event loop every slice (``cooperative.yielding``): appends that
happen meanwhile are picked up by a last pass over the log's tail, which does
not pause, and a truncation meanwhile starts the build over.  Other greenlets
that need the state wait for the one building it.

Truncation keeps what is below the new log end, and removes the snapshots
beyond it; when a producer loses every cached batch, the state is dropped and
rebuilt at the next need.  A log emptied to start at a new offset (a follower
behind its leader's log start) forgets every producer and snapshot.
"""
from __future__ import annotations

import logging
from typing import Iterable, Iterator, Protocol

from gevent.lock import Semaphore

from kafka_ha.broker.producer_snapshots import SnapshotFiles
from kafka_ha.broker.producer_state import APPEND, Decision, ProducerBatch, ProducerStates
from kafka_ha.cooperative import yielding
from kafka_ha.records.format import MAGIC_V2
from kafka_ha.records.shallow import Entry, iter_entries, validate_entry

log = logging.getLogger(__name__)


class HeaderScannable(Protocol):
    dir: str
    log_end_offset: int
    active_segment_base_offset: int

    def headers(self, from_offset: int = 0) -> Iterator[Entry]: ...


def idempotent_batches(entries: Iterable[Entry]) -> list[tuple[ProducerBatch, int]]:
    """``(batch, first offset)`` of each v2 batch with a producer id, in order."""
    return [(ProducerBatch(e.producer_id, e.producer_epoch, e.base_sequence, e.record_count,
                           e.max_timestamp), e.first_offset)
            for e in entries if e.magic == MAGIC_V2 and e.producer_id >= 0]


def unassigned_idempotent_batches(entries: Iterable[Entry]) -> list[tuple[ProducerBatch, int]]:
    """As :func:`idempotent_batches` for a producer's v2 batches, whose offsets are not
    assigned yet: each batch's offset is relative to the record set's first one."""
    out, relative = [], 0
    for e in entries:
        if e.producer_id >= 0:
            out.append((ProducerBatch(e.producer_id, e.producer_epoch, e.base_sequence,
                                      e.record_count, e.max_timestamp), relative))
        relative += e.record_count
    return out


class LogProducers:
    def __init__(self, log_: HeaderScannable, name: object) -> None:
        self._log = log_
        self._name = name
        self._states: ProducerStates | None = None   # None: not built (or dropped)
        self._building = Semaphore()
        self._truncations = 0
        self._snapshots = SnapshotFiles(lambda: log_.dir, name)
        # The active segment when the last snapshot was taken: a new one means a roll.
        self._snapshot_segment = -1

    def states(self) -> ProducerStates:
        """The state, built first if there is none (which may pause for the event loop:
        callers re-check what other greenlets may have changed meanwhile)."""
        if self._states is None:
            with self._building:
                if self._states is None:              # not built by the greenlet waited for
                    self._states = self._rebuilt()
        return self._states

    def _rebuilt(self) -> ProducerStates:
        while True:
            truncations = self._truncations
            start, states = next(self._snapshots.newest(self._log.log_end_offset), (0, None))
            if self._truncations != truncations:        # the snapshot may be beyond the end now
                continue
            states, next_offset, batches = states or ProducerStates(), start, 0
            for entry in yielding(self._log.headers(start)):
                if self._truncations != truncations:
                    break
                if entry.last_offset < start:           # the scan may begin a little early
                    continue
                states.record_all(idempotent_batches((entry,)))
                next_offset, batches = entry.last_offset + 1, batches + 1
            if self._truncations != truncations:
                continue
            # What was appended while the scan paused; no pause here, so nothing is missed.
            for entry in self._log.headers(next_offset):
                if entry.last_offset >= next_offset:
                    states.record_all(idempotent_batches((entry,)))
                    batches += 1
            log.info("%s: rebuilt the state of %d producers from %s and the %d batches after it",
                     self._name, len(states), f"the snapshot at {start}" if start else "the log start",
                     batches)
            self._snapshot_segment = self._log.active_segment_base_offset
            return states

    def check(self, records) -> tuple[Decision, list[tuple[ProducerBatch, int]]]:
        """The leader's decision for a record set (v2 batches, offsets not yet assigned)
        and its idempotent batches, to pass to :meth:`appended` once written."""
        entries = list(iter_entries(records))
        batches = unassigned_idempotent_batches(entries)
        if not batches:
            return APPEND, batches
        decision = self.states().check_all([b for b, _ in batches])
        if decision.duplicate is not None:
            # Answered without the append's checks: a retry must be sound (CRC, sizes)
            # before it is taken for the batch it repeats, as Kafka validates first.
            for entry in entries:
                validate_entry(records, entry)
        return decision, batches

    def appended(self, batches: list[tuple[ProducerBatch, int]], first_offset: int) -> None:
        """The leader wrote the record set :meth:`check` saw from ``first_offset``."""
        if self._states is None:
            return
        for batch, relative in batches:
            self._states.record(batch, first_offset + relative)
        self._snapshot_on_roll()

    def appended_as_follower(self, records) -> None:
        """A follower wrote the leader's entries (their offsets are assigned)."""
        if self._states is not None:
            self._states.record_all(idempotent_batches(iter_entries(records)))
            self._snapshot_on_roll()

    def _snapshot_on_roll(self) -> None:
        # The state holds every batch below the log end: a snapshot there is sound.
        active = self._log.active_segment_base_offset
        if active != self._snapshot_segment:
            self._snapshot_segment = active
            self._snapshots.write(self._log.log_end_offset, self._states)

    def truncated(self, log_end_offset: int, fully: bool = False) -> None:
        """The log was cut back to ``log_end_offset``; ``fully``: emptied, to start there."""
        self._truncations += 1
        if fully:
            self._states = None
            self._snapshots.remove_all()
            return
        self._snapshots.remove_above(log_end_offset)
        if self._states is not None and not self._states.truncate(log_end_offset):
            self._states = None

    def expire(self, now_ms: int, max_idle_ms: int) -> int:
        """Forget idle producers (:meth:`ProducerStates.expire`); returns how many went."""
        return 0 if self._states is None else self._states.expire(now_ms, max_idle_ms)

    def snapshot(self) -> None:
        """Write the state (if built) at the log end, as a clean shutdown does; returns at
        once (see :meth:`settle`)."""
        if self._states is not None:
            self._snapshots.write(self._log.log_end_offset, self._states)

    def settle(self) -> None:
        """Wait for the snapshot file work asked for so far."""
        self._snapshots.settle()

    def close(self) -> None:
        self.snapshot()
        self.settle()
