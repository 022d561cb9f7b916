"""Followers fetching from leaders: one fetcher greenlet per source broker.

Before a partition is fetched after a leadership change, the follower asks the
leader where its own latest leader epoch ends (OffsetsForLeaderEpoch, KIP-101
and KIP-279) and truncates there; it never truncates to its possibly stale
high watermark.  Then it fetches from its log end offset, many partitions per
request, and appends what it gets as the leader wrote it.
"""
from __future__ import annotations

import logging
from typing import Callable

import gevent
from gevent.event import Event

from kafka_ha.broker.fetch_session_handler import FetchSessionHandler
from kafka_ha.model import BrokerEndpoint, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode, error_name

log = logging.getLogger(__name__)

FETCH_VERSION = 7   # with incremental fetch sessions (KIP-227)
EPOCH_VERSION = 1
BACKOFF_S = 0.5


class ReplicaFetcher:
    def __init__(self, broker_id: int, source: BrokerEndpoint, partition_of: Callable,
                 max_wait_ms: int, min_bytes: int, max_bytes: int, timeout_s: float) -> None:
        self.broker_id = broker_id
        self.source = source
        self._partition_of = partition_of
        self._max_wait_ms, self._min_bytes, self._max_bytes = max_wait_ms, min_bytes, max_bytes
        self._timeout_s = timeout_s
        self.needs_truncation: set[TopicPartition] = set()
        self.fetching: set[TopicPartition] = set()
        self._conn: BrokerConnection | None = None
        self._session = FetchSessionHandler()
        self._wakeup = Event()
        self._greenlet = gevent.spawn(self._run)

    def add(self, tps: set[TopicPartition]) -> None:
        self.fetching -= tps
        self.needs_truncation |= tps
        self._wakeup.set()

    def remove(self, tps: set[TopicPartition]) -> None:
        self.fetching -= tps
        self.needs_truncation -= tps

    @property
    def idle(self) -> bool:
        return not (self.fetching or self.needs_truncation)

    def stop(self) -> None:
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
            except (OSError, ValueError) as e:
                log.warning("Broker %d: fetch from broker %d at %s:%d failed: %s", self.broker_id,
                            self.source.broker_id, self.source.host, self.source.port, e)
                self._close()
                gevent.sleep(BACKOFF_S)

    def _request(self, api_key: int, version: int, body: dict) -> dict:
        if self._conn is None:
            self._conn = BrokerConnection(self.source.host, self.source.port,
                                          f"replica-fetcher-{self.broker_id}", self._timeout_s)
        return self._conn.request(api_key, version, body)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ---- truncation by leader epoch -------------------------------------

    def _truncate(self, tps: set[TopicPartition]) -> None:
        by_topic: dict[str, list[dict]] = {}
        partitions = {}
        for tp in tps:
            p = self._partition_of(tp)
            if p is None:
                self.needs_truncation.discard(tp)
                continue
            partitions[tp] = p
            by_topic.setdefault(tp.topic, []).append(
                {"partition": tp.partition, "leader_epoch": p.log.latest_epoch()})
        if not by_topic:
            return
        response = self._request(ApiKey.OFFSETS_FOR_LEADER_EPOCH, EPOCH_VERSION, {"topics": [
            {"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
        for topic in response["topics"]:
            for entry in topic["partitions"]:
                tp = TopicPartition(topic["topic"], entry["partition"])
                p = partitions.get(tp)
                if p is None or tp not in self.needs_truncation:
                    continue  # removed meanwhile
                if entry["error_code"] != ErrorCode.NONE:
                    continue  # the leader is not ready yet; ask again
                self._truncate_one(p, entry["leader_epoch"], entry["end_offset"])
                self.needs_truncation.discard(tp)
                self.fetching.add(tp)
        if self.needs_truncation:
            gevent.sleep(BACKOFF_S / 5)

    def _truncate_one(self, p, leader_epoch: int, leader_end: int) -> None:
        leo = p.log.log_end_offset
        local_epoch = p.log.latest_epoch()
        if local_epoch < 0 or leader_epoch < 0 or leader_end < 0:
            # No epoch to compare (our log has none, or the leader knows none
            # up to ours): Kafka's fallback, truncate to our high watermark.
            # Never lower: a follower in the ISR must keep what is committed.
            target = min(leo, max(p.high_watermark, p.log.log_start_offset))
        elif leader_epoch != local_epoch:
            # KIP-279: the logs agree up to the end of the largest epoch both know.
            _, local_end = p.log.end_offset_for_epoch(leader_epoch)
            target = min(leader_end, leo) if local_end < 0 else min(leader_end, local_end, leo)
        else:
            target = min(leader_end, leo)
        if target < leo:
            log.info("Partition %s on broker %d: truncating from offset %d to %d (leader %d answered "
                     "epoch %d ends at %d)", p.tp, self.broker_id, leo, target, self.source.broker_id,
                     leader_epoch, leader_end)
            p.truncate_to(target)

    # ---- fetching -------------------------------------------------------

    def _fetch(self) -> None:
        wanted, partitions = {}, {}
        for tp in sorted(self.fetching):
            p = self._partition_of(tp)
            if p is None:
                self.fetching.discard(tp)
                continue
            wanted[tp], partitions[tp] = (p.log.log_end_offset, self._max_bytes), p
        if not wanted:
            return
        session_id, epoch, changed, forgotten = self._session.build(wanted)
        by_topic: dict[str, list[dict]] = {}
        for tp, (offset, max_bytes) in changed:
            by_topic.setdefault(tp.topic, []).append(
                {"partition": tp.partition, "fetch_offset": offset,
                 "log_start_offset": partitions[tp].log.log_start_offset, "partition_max_bytes": max_bytes})
        forgotten_by_topic: dict[str, list[int]] = {}
        for tp in forgotten:
            forgotten_by_topic.setdefault(tp.topic, []).append(tp.partition)
        try:
            response = self._request(ApiKey.FETCH, FETCH_VERSION, {
                "replica_id": self.broker_id, "max_wait_ms": self._max_wait_ms,
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
        for topic in response["responses"]:
            for entry in topic["partitions"]:
                tp = TopicPartition(topic["topic"], entry["partition_index"])
                p = self._partition_of(tp)
                if p is None or tp not in self.fetching:
                    continue
                backoff |= self._apply_fetched(p, entry)
        if backoff:
            gevent.sleep(BACKOFF_S)

    def _apply_fetched(self, p, entry: dict) -> bool:
        error = entry["error_code"]
        if error == ErrorCode.NONE:
            records = entry["records"]
            if records:
                p.append_as_follower(records)
            p.set_follower_high_watermark(entry["high_watermark"])
            p.maybe_increment_log_start_offset(entry["log_start_offset"])
            return False
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._handle_out_of_range(p)
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
