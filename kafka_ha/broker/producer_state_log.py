"""A partition's producer state kept in step with its log: built from the log when
first needed, updated by every append (leader and follower), cut back by truncation.

The decisions are :mod:`producer_state`'s; this module finds the idempotent
batches in record sets and log segments (their v2 headers only, no record is
decoded) and decides when the state must be rebuilt.

Building: the state is built by scanning the headers of every batch in the log
the first time a leader needs it (the first idempotent batch it is asked to
append), so a broker that starts, or a follower that becomes leader, knows every
producer whose batches its log holds.  Until then nothing is kept, and a
follower's appends cost nothing.  Kafka also writes producer-state snapshots
(``<offset>.snapshot``) to bound this scan; they are not written here yet, so
the scan covers the whole log (about 5 us a batch).  It pauses for the event
loop every slice (``cooperative.yielding``): appends that happen meanwhile are
picked up by a last pass over the log's tail, which does not pause, and a
truncation meanwhile starts the scan over.  Other greenlets that need the state
wait for the one building it.

Truncation keeps what is below the new log end; when a producer loses every
cached batch, the state is dropped and rebuilt at the next need.
"""
from __future__ import annotations

import logging
from typing import Iterable, Iterator, Protocol

from gevent.lock import Semaphore

from kafka_ha.broker.producer_state import APPEND, Decision, ProducerBatch, ProducerStates
from kafka_ha.cooperative import yielding
from kafka_ha.records.format import MAGIC_V2
from kafka_ha.records.shallow import Entry, iter_entries, validate_entry

log = logging.getLogger(__name__)


class HeaderScannable(Protocol):
    def headers(self, from_offset: int = 0) -> Iterator[Entry]: ...


def idempotent_batches(entries: Iterable[Entry]) -> list[tuple[ProducerBatch, int]]:
    """``(batch, first offset)`` of each v2 batch with a producer id, in order."""
    return [(ProducerBatch(e.producer_id, e.producer_epoch, e.base_sequence, e.record_count),
             e.first_offset)
            for e in entries if e.magic == MAGIC_V2 and e.producer_id >= 0]


def unassigned_idempotent_batches(entries: Iterable[Entry]) -> list[tuple[ProducerBatch, int]]:
    """As :func:`idempotent_batches` for a producer's v2 batches, whose offsets are not
    assigned yet: each batch's offset is relative to the record set's first one."""
    out, relative = [], 0
    for e in entries:
        if e.producer_id >= 0:
            out.append((ProducerBatch(e.producer_id, e.producer_epoch, e.base_sequence,
                                      e.record_count), relative))
        relative += e.record_count
    return out


class LogProducers:
    def __init__(self, log_: HeaderScannable, name: object) -> None:
        self._log = log_
        self._name = name
        self._states: ProducerStates | None = None   # None: not built (or dropped)
        self._building = Semaphore()
        self._truncations = 0

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
            states, next_offset, batches = ProducerStates(), 0, 0
            for entry in yielding(self._log.headers()):
                if self._truncations != truncations:
                    break
                states.record_all(idempotent_batches((entry,)))
                next_offset, batches = entry.last_offset + 1, batches + 1
            if self._truncations != truncations:
                continue
            # What was appended while the scan paused; no pause here, so nothing is missed.
            for entry in self._log.headers(next_offset):
                if entry.last_offset >= next_offset:
                    states.record_all(idempotent_batches((entry,)))
                    batches += 1
            log.info("%s: rebuilt the state of %d producers from the %d batches of the log",
                     self._name, len(states), batches)
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
        if not batches or self._states is None:
            return
        for batch, relative in batches:
            self._states.record(batch, first_offset + relative)

    def appended_as_follower(self, records) -> None:
        """A follower wrote the leader's entries (their offsets are assigned)."""
        if self._states is not None:
            self._states.record_all(idempotent_batches(iter_entries(records)))

    def truncated(self, log_end_offset: int) -> None:
        self._truncations += 1
        if self._states is not None and not self._states.truncate(log_end_offset):
            self._states = None
