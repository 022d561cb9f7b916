"""Incremental fetch sessions, the leader's side (KIP-227, Fetch v7).

A follower fetches every partition it replicates from a leader in one request,
hundreds of them on a real cluster, and most have nothing new.  With a session
the leader remembers each partition's fetch position, so a request lists only
the partitions whose position changed, and a response only the partitions with
records, a moved high watermark or log start, or an error.

How a request's ``session_id`` and ``session_epoch`` are read (Kafka's
FetchMetadata):

- epoch 0 (INITIAL): a full fetch that opens a new session; a non-zero
  ``session_id`` names an old session to close first;
- epoch -1 (FINAL): a full fetch without a session (and closes the named one);
- any other epoch: an incremental fetch of the named session, which must be the
  epoch the session expects next, else INVALID_FETCH_SESSION_EPOCH;
  FETCH_SESSION_ID_NOT_FOUND if the session is gone (evicted, or the broker
  restarted).  Either way the fetcher starts over with a full fetch.

A partition whose answer would be the one last sent *rests* in its session: an
incremental fetch neither reads it nor records the follower's position on it.
The session watches the Partition (``Partition.resting_in``), which wakes it on
any change that could alter the answer (records, the HW, the log start, the
role), and the partition is looked at again from the next fetch on.  An idle
follower's fetch of thousands of partitions then costs what changed, not the
session's size.  While a partition rests, its follower counts as fetching at
the leader's LEO at each of the session's fetches (``last_used_ms``), which is
what every one of those fetches would have recorded.

Everything here is in memory and runs between two I/O points of one greenlet;
the cache holds at most ``max_slots`` sessions, evicting the least recently used
one that has been idle for ``min_eviction_ms`` (a follower's session may evict
any consumer's).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from gevent.event import Event

from kafka_ha.broker.replica_reads import reads_up_to_leo
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
NO_SESSION = 0
_INT32_MAX = 0x7FFFFFFF


def next_epoch(epoch: int) -> int:
    """The epoch a session expects after ``epoch`` (wraps to 1, never to 0).

    >>> next_epoch(0), next_epoch(41), next_epoch(0x7FFFFFFF)
    (1, 42, 1)
    """
    return 1 if epoch >= _INT32_MAX else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One session partition: the request's position and what the last response said."""

    fetch_offset: int
    max_bytes: int
    high_watermark: int = -1
    log_start_offset: int = -1
    # The leader epoch the fetcher last named for it (Fetch v9+, KIP-320; -1: none):
    # partitions an incremental request leaves out are still checked against it.
    leader_epoch: int = -1

    def record_response(self, entry: dict[str, Any]) -> bool:
        """Remember this answer; True if an incremental response must carry it.

        >>> c = CachedPartition(5, 100)
        >>> e = {"error_code": 0, "records": b"", "high_watermark": 5, "log_start_offset": 0}
        >>> c.record_response(e), c.record_response(e), c.record_response({**e, "records": b"x"})
        (True, False, True)
        """
        hw, start = entry["high_watermark"], entry["log_start_offset"]
        changed = hw != self.high_watermark or start != self.log_start_offset
        self.high_watermark, self.log_start_offset = hw, start
        return changed or entry["error_code"] != ErrorCode.NONE or bool(entry["records"])


@dataclass(slots=True, eq=False, weakref_slot=True)
class FetchSession:
    session_id: int
    replica_id: int
    epoch: int                        # the epoch the next incremental request must carry
    last_used_ms: int                 # the start of its latest fetch
    # In fetch order; partitions that returned records move to the back, so that
    # under max_bytes the others get their turn (as Kafka's sessions do).
    partitions: dict[TopicPartition, CachedPartition] = field(default_factory=dict)
    # The partitions each fetch looks at (in the same rotating order), and those whose
    # Partition tells this session of a change, with that Partition: a watched partition
    # rests while it is not active, and stays watched after a change until the next
    # settle, so that later changes still wake a waiting fetch (module docstring).
    active: dict[TopicPartition, None] = field(default_factory=dict)
    watched: dict[TopicPartition, Any] = field(default_factory=dict)
    # Set (then replaced) when a watched partition changes in a way a waiting fetch of
    # this reader wakes for: new records for a follower, a new HW for a consumer.
    wake: Event = field(default_factory=Event)

    def __post_init__(self) -> None:
        self.active = dict.fromkeys(self.partitions)

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def up_to_leo(self) -> bool:
        """Whether it reads up to the LEO (a follower) or the HW (a consumer): what its
        waiting fetch wakes for."""
        return reads_up_to_leo(self.replica_id)

    def wanted(self) -> list[tuple[TopicPartition, int, int]]:
        """What to read for this fetch: the partitions not resting."""
        partitions = self.partitions
        return [(tp, c.fetch_offset, c.max_bytes) for tp in self.active if (c := partitions.get(tp))]

    def leader_epochs(self) -> dict[TopicPartition, int]:
        """The leader epochs named for the partitions not resting (a resting one's epoch
        cannot change without waking it)."""
        partitions = self.partitions
        return {tp: c.leader_epoch for tp in self.active
                if (c := partitions.get(tp)) is not None and c.leader_epoch >= 0}

    def apply(self, changed: Iterable[tuple[TopicPartition, int, int]],
              forgotten: Iterable[TopicPartition],
              leader_epochs: dict[TopicPartition, int] | None = None) -> None:
        """An incremental request: partitions added or moved, and those to drop."""
        for tp in forgotten:
            self.partitions.pop(tp, None)
            self.active.pop(tp, None)
            self._stop_watching(tp)
        for tp, offset, max_bytes in changed:
            cached = self.partitions.get(tp)
            if cached is None:
                cached = self.partitions[tp] = CachedPartition(offset, max_bytes)
            else:
                cached.fetch_offset, cached.max_bytes = offset, max_bytes
            cached.leader_epoch = (leader_epochs or {}).get(tp, -1)
            self.active[tp] = None
            self._stop_watching(tp)

    # ---- resting partitions ---------------------------------------------------------

    def changed(self, tp: TopicPartition, appended: bool, hw_moved: bool) -> bool:
        """A watched partition changed (``Partition._notify``): it is looked at from the next
        read on, and a waiting fetch wakes if the change is one it waits for.  Returns
        whether it was resting until now (its follower's position counts up to here)."""
        was_resting = tp in self.watched and tp not in self.active
        if tp in self.partitions:
            self.active[tp] = None
        if appended if self.up_to_leo else hw_moved:
            wake, self.wake = self.wake, Event()
            wake.set()
        return was_resting

    def settle(self, partition_of: Callable[[TopicPartition], Any]) -> None:
        """After a fetch was answered: the partitions whose answer would now be the one just
        sent (:meth:`unchanged_answers`), and whose follower, for a follower's session, is in
        the ISR at that offset, rest until their Partition says they changed.  Runs without
        a pause for the loop, so no change falls between the test and the watch."""
        unchanged = self.unchanged_answers(partition_of, self.up_to_leo)
        replica_id = self.replica_id
        for tp in list(self.active):
            offset = self.partitions[tp].fetch_offset
            p = partition_of(tp)
            if unchanged(tp, offset) and (replica_id < 0 or p.follower_rests(replica_id, offset)):
                del self.active[tp]
                if self.watched.get(tp) is not p:
                    self._stop_watching(tp)
                    self.watched[tp] = p
                    p.resting_in.add(self)
            else:
                self._stop_watching(tp)

    def _stop_watching(self, tp: TopicPartition) -> None:
        p = self.watched.pop(tp, None)
        if p is not None:
            p.resting_in.discard(self)

    def unchanged_answers(self, partition_of: Callable[[TopicPartition], Any],
                          up_to_leo: bool) -> Callable[[TopicPartition, int], bool]:
        """A test of whether reading a partition from an offset now would give the answer
        last sent: this broker leads it, the reader is at its end (the LEO for a
        follower, else the HW), and the HW and log start are the ones the session
        holds.  :meth:`select` would leave that answer out, so it need not be read:
        an idle follower's fetch of thousands of partitions then reads none.
        (``partition_of`` gives the broker's Partition, or None.)"""
        cached_of = self.partitions.get

        def unchanged(tp: TopicPartition, fetch_offset: int) -> bool:
            cached, p = cached_of(tp), partition_of(tp)
            if cached is None or p is None or not p.is_leader:
                return False
            hw = p.high_watermark
            return (fetch_offset == (p.log.log_end_offset if up_to_leo else hw)
                    and hw == cached.high_watermark
                    and p.log.log_start_offset == cached.log_start_offset)
        return unchanged

    def select(self, entries: list[tuple[TopicPartition, dict]]) -> list[tuple[TopicPartition, dict]]:
        """The entries an incremental response carries; rotates those with records to the back."""
        chosen = []
        for tp, entry in entries:
            cached = self.partitions.get(tp)
            if cached is None or not cached.record_response(entry):
                continue
            chosen.append((tp, entry))
            if entry["records"]:
                self.partitions[tp] = self.partitions.pop(tp)
                if tp in self.active:
                    self.active[tp] = self.active.pop(tp)
        return chosen

    def remember(self, entries: list[tuple[TopicPartition, dict]]) -> None:
        """A full response: every partition's answer is the baseline for the next ones."""
        for tp, entry in entries:
            cached = self.partitions.get(tp)
            if cached is not None:
                cached.record_response(entry)


@dataclass(slots=True)
class FetchContext:
    """How one Fetch request is served: what to read, and how to shape the answer."""

    wanted: list[tuple[TopicPartition, int, int]]
    session: FetchSession | None = None      # set for an incremental fetch: the session fetched
    new_session: bool = False                # full fetch that opens a session if it can
    error: int = ErrorCode.NONE
    leader_epochs: dict[TopicPartition, int] = field(default_factory=dict)   # KIP-320, see above

    @property
    def incremental(self) -> bool:
        return self.session is not None


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, min_eviction_ms: int = 120_000,
                 rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.min_eviction_ms = min_eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._rng = rng or random.Random()

    def context(self, replica_id: int, session_id: int, epoch: int,
                requested: list[tuple[TopicPartition, int, int]], forgotten: list[TopicPartition],
                now_ms: int, leader_epochs: dict[TopicPartition, int] | None = None) -> FetchContext:
        """Resolve a v7+ request's session fields (see the module docstring)."""
        leader_epochs = leader_epochs or {}
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != NO_SESSION:
                self.sessions.pop(session_id, None)
            return FetchContext(requested, new_session=epoch == INITIAL_EPOCH,
                                leader_epochs=leader_epochs)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext([], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch or session.replica_id != replica_id:
            return FetchContext([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        # The epoch moves now, not at the response: a duplicate of this request
        # (a retry racing the original) is refused rather than served twice.
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        session.apply(requested, forgotten, leader_epochs)
        return FetchContext(session.wanted(), session=session, leader_epochs=session.leader_epochs())

    def open(self, context: FetchContext, replica_id: int, entries: list[tuple[TopicPartition, dict]],
             now_ms: int) -> int:
        """After a full fetch that asked for a session: create it if there is room; its id or 0."""
        if not self._make_room(replica_id >= 0, now_ms):
            return NO_SESSION
        session_id = self._new_id()
        session = FetchSession(session_id, replica_id, next_epoch(INITIAL_EPOCH), now_ms,
                               {tp: CachedPartition(offset, max_bytes,
                                                    leader_epoch=context.leader_epochs.get(tp, -1))
                                for tp, offset, max_bytes in context.wanted})
        session.remember(entries)
        self.sessions[session_id] = session
        return session_id

    def _make_room(self, for_follower: bool, now_ms: int) -> bool:
        if self.max_slots <= 0:
            return False
        if len(self.sessions) < self.max_slots:
            return True
        idle = [s for s in self.sessions.values()
                if now_ms - s.last_used_ms >= self.min_eviction_ms
                or (for_follower and not s.is_follower)]
        if not idle:
            return False
        victim = min(idle, key=lambda s: (s.is_follower, s.last_used_ms))
        del self.sessions[victim.session_id]
        return True

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _INT32_MAX)
            if session_id not in self.sessions:
                return session_id
