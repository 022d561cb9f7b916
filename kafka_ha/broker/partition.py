"""One partition's replica on this broker: role, ISR, high watermark, and its log.

As leader it appends produced batches, tracks each follower's fetch position,
advances the high watermark (``replication.py`` decides) and changes the ISR
through ``IsrWriter``.  As follower it only holds the log the fetcher appends
to and the high watermark the leader reports.  All of it runs on gevent
greenlets of one process, so state changes between two I/O points are atomic.
Its writes to the log (appends, truncations, a new leader epoch) go through
:meth:`_writing`: an I/O error there halts the broker (``storage_failure``)
before any other greenlet could serve or ack what the log holds.
"""
from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass
from typing import Callable

from gevent.event import Event
from gevent.lock import Semaphore

from kafka_ha import metrics
from kafka_ha.broker import replication, storage_failure
from kafka_ha.broker.producer_state_log import LogProducers
from kafka_ha.broker.replication import FollowerState
from kafka_ha.broker.storage_failure import Halt, HaltOnIOError
from kafka_ha.clock import monotonic_ms, now_ms
from kafka_ha.model import LeaderAndIsr, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.errors import ErrorCode, KafkaProtocolError
from kafka_ha.records.convert import needs_conversion, to_v2
from kafka_ha.state_change_log import StateChangeBatch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppendResult:
    first_offset: int
    last_offset: int
    truncations: int  # the partition's truncation count when the append happened
    log_append_time: int = -1   # Produce v2+'s log_append_time_ms: -1 for CreateTime topics


class Partition:
    def __init__(self, tp: TopicPartition, broker_id: int, log_: object,
                 min_isr: Callable[[], int], isr_writer: object,
                 halt: Halt = storage_failure.halt,
                 is_live: Callable[[int], bool] = lambda _broker: True,
                 defer_disk_work: Callable[[object], None] | None = None) -> None:
        self.tp = tp
        # Given the log when an append left its epoch checkpoint for the broker's
        # deferred pass (deferred_log_writes); None: appends write it themselves.
        self._defer_disk_work = defer_disk_work
        # Whether the controller's latest metadata lists a broker as live (registered).
        self._is_live = is_live
        self._halt = halt
        self.broker_id = broker_id
        self.log = log_
        # Idempotent producers' last batches in this log (producer_state_log).
        self.producers = LogProducers(log_, tp)
        self._min_isr = min_isr
        self._isr_writer = isr_writer
        self.leader = -1
        self.leader_epoch = -1
        self.leader_epoch_start_offset = 0
        self.zk_version = -1
        self.controller_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.high_watermark = 0
        self.truncations = 0
        self.followers: dict[int, FollowerState] = {}
        # Followers whose ISR expansion is being written: they count for the HW
        # already ("maximal ISR", KIP-497), so the HW cannot pass what they hold
        # while the write is in flight, and they then join an ISR whose
        # committed data they really have.
        self.joining: set[int] = set()
        self._unregistered_logged: set[int] = set()   # followers kept out, logged once each
        self._isr_lock = Semaphore()
        # Set and replaced when the LEO moves (what followers wait for) and when
        # the HW moves (consumers and acks=-1 producers); both on role changes
        # and truncation.  Two events, so that a follower's long poll does not
        # wake for every HW step and a consumer's for every append it cannot see.
        self._appended = Event()
        self._hw_moved = Event()
        # The fetch sessions this partition rests in (fetch_sessions), told of any change to
        # what they last answered.  Weak: a session closed or evicted leaves by itself.
        self.resting_in: weakref.WeakSet = weakref.WeakSet()
        # When this broker became leader (monotonic ms), until every ISR follower has
        # fetched from the new epoch's start: the first moment an acks=all write can
        # be acknowledged.  Logged once per leadership, to time failovers.
        self._awaiting_isr_since: int | None = None
        self.stopped = False
        # Set when ZooKeeper shows a newer leadership than ours (an ISR write's re-read):
        # until the controller's LeaderAndIsr comes, this broker no longer acts as leader.
        self._fenced = False

    # ---- role changes (LeaderAndIsr) -------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id and not self._fenced

    def fence(self, newer_epoch: int) -> None:
        """ZooKeeper holds a state of leader epoch ``newer_epoch`` (or another leader at
        ours): the controller has moved leadership on.  Stop appending, acknowledging and
        moving the HW now (a deposed leader's acknowledgements must never count), not
        when the LeaderAndIsr that says so arrives; that LeaderAndIsr lifts the fence."""
        if self.is_leader:
            log.warning("Partition %s on broker %d: ZooKeeper shows leader epoch %d, ours is %d; "
                        "no longer acting as leader until the controller's LeaderAndIsr arrives",
                        self.tp, self.broker_id, newer_epoch, self.leader_epoch)
            self._fenced = True
            self._notify()

    def make_leader(self, s: PartitionStateInfo, defer_checkpoint: bool = False) -> None:
        """Become leader: reset follower positions, remember the ZooKeeper version for ISR writes.

        ``defer_checkpoint``: the new epoch's leader-epoch checkpoint write is left to the
        caller's batch (:meth:`Log.write_pending_checkpoint`) or the log's next flush."""
        self._adopt(s)
        self.joining = set()
        self._unregistered_logged = set()
        leo = self.log.log_end_offset
        self.leader_epoch_start_offset = leo
        # The new epoch starts at our LEO (Kafka 2.1+), so OffsetsForLeaderEpoch
        # answers right even before anything is appended in it.
        with self._writing("becoming leader of"):
            self.log.assign_epoch_start_offset(s.leader_epoch, leo, defer_write=defer_checkpoint)
        self.followers = {r: FollowerState() for r in s.replicas if r != self.broker_id}
        # Followers are presumed caught up as of now, as Kafka does, so a
        # leader change does not shrink the ISR before anyone could fetch.
        t = now_ms()
        for r in s.isr:
            if r in self.followers:
                self.followers[r].last_caught_up_ms = t
        self._awaiting_isr_since = monotonic_ms()
        self._maybe_advance_hw()
        self._notify()

    def make_follower(self, s: PartitionStateInfo) -> None:
        self._adopt(s)
        self.followers = {}
        self._notify()

    def _adopt(self, s: PartitionStateInfo) -> None:
        self._fenced = self.stopped = False
        self.leader, self.leader_epoch = s.leader, s.leader_epoch
        self.zk_version, self.controller_epoch = s.zk_version, s.controller_epoch
        self.replicas, self.isr = tuple(s.replicas), tuple(s.isr)

    def stop(self) -> None:
        """StopReplica without delete: neither leading nor fetching until a LeaderAndIsr."""
        self.leader = -1
        self.stopped = True
        self._notify()

    def takes_epoch(self, leader_epoch: int) -> bool:
        """Whether a LeaderAndIsr of ``leader_epoch`` applies: a newer epoch, or this one
        again once stopped (a broker bounced right after its controlled shutdown gets the
        old process's queued StopReplica, then the bounce's LeaderAndIsr of the same epoch)."""
        return leader_epoch > self.leader_epoch or (self.stopped and leader_epoch == self.leader_epoch)

    # ---- leader: produce ---------------------------------------------------

    def append_as_leader(self, records: bytes | memoryview, acks: int) -> AppendResult:
        if not self.is_leader:
            raise KafkaProtocolError(ErrorCode.NOT_LEADER_FOR_PARTITION)
        if needs_conversion(records):
            records = to_v2(records)
        # May pause for the event loop (building the producer state): the role is checked after.
        decision, batches = self.producers.check(records)
        if not self.is_leader:
            raise KafkaProtocolError(ErrorCode.NOT_LEADER_FOR_PARTITION)
        min_isr = self._min_isr()
        if acks == -1 and len(self.isr) < min_isr:
            raise KafkaProtocolError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                     f"ISR {list(self.isr)} is smaller than min.insync.replicas "
                                     f"{min_isr}")
        if decision.error != ErrorCode.NONE:
            raise KafkaProtocolError(decision.error, decision.message)
        if decision.duplicate is not None:
            # A producer's retry of a batch this log holds: answered with where it is.
            return AppendResult(decision.duplicate.first_offset, decision.duplicate.last_offset,
                                self.truncations)
        with self._writing("appending to"):
            info = self.log.append_as_leader(records, self.leader_epoch)
        self.producers.appended(batches, info.first_offset)
        self._notify(appended=True, hw_moved=self._maybe_advance_hw())
        return AppendResult(info.first_offset, info.last_offset, self.truncations, info.log_append_time)

    def wait_for_acks(self, appended: AppendResult, timeout_s: float) -> int:
        """acks=-1: wait until the HW passes the appended offsets; returns an error code.

        The wait wakes whenever the HW or the ISR changes (``set_isr`` notifies), so a
        shrink below min.insync.replicas is answered at once.

        If the log was truncated meanwhile (this broker followed another leader
        for a moment, even if it leads again now), the offsets may hold other
        data: the append is not acknowledged.
        """
        required_offset = appended.last_offset
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.is_leader or self.truncations != appended.truncations:
                return ErrorCode.NOT_LEADER_FOR_PARTITION
            answer = replication.acks_all_answer(self.high_watermark, required_offset, len(self.isr),
                                                 self._min_isr())
            if answer is not None:
                return answer
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            self._hw_moved.wait(remaining)

    # ---- follower ----------------------------------------------------------

    def append_as_follower(self, records) -> None:
        """Append what the leader sent (the replica fetcher)."""
        defer = self._defer_disk_work is not None
        with self._writing("appending to"):
            self.log.append_as_follower(records, defer_epoch_checkpoint=defer)
        if defer and self.log.disk_work_pending:
            self._defer_disk_work(self.log)
        self.producers.appended_as_follower(records)

    # ---- leader: follower fetches ------------------------------------------

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now: int,
                          lines: StateChangeBatch | None = None) -> None:
        """A follower fetched from ``fetch_offset`` (its LEO) at ``now`` (ms). May advance the HW or grow the ISR.

        A fetch outside the log (answered OFFSET_OUT_OF_RANGE) changes nothing.  ``lines``
        collects the INFO line of a confirmed epoch start, for the fetch to log all at once.
        """
        follower = self.followers.get(replica_id)
        if follower is None or not self.is_leader:
            return
        before = follower.log_end_offset
        if not replication.on_follower_fetch(follower, fetch_offset, self.log.log_end_offset, now,
                                             self.log.log_start_offset):
            return
        # Only a follower that moved can raise the HW or complete the epoch start: an
        # append, an ISR change, a join that ended and a min.insync.replicas change check
        # on their own (Kafka 3's updateFollowerFetchState skips the HW the same way).  An
        # idle fetch of 3,334 partitions cost 42 ms, most of it recomputing HWs.
        moved = fetch_offset != before
        if moved:
            self._check_epoch_start_reached(lines)
        if replica_id not in self.isr and replica_id not in self.joining and replication.may_join_isr(
                follower, self.high_watermark, self.leader_epoch_start_offset) and self._may_join(replica_id):
            self.joining.add(replica_id)
            epoch = self.leader_epoch
            self._isr_writer.spawn_change(self, self.isr + (replica_id,),
                                          f"follower {replica_id} caught up to offset {fetch_offset}",
                                          on_done=lambda: self._join_written(replica_id, epoch))
        # The HW never passes the LEO, so a fully replicated partition has nothing to recompute.
        if moved and self.high_watermark < self.log.log_end_offset and self._maybe_advance_hw():
            self._notify(appended=False)

    def _check_epoch_start_reached(self, lines: StateChangeBatch | None = None) -> None:
        if self._awaiting_isr_since is not None and replication.isr_reached(
                self.isr, self.broker_id, self.followers, self.leader_epoch_start_offset):
            line = (f"Partition {self.tp} on broker {self.broker_id}: every ISR follower reached the "
                    f"start offset {self.leader_epoch_start_offset} of leader epoch {self.leader_epoch}, "
                    f"{monotonic_ms() - self._awaiting_isr_since} ms after becoming leader")
            if lines is not None:
                lines.info(line)
            else:
                log.info("%s", line)
            self._awaiting_isr_since = None

    def on_config_change(self) -> None:
        """The topic's or the broker's config changed: min.insync.replicas may now let the HW
        pass what the ISR already holds (no follower fetch would move to recompute it)."""
        if self.is_leader and self._maybe_advance_hw():
            self._notify(appended=False)

    def on_follower_log_start(self, replica_id: int, log_start_offset: int) -> None:
        """A follower's fetch reported its log start (Fetch v5+)."""
        follower = self.followers.get(replica_id)
        if follower is not None and log_start_offset >= 0:
            follower.log_start_offset = log_start_offset

    @property
    def low_watermark(self) -> int:
        """The lowest log start of the leader and its live followers (Kafka's
        lowWatermarkIfLeader): records below it are gone from every live replica."""
        starts = [self.log.log_start_offset] + [
            max(f.log_start_offset, 0) for b, f in self.followers.items() if self._is_live(b)]
        return min(starts)

    def _join_written(self, replica_id: int, leader_epoch: int) -> None:
        """An ISR expansion written (or not) for ``leader_epoch`` is over.  Once a newer
        epoch began, ``joining`` is that epoch's: a follower may be joining it with a
        write still in flight, and must keep counting for the HW until that one ends."""
        if leader_epoch == self.leader_epoch:
            self.joining.discard(replica_id)
            if self.is_leader and self._maybe_advance_hw():   # it may have held the HW back
                self._notify(appended=False)

    def _may_join(self, replica_id: int) -> bool:
        """A caught-up follower joins the ISR only while it is registered.

        One whose ZooKeeper session expired (or whose registration an operator
        deleted) still fetches, but the controller has taken it out of the ISR
        and treats it as dead: re-adding it would count a replica no election
        may pick towards acks=all, and undo the controller's decision behind
        its back (a zombie fetcher, KAFKA-6880; Kafka 3.3's KIP-841 refuses
        such ISR expansions too).  It joins once it has registered again and
        the controller's UpdateMetadata says so.
        """
        if self._is_live(replica_id):
            self._unregistered_logged.discard(replica_id)
            return True
        if replica_id not in self._unregistered_logged:
            self._unregistered_logged.add(replica_id)
            log.info("Partition %s on broker %d: follower %d is caught up but not registered "
                     "(not live in the controller's metadata); it stays out of the ISR",
                     self.tp, self.broker_id, replica_id)
        return False

    def follower_rests(self, replica_id: int, fetch_offset: int) -> bool:
        """Whether a follower at ``fetch_offset`` may rest here (fetch_sessions): in the ISR, not
        joining it (the fetches of one outside must test whether it may join), at that offset."""
        follower = self.followers.get(replica_id)
        return (follower is not None and follower.log_end_offset == fetch_offset
                and replica_id in self.isr and replica_id not in self.joining)

    def _count_resting_fetches(self, session) -> None:
        """Record the latest fetch of ``session`` as its follower's, at its position (our LEO)."""
        follower = self.followers.get(session.replica_id)
        if follower is not None:
            replication.on_follower_fetch(follower, follower.log_end_offset, follower.log_end_offset,
                                          session.last_used_ms, self.log.log_start_offset)

    def shrink_isr_if_lagging(self, lag_time_max_ms: int) -> None:
        if not self.is_leader:
            return
        lagging = replication.out_of_sync_followers(self.isr, self.broker_id, self.followers,
                                                    now := now_ms(), lag_time_max_ms)
        if lagging and self.resting_in:   # only then: their resting fetches may still count
            for session in [s for s in self.resting_in if self.tp not in s.active]:
                self._count_resting_fetches(session)
            lagging = replication.out_of_sync_followers(self.isr, self.broker_id, self.followers,
                                                        now, lag_time_max_ms)
        if lagging:
            self._isr_writer.remove(self, lagging, f"followers {lagging} fell more than "
                                                   f"{lag_time_max_ms} ms behind")

    def set_isr(self, isr: tuple[int, ...], zk_version: int, leader_epoch: int | None = None) -> bool:
        """Adopt an ISR this leader wrote to ZooKeeper at ``leader_epoch``; returns whether it did.

        A write answered after a LeaderAndIsr of a newer epoch (or overtaken by a
        newer version) belongs to a leadership that is over: the ISR this partition
        acts on is the one of its current epoch, with that epoch's zkVersion.
        """
        if (leader_epoch is not None and leader_epoch != self.leader_epoch) or zk_version <= self.zk_version:
            return False
        metrics.isr_changed(self.isr, isr)
        self.isr, self.zk_version = isr, zk_version
        self._maybe_advance_hw()
        self._check_epoch_start_reached()   # a shrink may leave only followers that reached it
        self._notify()
        return True

    def isr_lock(self) -> Semaphore:
        return self._isr_lock

    def state_for_zk(self, isr: tuple[int, ...]) -> LeaderAndIsr:
        return LeaderAndIsr(self.broker_id, self.leader_epoch, isr, self.controller_epoch,
                            self.zk_version)

    # ---- high watermark ------------------------------------------------------

    def latest_offset_known(self) -> bool:
        """Whether the HW can be answered as the latest offset (ListOffsets); see replication."""
        return replication.latest_offset_known(self.high_watermark, self.leader_epoch_start_offset,
                                               len(self.isr), self._min_isr())

    def _maybe_advance_hw(self) -> bool:
        maximal_isr = self.isr + tuple(r for r in self.joining if r not in self.isr)
        new = replication.new_high_watermark(self.high_watermark, self.log.log_end_offset, maximal_isr,
                                             self.broker_id, self.followers, self._min_isr())
        if new != self.high_watermark:
            self.high_watermark = new
            return True
        return False

    def set_follower_high_watermark(self, leader_hw: int) -> None:
        """A follower's HW: the leader's, capped by what it has (never past its own LEO)."""
        new = min(leader_hw, self.log.log_end_offset)
        if new > self.high_watermark:
            self.high_watermark = new
            self._notify(appended=False)

    def maybe_increment_log_start_offset(self, leader_log_start: int) -> None:
        """A follower's log start follows the leader's (Fetch v5+), never past its own HW."""
        with self._writing("moving the log start of"):
            if self.log.maybe_increment_log_start_offset(min(leader_log_start, self.high_watermark)):
                self.log_start_moved()

    def log_start_moved(self) -> None:
        """The log start moved (DeleteRecords, retention): a fetch answers it, none waits for it."""
        self._notify(appended=False, hw_moved=False)

    def restore_high_watermark(self, hw: int) -> None:
        """From the checkpoint at start-up, capped by the recovered log."""
        self.high_watermark = max(self.log.log_start_offset, min(hw, self.log.log_end_offset))

    # ---- waiting ---------------------------------------------------------

    def _notify(self, appended: bool = True, hw_moved: bool = True) -> None:
        """What a fetch answers changed: wake who waits for it, tell the sessions it rests in."""
        if self.resting_in:
            for session in list(self.resting_in):
                if session.changed(self.tp, appended, hw_moved):
                    self._count_resting_fetches(session)
        if appended:
            event, self._appended = self._appended, Event()
            event.set()
        if hw_moved:
            event, self._hw_moved = self._hw_moved, Event()
            event.set()

    def changed_event(self, up_to_leo: bool) -> Event:
        """What a fetch waits on: new data below the LEO (followers) or below the HW."""
        return self._appended if up_to_leo else self._hw_moved

    def truncate_to(self, offset: int) -> None:
        self.truncations += 1
        with self._writing("truncating"):
            cut = self.log.truncate_to(offset)
        if cut:   # else no producer snapshot can lie beyond the log end, which did not move
            self.producers.truncated(self.log.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self._notify()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.truncations += 1
        with self._writing("truncating"):
            self.log.truncate_fully_and_start_at(offset)
        self.producers.truncated(self.log.log_end_offset, fully=True)
        self.high_watermark = offset
        self._notify()

    def _writing(self, action: str) -> HaltOnIOError:
        """Guards a write to the log: an OSError in it halts the broker."""
        return HaltOnIOError(self._halt, action, self.tp, self.log.dir)
