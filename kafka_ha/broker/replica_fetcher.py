"""Followers fetching from leaders: one fetcher greenlet per source broker.

Before a partition is fetched after a leadership change, the follower asks the
leader where its own latest leader epoch ends (OffsetsForLeaderEpoch, KIP-101
and KIP-279) and truncates there, epoch by epoch until both hold the epoch the
leader answers with (``truncation.py`` decides); it never truncates to its
possibly stale high watermark while there are epochs to compare.  Then it
fetches from its log end offset, many partitions per request, and appends what
it gets as the leader wrote it.

Data of one partition that cannot be appended (corrupt, or not continuing the
log) marks that partition failed, as Kafka does since KIP-461: it is no longer
fetched, the others go on, and the next LeaderAndIsr for it tries again.
"""
from __future__ import annotations

import logging
from typing import Callable

import gevent
from gevent.event import Event

from kafka_ha.cooperative import yielding
from kafka_ha.broker.fetch_session_handler import FetchSessionHandler
from kafka_ha.broker.truncation import decide_truncation
from kafka_ha.model import BrokerEndpoint, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode, error_name
from kafka_ha.state_change_log import StateChangeBatch

log = logging.getLogger(__name__)

FETCH_VERSION = 9   # incremental fetch sessions (KIP-227, v7), leader-epoch fencing (KIP-320, v9)
EPOCH_VERSION = 2   # names the follower's current leader epoch too (KIP-320)
BACKOFF_S = 0.5
THROTTLED_BACKOFF_S = 0.1   # a fetch with every partition throttled waits this long


class ReplicaFetcher:
    def __init__(self, broker_id: int, source: BrokerEndpoint, partition_of: Callable,
                 max_wait_ms: int, min_bytes: int, max_bytes: int, timeout_s: float,
                 failed_partitions: set[TopicPartition] | None = None, quota=None) -> None:
        self.broker_id = broker_id
        # The follower's replication quota (replication_quota.ReplicationQuota), or None;
        # and each partition's high watermark at the leader, as last answered: a
        # partition whose log has reached it is caught up, and never throttled.
        self._quota = quota
        self._leader_hw: dict[TopicPartition, int] = {}
        self.source = source
        self._partition_of = partition_of
        self._max_wait_ms, self._min_bytes, self._max_bytes = max_wait_ms, min_bytes, max_bytes
        self._timeout_s = timeout_s
        self.needs_truncation: set[TopicPartition] = set()
        self.fetching: set[TopicPartition] = set()
        # Partitions this broker stopped fetching after an error of their own.  The
        # ReplicaManager passes one set to all its fetchers, so the count survives
        # a fetcher that is retired once it has nothing left to fetch.
        self.failed_partitions = set() if failed_partitions is None else failed_partitions
        self._conn: BrokerConnection | None = None
        self._session = FetchSessionHandler()
        # The fetched partitions' positions as last computed, and those to compute again
        # before the next request (_current_positions).
        self._positions: dict[TopicPartition, tuple[int, int, int, int]] = {}
        self._moved: set[TopicPartition] = set()
        self._wakeup = Event()
        self._lines = StateChangeBatch(log)   # the round's per-partition INFO lines
        self._greenlet = gevent.spawn(self._run)

    def add(self, tps: set[TopicPartition]) -> None:
        self.fetching -= tps
        self.needs_truncation |= tps
        self._moved |= tps              # a new leader epoch, maybe a new Partition
        self.failed_partitions.difference_update(tps)   # a new leader epoch: try again
        self._wakeup.set()

    def fetch_on(self, tp: TopicPartition) -> bool:
        """``tp`` stays where it is, in a new leader epoch of the same leader
        (``truncation.fetches_on``): its next fetch names the new epoch.  False if this
        fetcher does not have it."""
        if tp not in self.fetching and tp not in self.needs_truncation:
            return False
        self._moved.add(tp)
        self._wakeup.set()
        return True

    def remove(self, tps: set[TopicPartition]) -> None:
        self.fetching -= tps
        self.needs_truncation -= tps
        for tp in tps:
            self._leader_hw.pop(tp, None)

    @property
    def idle(self) -> bool:
        return not (self.fetching or self.needs_truncation)

    def stop(self) -> None:
        # The kill lands at the greenlet's next switch, and it may first return from a
        # request and go on: with nothing left to fetch, it touches no partition then.
        self.fetching.clear()
        self.needs_truncation.clear()
        self._greenlet.kill(block=False)
        self._close()

    def _run(self) -> None:
        while True:
            if self.idle:
                self._wakeup.clear()
                self._wakeup.wait()
                continue
            try:
                if self.needs_truncation:
                    self._truncate(set(self.needs_truncation))
                if self.fetching:
                    self._fetch()
                self._lines.emit()
            except (OSError, ValueError) as e:
                self._lines.emit()
                log.warning("Broker %d: fetch from broker %d at %s:%d failed: %s", self.broker_id,
                            self.source.broker_id, self.source.host, self.source.port, e)
                self._close()
                gevent.sleep(BACKOFF_S)
            except Exception:   # a bug must not end replication from this leader for good
                log.exception("Broker %d: fetcher for broker %d failed unexpectedly; starting over",
                              self.broker_id, self.source.broker_id)
                self._close()
                gevent.sleep(BACKOFF_S)

    def _request(self, api_key: int, version: int, body: dict) -> dict:
        if self._conn is None:
            self._conn = BrokerConnection(self.source.host, self.source.port,
                                          f"replica-fetcher-{self.broker_id}", self._timeout_s)
        return self._conn.request(api_key, version, body)

    def _mark_failed(self, p, offset: int, error: Exception) -> None:
        """Stop fetching one partition whose data this broker cannot take (Kafka's
        "marked as failed"); the others from this leader go on."""
        self.fetching.discard(p.tp)
        self.needs_truncation.discard(p.tp)
        self.failed_partitions.add(p.tp)
        log.error("Broker %d: unexpected error occurred while processing data for partition %s at "
                  "offset %d from leader %d: %s: %s. Partition %s marked as failed", self.broker_id,
                  p.tp, offset, self.source.broker_id, type(error).__name__, error, p.tp)

    def _fence(self, p) -> None:
        """The leader is in a newer epoch than this follower's (KIP-320): this broker missed
        a LeaderAndIsr.  Fetching on would let the leader count a log that never
        truncated to the new epoch's start; the partition waits, out of this fetcher,
        for the LeaderAndIsr that brings the new epoch (and a new truncation round)."""
        self.fetching.discard(p.tp)
        self.needs_truncation.discard(p.tp)
        # Logged with the round's others (a failover fences thousands in one answer).
        self._lines.info(f"Broker {self.broker_id}: partition {p.tp} is fenced by leader "
                         f"{self.source.broker_id} (our leader epoch {p.leader_epoch} is old); "
                         f"waiting for the LeaderAndIsr of its new epoch")

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ---- truncation by leader epoch -------------------------------------

    def _truncate(self, tps: set[TopicPartition]) -> None:
        by_topic: dict[str, list[dict]] = {}
        partitions = {}
        asked_in: dict[TopicPartition, int] = {}
        for tp in tps:
            p = self._partition_of(tp)
            if p is None:
                self.needs_truncation.discard(tp)
                continue
            partitions[tp] = p
            asked_in[tp] = p.leader_epoch
            by_topic.setdefault(tp.topic, []).append(
                {"partition": tp.partition, "current_leader_epoch": p.leader_epoch,
                 "leader_epoch": p.log.latest_epoch()})
        if not by_topic:
            return
        response = self._request(ApiKey.OFFSETS_FOR_LEADER_EPOCH, EPOCH_VERSION, {"topics": [
            {"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
        not_ready = False
        done = 0
        for topic, entry in yielding((t, e) for t in response["topics"] for e in t["partitions"]):
            tp = TopicPartition(topic["topic"], entry["partition"])
            p = partitions.get(tp)
            if p is None or tp not in self.needs_truncation:
                continue  # removed meanwhile (also during a pause of this loop)
            if entry["error_code"] == ErrorCode.FENCED_LEADER_EPOCH:
                # Only if still in the epoch it asked in: a LeaderAndIsr of a newer epoch
                # may have come while the request was out (it asks again, in that epoch).
                if p.leader_epoch == asked_in[tp]:
                    self._fence(p)
                continue
            if entry["error_code"] != ErrorCode.NONE:
                not_ready = True  # the leader is not ready yet; ask again
                continue
            try:
                complete = self._truncate_one(p, entry["leader_epoch"], entry["end_offset"])
            except ValueError as e:   # a nonsensical answer for this partition alone
                self._mark_failed(p, p.log.log_end_offset, e)
                continue
            if complete:
                self.needs_truncation.discard(tp)
                self.fetching.add(tp)
                self._moved.add(tp)
                done += 1
            # else: it stays in needs_truncation and asks again with its new latest epoch
        log.info("Broker %d: truncation by leader epoch done for %d partition(s) of leader %d, "
                 "%d still to ask", self.broker_id, done, self.source.broker_id, len(self.needs_truncation))
        if not_ready:
            gevent.sleep(BACKOFF_S / 5)

    def _truncate_one(self, p, leader_epoch: int, leader_end: int) -> bool:
        """One round for one partition; True when truncation is complete."""
        leo = p.log.log_end_offset
        ours = p.log.end_offset_for_epoch(leader_epoch) if leader_epoch >= 0 else (-1, -1)
        decision = decide_truncation(leader_epoch, leader_end, ours, leo, p.high_watermark,
                                     p.log.log_start_offset)
        if decision.offset < leo:
            log.info("Partition %s on broker %d: truncating from offset %d to %d (leader %d answered "
                     "epoch %d ends at %d%s)", p.tp, self.broker_id, leo, decision.offset,
                     self.source.broker_id, leader_epoch, leader_end,
                     "" if decision.complete else f"; our epoch {ours[0]} ends at {ours[1]}, asking again")
        # Also when nothing is cut: an epoch of ours that starts at our LEO (one we led
        # without appending) must go, or the next round would ask for it again, and the
        # leader's smaller epochs appended after it would not be recorded.
        p.truncate_to(decision.offset)
        return decision.complete

    # ---- fetching -------------------------------------------------------

    def positions_changed(self, tps: set[TopicPartition]) -> None:
        """Something other than this fetcher moved these partitions' positions (retention
        moved a log start): the next request computes them again."""
        self._moved |= tps

    def _current_positions(self) -> dict[TopicPartition, tuple[int, int, int, int]]:
        """Each fetched partition's position: (LEO, max bytes, leader epoch, log start).

        The leader epoch is part of it: a new one is sent even in an incremental fetch, so
        the leader checks the current one (KIP-320).  So is the log start: the leader's
        DeleteRecords waits to see it move (KIP-107).  A position is computed again only
        where it may have moved: a partition this fetcher started fetching (after its
        truncation), one the leader's last answer named (records, HW, log start, an error),
        or one it was told of (:meth:`positions_changed`).  Nothing else moves a followed
        log; computing all 6,666 of a follower's positions for each idle fetch took two
        thirds of its idle CPU."""
        positions, fetching = self._positions, self.fetching
        for tp in positions.keys() - fetching:
            del positions[tp]
        moved, self._moved = self._moved | (fetching - positions.keys()), set()
        max_bytes, partition_of = self._max_bytes, self._partition_of
        for tp in moved:
            if tp not in fetching:
                continue
            p = partition_of(tp)
            if p is None:
                fetching.discard(tp)
                positions.pop(tp, None)
                continue
            positions[tp] = (p.log.log_end_offset, max_bytes, p.leader_epoch, p.log.log_start_offset)
        return positions

    def _fetch(self) -> None:
        wanted = self._current_positions()
        throttled = 0
        # The quota, which only holds partitions back while its rate is over the bound,
        # is asked once per round first.
        quota = self._quota if self._quota is not None and self._quota.exceeded() else None
        if quota is not None:
            wanted, leader_hw = {}, self._leader_hw
            for tp, position in self._positions.items():
                if quota.should_throttle(tp, in_sync=position[0] >= leader_hw.get(tp, 1 << 63)):
                    throttled += 1   # KIP-73: left out of this request while over the rate
                    continue
                wanted[tp] = position
        # Not sorted here: 6,666 partitions took 3.4 ms to sort, each round; only the few
        # an incremental request carries are (below), for a stable request.
        if not wanted:
            if throttled:
                gevent.sleep(THROTTLED_BACKOFF_S)   # until the rate has room again
            return
        session_id, epoch, changed, forgotten = self._session.build(wanted)
        by_topic: dict[str, list[dict]] = {}
        for tp, (offset, max_bytes, leader_epoch, log_start) in sorted(changed):
            by_topic.setdefault(tp.topic, []).append(
                {"partition": tp.partition, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
                 "log_start_offset": log_start, "partition_max_bytes": max_bytes})
        forgotten_by_topic: dict[str, list[int]] = {}
        for tp in forgotten:
            forgotten_by_topic.setdefault(tp.topic, []).append(tp.partition)
        try:
            response = self._request(ApiKey.FETCH, FETCH_VERSION, {
                # No long poll while partitions wait to ask again for their truncation
                # (a leader not ready yet): the next round must not wait for it.
                "replica_id": self.broker_id,
                "max_wait_ms": 0 if self.needs_truncation else self._max_wait_ms,
                "min_bytes": self._min_bytes, "max_bytes": self._max_bytes * 16, "isolation_level": 0,
                "session_id": session_id, "session_epoch": epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": ps}
                                          for t, ps in forgotten_by_topic.items()]})
        except BaseException:
            self._session.handle_failure()   # served or not, we cannot tell
            raise
        if not self._session.handle_response(response["error_code"], response["session_id"]):
            log.info("Broker %d: fetch session with broker %d lost (%s); starting a new one",
                     self.broker_id, self.source.broker_id, error_name(response["error_code"]))
            return
        backoff = False
        # In slices: after each pause, a partition may have left (the checks below).
        for topic, entry in yielding((t, e) for t in response["responses"] for e in t["partitions"]):
            tp = TopicPartition(topic["topic"], entry["partition_index"])
            if tp not in self.fetching:
                continue
            p = self._partition_of(tp)
            if p is None:                 # no replica here any more
                self.fetching.discard(tp)
                continue
            self._moved.add(tp)
            backoff |= self._apply_fetched(p, entry)
        if backoff:
            # A leader that has not taken its LeaderAndIsr yet answers NOT_LEADER; it
            # usually has within milliseconds, and every partition of this fetcher
            # waits out this pause, so it is short (as the truncation round's).
            gevent.sleep(BACKOFF_S / 5)

    def _apply_fetched(self, p, entry: dict) -> bool:
        error = entry["error_code"]
        if error == ErrorCode.NONE:
            offset = p.log.log_end_offset
            try:
                records = entry["records"]
                if records:
                    p.append_as_follower(records)
                    if self._quota is not None and self._quota.is_throttled(p.tp):
                        self._quota.record(len(records))
                self._leader_hw[p.tp] = entry["high_watermark"]
                p.set_follower_high_watermark(entry["high_watermark"])
                p.maybe_increment_log_start_offset(entry["log_start_offset"])
            except ValueError as e:   # RecordsError among them: this partition's data alone
                self._mark_failed(p, offset, e)
            return False
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._handle_out_of_range(p)
            return False
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            sent = self._positions.get(p.tp)     # (LEO, max bytes, leader epoch, log start)
            if sent is not None and p.leader_epoch > sent[2]:
                return False   # it fetched on into a newer epoch meanwhile: asks again in it
            self._fence(p)
            return False
        # NOT_LEADER / UNKNOWN_TOPIC: the controller's LeaderAndIsr is on its way.
        return True

    def _handle_out_of_range(self, p) -> None:
        """Our LEO is outside the leader's log: below its start (retention) -> start over there."""
        response = self._request(ApiKey.LIST_OFFSETS, 1, {"replica_id": self.broker_id, "topics": [
            {"name": p.tp.topic, "partitions": [{"partition_index": p.tp.partition,
                                                 "timestamp": -2}]}]})
        part = response["topics"][0]["partitions"][0]
        if part["error_code"] != ErrorCode.NONE:
            return
        leader_start = part["offset"]
        if p.log.log_end_offset < leader_start:
            log.info("Partition %s on broker %d: LEO %d is below the leader's log start %d; "
                     "starting over there", p.tp, self.broker_id, p.log.log_end_offset, leader_start)
            p.truncate_fully_and_start_at(leader_start)
        else:
            # Above the leader's LEO: only possible if truncation was skipped; redo it.
            self.fetching.discard(p.tp)
            self.needs_truncation.add(p.tp)
