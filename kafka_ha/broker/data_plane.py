"""Produce, Fetch, ListOffsets and OffsetsForLeaderEpoch against this broker's partitions.

Record data stays opaque here: produce hands the bytes to the leader's log,
fetch returns byte ranges of the log.  acks=-1 produce requests and fetches
that want more bytes than are there wait on the partitions' change events
(the "purgatory" of Kafka) without blocking other connections.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

import gevent

from kafka_ha.broker.cooperative import yielding
from kafka_ha.broker.fetch_sessions import NO_SESSION, FetchContext, FetchSessionCache
from kafka_ha.broker.partition import Partition
from kafka_ha.clock import now_ms
from kafka_ha.log.errors import OffsetOutOfRangeError
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode, KafkaProtocolError
from kafka_ha.protocol.file_region import fetch_payload
from kafka_ha.records.down_convert import down_convert, magic_for_fetch_version
from kafka_ha.records.errors import RecordsError

log = logging.getLogger(__name__)

CONSUMER, DEBUG_CONSUMER = -1, -2

VALID_ACKS = (-1, 0, 1)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)   # the same here: no transactions
DEFAULT_FETCH_MAX_BYTES = 57671680   # fetch.max.bytes, Kafka's default (55 MiB)
DOWN_CONVERT_MAX_BYTES = 1 << 19     # most stored bytes one answer to a Fetch v0-3 reader converts
MODERN_FETCH_VERSION = 4   # the first Fetch version whose readers take the stored (magic 2) data
SESSION_FETCH_VERSION = 7  # KIP-227: incremental fetch sessions


def fetch_problem(request: dict[str, Any], wanted: list) -> str | None:
    """Why a Fetch cannot be served at all, or None.

    >>> fetch_problem({"max_wait_ms": 0, "min_bytes": 1}, [(("t", 0), 0, -1)])
    'negative partition_max_bytes'
    """
    if request.get("isolation_level", READ_UNCOMMITTED) not in ISOLATION_LEVELS:
        return f"isolation_level {request['isolation_level']}"
    if request["max_wait_ms"] < 0 or request["min_bytes"] < 0 or request.get("max_bytes", 0) < 0:
        return "negative max_wait_ms, min_bytes or max_bytes"
    if any(limit < 0 for _, _, limit in wanted):
        return "negative partition_max_bytes"
    if len({tp for tp, _, _ in wanted}) != len(wanted):
        return "a partition is listed more than once"
    return None


def reads_up_to_leo(replica_id: int) -> bool:
    """Followers and the debug consumer read up to the LEO; consumers only below the HW.

    >>> [reads_up_to_leo(r) for r in (2, CONSUMER, DEBUG_CONSUMER)]
    [True, False, True]
    """
    return replica_id >= 0 or replica_id == DEBUG_CONSUMER


class DataPlane:
    def __init__(self, broker_id: int, partitions: dict[TopicPartition, Partition],
                 topic_exists: Callable[[str], bool], max_message_bytes: Callable[[str], int],
                 fetch_sessions: FetchSessionCache | None = None,
                 fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES) -> None:
        self.broker_id = broker_id
        self.fetch_max_bytes = fetch_max_bytes
        self.partitions = partitions
        self.fetch_sessions = fetch_sessions or FetchSessionCache()
        self._topic_exists = topic_exists
        self._max_message_bytes = max_message_bytes

    def _partition(self, tp: TopicPartition) -> tuple[Partition | None, int]:
        p = self.partitions.get(tp)
        if p is None:
            return None, self._not_hosted(tp)
        return p, ErrorCode.NONE

    def _not_hosted(self, tp: TopicPartition) -> int:
        """The error for a partition this broker has no replica of (Kafka's getPartitionOrError):
        NOT_LEADER if the topic exists (the client's metadata is stale), else UNKNOWN_TOPIC."""
        known = self._topic_exists(tp.topic)
        return ErrorCode.NOT_LEADER_FOR_PARTITION if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # ---- Produce --------------------------------------------------------

    def produce(self, request: dict[str, Any], version: int) -> dict[str, Any] | None:
        acks, timeout_s = request["acks"], request["timeout_ms"] / 1000
        # tp -> [error, base_offset, AppendResult, the Partition appended to]
        results: dict[TopicPartition, list] = {}
        # In slices: a first write to thousands of partitions must not hold the loop
        # (requests of one connection stay in order: they are served one at a time).
        for topic, part in yielding((t, p) for t in request["topic_data"] for p in t["partition_data"]):
            tp = TopicPartition(topic["name"], part["index"])
            results[tp] = self._append(tp, part["records"], acks)
        if acks == 0:
            return None
        if acks == -1:
            self._await_replication(results, timeout_s)
        by_topic: dict[str, list] = {}
        for tp, (error, base, _appended, _appended_to) in results.items():
            entry = {"index": tp.partition, "error_code": error, "base_offset": base}
            if version >= 2:
                entry["log_append_time_ms"] = -1
            by_topic.setdefault(tp.topic, []).append(entry)
        response: dict[str, Any] = {"responses": [{"name": t, "partition_responses": ps}
                                                  for t, ps in by_topic.items()]}
        if version >= 1:
            response["throttle_time_ms"] = 0
        return response

    def _append(self, tp: TopicPartition, records, acks: int) -> list:
        if acks not in VALID_ACKS:
            return [ErrorCode.INVALID_REQUIRED_ACKS, -1, None, None]
        p, error = self._partition(tp)
        if p is None:
            return [error, -1, None, None]
        if not records:
            return [ErrorCode.CORRUPT_MESSAGE, -1, None, None]
        try:
            result = p.append_as_leader(records, acks)
        except KafkaProtocolError as e:
            return [e.code, -1, None, None]
        except RecordsError as e:
            log.info("Rejected produce to %s: %s", tp, e)
            return [e.code, -1, None, None]
        return [ErrorCode.NONE, result.first_offset, result, p]

    def _await_replication(self, results: dict[TopicPartition, list], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for tp, result in results.items():
            error, _base, appended, partition = result
            if error != ErrorCode.NONE:
                continue
            # The Partition appended to, not a new lookup: while the request waited on
            # others, this one may have been deleted, moved away or re-created.
            error = partition.wait_for_acks(appended, max(0.0, deadline - time.monotonic()))
            if error != ErrorCode.NONE and self.partitions.get(tp) is not partition:
                error = self._not_hosted(tp)
            result[0] = error

    # ---- Fetch --------------------------------------------------------------

    def fetch(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        replica_id = request["replica_id"]
        wanted = [(TopicPartition(t["topic"], p["partition"]), p["fetch_offset"], p["partition_max_bytes"])
                  for t in request["topics"] for p in t["partitions"]]
        problem = fetch_problem(request, wanted)
        if problem:
            # Kafka 0.11-2.x fails to parse some of these and closes the connection;
            # a per-partition error tells the client what is wrong instead.
            log.info("Invalid fetch from replica %d: %s", replica_id, problem)
            entries = [(tp, {"partition_index": tp.partition, "error_code": ErrorCode.INVALID_REQUEST,
                             "high_watermark": -1, "log_start_offset": -1, "records": b""})
                       for tp in dict.fromkeys(tp for tp, _, _ in wanted)]
            return self._fetch_response(entries, version)
        now = now_ms()   # one clock read: the session's last use, the followers' fetch time
        context = self._fetch_context(request, version, wanted, now)
        if context.error:
            return self._fetch_response([], version, context.error)
        # In a session, every partition is read and counts as the follower's
        # fetch, listed in this request or not: an idle partition's follower
        # stays caught up, and its long poll still waits on all of them.
        wanted = context.wanted
        if replica_id >= 0:
            for tp, offset, _ in wanted:
                p = self.partitions.get(tp)
                if p is not None:
                    p.on_follower_fetch(replica_id, offset, now)
        # fetch.max.bytes: the broker's own bound on one answer, for Fetch v0-2 too,
        # which cannot ask for less (a v0 reader's 200 x 2 GB is not a plan).
        max_total = min(request.get("max_bytes", self.fetch_max_bytes), self.fetch_max_bytes)
        if version < MODERN_FETCH_VERSION and replica_id < 0:
            # What an old reader gets is converted record by record in Python, on the
            # loop: its answer is kept small enough that one conversion is a short
            # stall.  Any fetch may return less than asked; the reader fetches again.
            max_total = min(max_total, DOWN_CONVERT_MAX_BYTES)
        deadline = time.monotonic() + request["max_wait_ms"] / 1000
        up_to_leo = reads_up_to_leo(replica_id)
        while True:
            entries, total, errors = self._read_all(wanted, replica_id, max_total, version)
            remaining = deadline - time.monotonic()
            if total >= request["min_bytes"] or errors or remaining <= 0:
                break
            events = [p.changed_event(up_to_leo) for tp, _, _ in wanted
                      if (p := self.partitions.get(tp))]
            if not events:
                break
            gevent.wait(events, timeout=remaining, count=1)
        if version < MODERN_FETCH_VERSION and replica_id < 0:
            # Limits, min_bytes and the wait apply to the stored bytes (as in Kafka);
            # only the final answer is converted, once.
            self._down_convert(entries, wanted, magic_for_fetch_version(version), max_total)
        session_id = NO_SESSION
        if context.incremental:
            entries = context.session.select(entries)
            session_id = context.session.session_id
        elif context.new_session:
            session_id = self.fetch_sessions.open(context, replica_id, entries, now)
        return self._fetch_response(entries, version, session_id=session_id)

    def _fetch_context(self, request: dict[str, Any], version: int, wanted: list,
                       now: int) -> FetchContext:
        if version < SESSION_FETCH_VERSION:
            return FetchContext(wanted)
        forgotten = [TopicPartition(t["topic"], p) for t in request["forgotten_topics_data"]
                     for p in t["partitions"]]
        return self.fetch_sessions.context(request["replica_id"], request["session_id"],
                                           request["session_epoch"], wanted, forgotten, now)

    @staticmethod
    def _fetch_response(entries: list, version: int, error: int = ErrorCode.NONE,
                        session_id: int = NO_SESSION) -> dict[str, Any]:
        by_topic: dict[str, list] = {}
        for tp, entry in entries:
            if version >= 4:
                # No transactions: everything below the HW is stable, nothing is aborted.
                entry["last_stable_offset"] = entry["high_watermark"]
                entry["aborted_transactions"] = []
            by_topic.setdefault(tp.topic, []).append(entry)
        response: dict[str, Any] = {"responses": [{"topic": t, "partitions": ps}
                                                  for t, ps in by_topic.items()]}
        if version >= 1:
            response["throttle_time_ms"] = 0
        if version >= SESSION_FETCH_VERSION:
            response["error_code"], response["session_id"] = error, session_id
        return response

    def _down_convert(self, entries: list, wanted: list, to_magic: int, max_total: int) -> None:
        """Rewrite each partition's records for a reader of ``to_magic`` (see records.down_convert).

        Legacy entries are larger than v2 records, so the converted data of a
        partition is cut (at an entry boundary) to what the request's limits
        allow it, counted in converted bytes: ``partition_max_bytes`` and what
        is left of ``max_bytes`` after the partitions before it.  It is never
        cut below the stored size that was read (which the limits already
        allowed), and its first entry is always sent, so the reader progresses.
        A compressed batch is inflated no further than the larger of that limit
        and the topic's max.message.bytes (what the leader let in): a larger one
        is an error for that partition, not a gigabyte of memory.
        """
        total = 0
        for (tp, entry), (_, offset, partition_max) in yielding(zip(entries, wanted)):
            data = entry["records"]
            if not data:
                continue
            limit = max(len(data), min(partition_max, max_total - total))
            try:
                entry["records"] = down_convert(
                    data, to_magic, offset, max_bytes=limit,
                    max_inflate=max(limit, self._max_message_bytes(tp.topic)))
            except RecordsError as e:
                log.warning("Cannot down-convert %s from offset %d to magic %d: %s", tp, offset, to_magic, e)
                entry["error_code"], entry["records"] = e.code, b""
            total += len(entry["records"])

    def _read_all(self, wanted, replica_id: int, max_total: int, version: int):
        entries, total, errors = [], 0, False
        # A fetch of thousands of partitions must not starve the ZooKeeper
        # heartbeat or other connections: it reads in slices.
        for tp, offset, max_bytes in yielding(wanted):
            # KIP-74 (v3+): the first partition returns its first entry even if it
            # exceeds the limits.  Below v3 the limit is hard: an oversized entry
            # comes back cut, and the client reports it as too large.
            entry = self._read_one(tp, offset, max_bytes, replica_id,
                                   min_one=version >= 3 and total == 0, budget=max_total - total,
                                   hard_limit=version < 3,
                                   as_stored=version >= MODERN_FETCH_VERSION or replica_id >= 0)
            total += len(entry["records"] or b"")
            errors |= entry["error_code"] != ErrorCode.NONE
            entries.append((tp, entry))
        return entries, total, errors

    def _read_one(self, tp: TopicPartition, offset: int, max_bytes: int, replica_id: int,
                  min_one: bool, budget: int, hard_limit: bool = False,
                  as_stored: bool = True) -> dict[str, Any]:
        """One partition's entry; ``as_stored`` readers may get the records as
        FileRegions (sent with sendfile), the others need bytes to convert."""
        entry: dict[str, Any] = {"partition_index": tp.partition, "error_code": ErrorCode.NONE,
                                 "high_watermark": -1, "log_start_offset": -1, "records": b""}
        p, error = self._partition(tp)
        if p is None:
            entry["error_code"] = error
            return entry
        if not p.is_leader and replica_id != DEBUG_CONSUMER:
            entry["error_code"] = ErrorCode.NOT_LEADER_FOR_PARTITION
            return entry
        entry["high_watermark"] = p.high_watermark
        entry["log_start_offset"] = p.log.log_start_offset
        # Consumers read committed data only; followers (and the debug consumer) up to the LEO.
        max_offset = None if reads_up_to_leo(replica_id) else p.high_watermark
        if offset == (p.log.log_end_offset if max_offset is None else max_offset):
            return entry  # caught up: the common case of an idle follower's fetch
        try:
            # v3+ readers treat a lone partial entry as an error ("no complete
            # records"): for them an oversized first entry (of a partition after the
            # first) is not cut but left for a later fetch with budget left, as in Kafka.
            data = p.log.read(offset, min(max_bytes, max(budget, 0)), max_offset,
                              min_one_message=min_one, cut_oversized=hard_limit)
        except OffsetOutOfRangeError:
            entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
            return entry
        # Large reads leave the page cache only for the socket (sendfile);
        # small ones, and data to convert, are copied once.
        entry["records"] = fetch_payload(data.slices) if as_stored else data.to_bytes()
        return entry

    # ---- ListOffsets and OffsetsForLeaderEpoch ------------------------------------

    def list_offsets(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        replica_id = request["replica_id"]
        topics = []
        for topic in request["topics"]:
            parts = []
            for part in topic["partitions"]:
                tp = TopicPartition(topic["name"], part["partition_index"])
                error, offset = self._offset_for(tp, part["timestamp"], replica_id)
                if version == 0:
                    parts.append({"partition_index": tp.partition, "error_code": error,
                                  "old_style_offsets": [] if offset < 0 else [offset]})
                else:
                    parts.append({"partition_index": tp.partition, "error_code": error,
                                  "timestamp": -1, "offset": offset})
            topics.append({"name": topic["name"], "partitions": parts})
        return {"topics": topics}

    def _offset_for(self, tp: TopicPartition, timestamp: int, replica_id: int) -> tuple[int, int]:
        p, error = self._partition(tp)
        if p is None:
            return error, -1
        if not p.is_leader and replica_id != DEBUG_CONSUMER:
            return ErrorCode.NOT_LEADER_FOR_PARTITION, -1
        if timestamp == -2:
            return ErrorCode.NONE, p.log.log_start_offset
        if replica_id == CONSUMER and not p.latest_offset_known():
            # A new leader whose HW has not reached its epoch's start yet (KAFKA-2334).
            # Retriable: Kafka answers OFFSET_NOT_AVAILABLE from ListOffsets v5 and
            # LEADER_NOT_AVAILABLE below, the versions served here.
            return ErrorCode.LEADER_NOT_AVAILABLE, -1
        if timestamp == -1:
            return ErrorCode.NONE, (p.log.log_end_offset if replica_id >= 0 else p.high_watermark)
        offset = p.log.offset_for_time(timestamp)
        return ErrorCode.NONE, (p.high_watermark if offset is None else min(offset, p.high_watermark))

    def offsets_for_leader_epoch(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        topics = []
        for topic in request["topics"]:
            parts = []
            for part in topic["partitions"]:
                tp = TopicPartition(topic["topic"], part["partition"])
                p = self.partitions.get(tp)
                if p is None or not p.is_leader:
                    epoch, end, error = -1, -1, ErrorCode.NOT_LEADER_FOR_PARTITION
                else:
                    epoch, end = p.log.end_offset_for_epoch(part["leader_epoch"])
                    error = ErrorCode.NONE
                entry = {"error_code": error, "partition": tp.partition, "end_offset": end}
                if version >= 1:
                    entry["leader_epoch"] = epoch
                parts.append(entry)
            topics.append({"topic": topic["topic"], "partitions": parts})
        return {"topics": topics}
