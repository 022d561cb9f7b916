"""Produce, Fetch, ListOffsets and OffsetsForLeaderEpoch: their request layer (the
handlers of Kafka's KafkaApis).

Each handler turns a decoded request (a dict in the wire layout of its version)
into calls on the replica side, which takes and returns model values and owns
the partitions: ``replica_appends`` (append, acks=all), ``replica_reads`` (reads
within limits, the long poll) and ``replica_offsets``.  What is left here is
what the wire asks for: validating a request, the per-version fields of a
response, fetch sessions (KIP-227, ``fetch_sessions``) and the down-conversion of
a fetch's records for readers older than the stored format.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from kafka_ha import metrics
from kafka_ha.broker import replica_appends, replica_offsets, replica_reads
from kafka_ha.cooperative import yielding
from kafka_ha.broker.fetch_sessions import NO_SESSION, FetchContext, FetchSessionCache
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.produce_checks import produce_refusal
from kafka_ha.broker.replica_reads import FetchParams, PartitionFetch, PartitionRead
from kafka_ha.clock import now_ms
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.deferred import DeferredResponse
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.produce_api import LOG_START_PRODUCE_VERSION
from kafka_ha.records.down_convert import down_convert, magic_for_fetch_version
from kafka_ha.records.errors import RecordsError

log = logging.getLogger(__name__)

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)   # the same here: no transactions
DEFAULT_FETCH_MAX_BYTES = 57671680   # fetch.max.bytes, Kafka's default (55 MiB)
DOWN_CONVERT_MAX_BYTES = 1 << 19     # most stored bytes one answer to a Fetch v0-3 reader converts
MODERN_FETCH_VERSION = 4   # the first Fetch version whose readers take the stored (magic 2) data
ZSTD_FETCH_VERSION = 10    # the first whose consumers may read a topic stored in zstd (KIP-110)
SESSION_FETCH_VERSION = 7  # KIP-227: incremental fetch sessions


def fetch_problem(request: dict[str, Any], wanted: list[PartitionFetch]) -> str | None:
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


def list_offsets_entry(partition: int, version: int, found: replica_offsets.OffsetLookup) -> dict[str, Any]:
    """A partition's entry of a ListOffsets response of ``version``.

    v0 answers a list ("old style"): the offset found, or none; v1+ the offset and
    the timestamp of its record (-1 when looked up by -1/-2 or when nothing is
    found), v4 also the offset's leader epoch.

    >>> from kafka_ha.broker.replica_offsets import OffsetLookup
    >>> list_offsets_entry(3, 0, OffsetLookup(0, 42, 1000, 7))
    {'partition_index': 3, 'error_code': 0, 'old_style_offsets': [42]}
    >>> list_offsets_entry(3, 4, OffsetLookup(0, 42, 1000, 7))
    {'partition_index': 3, 'error_code': 0, 'timestamp': 1000, 'offset': 42, 'leader_epoch': 7}
    """
    entry: dict[str, Any] = {"partition_index": partition, "error_code": found.error}
    if version == 0:
        entry["old_style_offsets"] = [found.offset] if found.offset >= 0 else []
        return entry
    entry["timestamp"], entry["offset"] = found.timestamp, found.offset
    if version >= 4:
        entry["leader_epoch"] = found.leader_epoch
    return entry


def fetch_entry(tp: TopicPartition, read: PartitionRead) -> dict[str, Any]:
    """A partition's entry of a Fetch response."""
    return {"partition_index": tp.partition, "error_code": read.error,
            "high_watermark": read.high_watermark, "log_start_offset": read.log_start_offset,
            "records": read.records}


class DataApis:
    def __init__(self, replicas: HostedPartitions, max_message_bytes: Callable[[str], int],
                 fetch_sessions: FetchSessionCache | None = None,
                 fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES, leader_quota: Any = None) -> None:
        self.replicas = replicas
        self.leader_quota = leader_quota   # replication_quota.ReplicationQuota, or None
        self.fetch_max_bytes = fetch_max_bytes
        self.fetch_sessions = fetch_sessions or FetchSessionCache()
        self._max_message_bytes = max_message_bytes

    # ---- Produce --------------------------------------------------------

    def produce(self, request: dict[str, Any], version: int) -> dict[str, Any] | DeferredResponse | None:
        acks, timeout_s = request["acks"], request["timeout_ms"] / 1000
        # A generator: the appends take the partitions one by one, in slices.
        entries = ((TopicPartition(topic["name"], part["index"]), part["records"])
                   for topic in request["topic_data"] for part in topic["partition_data"])
        if request.get("transactional_id") is not None:
            # Transactions are out of scope (produce_checks): nothing is appended.
            log.info("Refused a transactional produce (transactional id %r): transactions are "
                     "not supported", request["transactional_id"])
            results = {tp: replica_appends.PartitionAppend(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                       for tp, _ in entries}
        else:
            results = replica_appends.append_records(self.replicas, entries, acks, produce_refusal(version))
        if acks == 0:
            return None
        if acks == -1 and replica_appends.any_waiting(results):
            # Appended now, in request order; only the answer waits for the replicas,
            # so the connection's next requests are read and appended meanwhile
            # (protocol/deferred.py).  The timeout runs from now, not from when the
            # answers before this one are done.
            deadline = time.monotonic() + timeout_s

            def finish() -> dict[str, Any]:
                replica_appends.await_replication(self.replicas, results, deadline)
                return self._produce_response(results, version)
            return DeferredResponse(finish)
        return self._produce_response(results, version)

    @staticmethod
    def _produce_response(results: dict[TopicPartition, replica_appends.PartitionAppend],
                          version: int) -> dict[str, Any]:
        by_topic: dict[str, list] = {}
        for tp, result in results.items():
            entry = {"index": tp.partition, "error_code": result.error, "base_offset": result.base_offset}
            if version >= 2:
                entry["log_append_time_ms"] = -1 if result.appended is None else result.appended.log_append_time
            if version >= LOG_START_PRODUCE_VERSION:
                entry["log_start_offset"] = -1 if result.partition is None else \
                    result.partition.log.log_start_offset
            by_topic.setdefault(tp.topic, []).append(entry)
        response: dict[str, Any] = {"responses": [{"name": t, "partition_responses": ps}
                                                  for t, ps in by_topic.items()]}
        if version >= 1:
            response["throttle_time_ms"] = 0
        return response

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
            entries = [(tp, fetch_entry(tp, PartitionRead(ErrorCode.INVALID_REQUEST)))
                       for tp in dict.fromkeys(tp for tp, _, _ in wanted)]
            return self._fetch_response(entries, version)
        if replica_id >= 0 and version >= 5:
            self._follower_log_starts(request, replica_id)
        now = now_ms()   # one clock read: the session's last use, the followers' fetch time
        context = self._fetch_context(request, version, wanted, now)
        if context.error:
            return self._fetch_response([], version, context.error)
        # In a session, every partition that does not rest is read and counts as the
        # follower's fetch, listed in this request or not; a resting one counts too, at
        # its next change (fetch_sessions), and wakes the long poll.
        wanted = context.wanted
        # KIP-320: a partition asked for in another leader epoch is answered with
        # the fencing error and neither read nor counted as the follower's position.
        fenced = replica_reads.fenced_partitions(self.replicas, context.leader_epochs)
        if replica_id < 0 and version < ZSTD_FETCH_VERSION:
            fenced.update(replica_reads.zstd_refused(self.replicas, (tp for tp, _, _ in wanted)))
        if fenced:
            wanted = [w for w in wanted if w[0] not in fenced]
        # fetch.max.bytes: the broker's own bound on one answer, for Fetch v0-2 too,
        # which cannot ask for less (a v0 reader's 200 x 2 GB is not a plan).
        max_total = min(request.get("max_bytes", self.fetch_max_bytes), self.fetch_max_bytes)
        old_reader = version < MODERN_FETCH_VERSION and replica_id < 0   # gets its records converted
        if old_reader:
            # What an old reader gets is converted record by record in Python, on the
            # loop: its answer is kept small enough that one conversion is a short
            # stall.  Any fetch may return less than asked; the reader fetches again.
            max_total = min(max_total, DOWN_CONVERT_MAX_BYTES)
        params = FetchParams(replica_id, 0 if fenced else request["max_wait_ms"], request["min_bytes"],
                             max_total, hard_max_bytes_limit=version < 3, as_stored=not old_reader,
                             quota=self.leader_quota if replica_id >= 0 else None,
                             unchanged=context.session.unchanged_answers(
                                 self.replicas.get, replica_reads.reads_up_to_leo(replica_id))
                             if context.incremental else None)
        reads = replica_reads.fetch_records(self.replicas, params, wanted, now, context.session)
        if params.quota is not None:
            # Every byte of a throttled partition counts, in-sync followers' too (Kafka's
            # sizeOfThrottledPartitions): they use up the budget though never held back.
            params.quota.record(sum(len(read.records) for tp, read in reads
                                    if read.records and params.quota.is_throttled(tp)))
        if replica_id < 0:   # consumers' bytes only, as Kafka's BytesOutPerSec
            for tp, read in reads:
                if read.records:
                    metrics.bytes_out(tp.topic, len(read.records))
        entries = [(tp, fetch_entry(tp, read)) for tp, read in reads]
        entries += [(tp, fetch_entry(tp, PartitionRead(error))) for tp, error in fenced.items()]
        if old_reader:
            # Limits, min_bytes and the wait apply to the stored bytes (as in Kafka);
            # only the final answer is converted, once.
            self._down_convert(entries, wanted, magic_for_fetch_version(version), max_total)
        session, session_id = context.session, NO_SESSION
        if session is not None:
            # (Evicted while this fetch waited, maybe: the answer still goes out, and the
            # next fetch learns the session is gone.)
            entries = session.select(entries)
            session_id = session.session_id
        elif context.new_session:
            session_id = self.fetch_sessions.open(context, replica_id, entries, now)
            session = self.fetch_sessions.sessions.get(session_id)
        if session is not None:
            session.settle(self.replicas.get)
        return self._fetch_response(entries, version, session_id=session_id)

    def _follower_log_starts(self, request: dict[str, Any], replica_id: int) -> None:
        """The log starts a follower reports (only for the partitions it lists: in an
        incremental fetch, those whose position, log start included, moved)."""
        for topic in request["topics"]:
            for part in topic["partitions"]:
                p = self.replicas.get(TopicPartition(topic["topic"], part["partition"]))
                if p is not None and p.is_leader:
                    p.on_follower_log_start(replica_id, part["log_start_offset"])

    def _fetch_context(self, request: dict[str, Any], version: int, wanted: list[PartitionFetch],
                       now: int) -> FetchContext:
        leader_epochs = {TopicPartition(t["topic"], p["partition"]): p["current_leader_epoch"]
                         for t in request["topics"] for p in t["partitions"]
                         if p.get("current_leader_epoch", -1) >= 0}
        if version < SESSION_FETCH_VERSION:
            return FetchContext(wanted, leader_epochs=leader_epochs)
        forgotten = [TopicPartition(t["topic"], p) for t in request["forgotten_topics_data"]
                     for p in t["partitions"]]
        return self.fetch_sessions.context(request["replica_id"], request["session_id"],
                                           request["session_epoch"], wanted, forgotten, now,
                                           leader_epochs)


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

    def _down_convert(self, entries: list, wanted: list[PartitionFetch], to_magic: int,
                      max_total: int) -> None:
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

    # ---- ListOffsets and OffsetsForLeaderEpoch ------------------------------------

    def list_offsets(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        replica_id = request["replica_id"]
        if request.get("isolation_level", READ_UNCOMMITTED) not in ISOLATION_LEVELS:
            # Kafka fails to parse it; an error per partition says what is wrong instead.
            log.info("ListOffsets from replica %d with isolation_level %d", replica_id,
                     request["isolation_level"])
            error = ErrorCode.INVALID_REQUEST
        else:
            error = None       # no transactions: read_committed's LSO is the HW
        topics = []
        for topic in request["topics"]:
            parts = [list_offsets_entry(part["partition_index"], version, replica_offsets.OffsetLookup(error)
                                        if error is not None else replica_offsets.offset_for_timestamp(
                                            self.replicas, TopicPartition(topic["name"], part["partition_index"]),
                                            part["timestamp"], replica_id, part.get("current_leader_epoch", -1)))
                     for part in topic["partitions"]]
            topics.append({"name": topic["name"], "partitions": parts})
        return {"topics": topics, "throttle_time_ms": 0} if version >= 2 else {"topics": topics}

    def offsets_for_leader_epoch(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        topics = []
        for topic in request["topics"]:
            parts = []
            for part in topic["partitions"]:
                tp = TopicPartition(topic["topic"], part["partition"])
                error, epoch, end = replica_offsets.end_offset_for_epoch(
                    self.replicas, tp, part["leader_epoch"], part.get("current_leader_epoch", -1))
                entry = {"error_code": error, "partition": tp.partition, "end_offset": end}
                if version >= 1:
                    entry["leader_epoch"] = epoch
                parts.append(entry)
            topics.append({"topic": topic["topic"], "partitions": parts})
        return {"topics": topics, "throttle_time_ms": 0} if version >= 2 else {"topics": topics}
