"""DeleteRecords and DescribeLogDirs.

DeleteRecords goes to each partition's leader, which moves the log start offset
up to the requested offset (-1: the high watermark); records below it can no
longer be read, and retention deletes the segments wholly below it.  Followers
learn the new start from the leader's Fetch answers (v5+ ``log_start_offset``),
never past their own high watermark, and report theirs in their next fetch.
The answer waits (up to ``timeout_ms``) until every live replica starts at the
offset, and its ``low_watermark`` is the lowest of their log starts, as Kafka's.
The leader's new start is checkpointed (``log-start-offset-checkpoint``) before
the wait, off the event loop, so it survives a restart.

DescribeLogDirs lists every log directory with the partitions it holds here.

>>> deletion_offset(-1, high_watermark=40)
(<ErrorCode.NONE: 0>, 40)
>>> deletion_offset(41, high_watermark=40)
(<ErrorCode.OFFSET_OUT_OF_RANGE: 1>, -1)
>>> deletion_offset(-2, high_watermark=40)
(<ErrorCode.OFFSET_OUT_OF_RANGE: 1>, -1)
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

import gevent

from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
HIGH_WATERMARK = -1          # DeleteRecordsRequest.HIGH_WATERMARK: "up to the high watermark"
INVALID_LOW_WATERMARK = -1
# How often a waiting DeleteRecords looks at the followers' log starts (they report
# them with each fetch, at least every replica.fetch.wait.max.ms).
LOW_WATERMARK_POLL_S = 0.05


def deletion_offset(requested: int, high_watermark: int) -> tuple[ErrorCode, int]:
    """The offset records are deleted before, or OFFSET_OUT_OF_RANGE past the high
    watermark (uncommitted records cannot be deleted) or for a negative offset other than -1."""
    offset = high_watermark if requested == HIGH_WATERMARK else requested
    if offset < 0 or offset > high_watermark:
        return ErrorCode.OFFSET_OUT_OF_RANGE, INVALID_LOW_WATERMARK
    return ErrorCode.NONE, offset


class LogAdminApis:
    def __init__(self, hosted: HostedPartitions, log_manager: Any,
                 checkpoint_log_starts: Callable[[], None]) -> None:
        self.hosted = hosted
        self.log_manager = log_manager
        self._checkpoint_log_starts = checkpoint_log_starts

    def delete_records(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        topics, waiting, moved = [], [], False
        for topic in request["topics"]:
            partitions = []
            for part in topic["partitions"]:
                tp = TopicPartition(topic["name"], part["partition_index"])
                error, partition, offset, moved_here = self._delete_before(tp, part["offset"])
                moved |= moved_here
                entry = {"partition_index": tp.partition, "low_watermark": INVALID_LOW_WATERMARK,
                         "error_code": error}
                if partition is not None:
                    waiting.append((entry, partition, offset))
                partitions.append(entry)
            topics.append({"name": topic["name"], "partitions": partitions})
        if moved:
            self._checkpoint_log_starts()
        if waiting:
            self._await_low_watermarks(waiting, request["timeout_ms"])
        return {"throttle_time_ms": 0, "topics": topics}

    def _delete_before(self, tp: TopicPartition, requested: int) -> tuple[ErrorCode, Any, int, bool]:
        """The error, or NONE, the partition and the offset its log now starts at here;
        and whether the log start moved."""
        partition, error = self.hosted.get_or_error(tp)
        if partition is None:
            return error, None, -1, False
        if not partition.is_leader:
            return ErrorCode.NOT_LEADER_FOR_PARTITION, None, -1, False
        if not partition.log.config.delete:
            # Kafka's rule: records of a compact-only topic are removed by the cleaner alone.
            return ErrorCode.POLICY_VIOLATION, None, -1, False
        error, offset = deletion_offset(requested, partition.high_watermark)
        if error != ErrorCode.NONE:
            return error, None, -1, False
        before = partition.log.log_start_offset
        partition.maybe_increment_log_start_offset(offset)
        moved = partition.log.log_start_offset != before
        if moved:
            log.info("Deleted the records of %s before offset %d (DeleteRecords)", tp,
                     partition.log.log_start_offset)
        return ErrorCode.NONE, partition, max(offset, partition.log.log_start_offset), moved

    @staticmethod
    def _await_low_watermarks(waiting: list, timeout_ms: int) -> None:
        """Answer each partition once every live replica's log starts at its offset (the
        followers learn it from their next fetch, and report it in the one after), as
        Kafka's delayed DeleteRecords; REQUEST_TIMED_OUT after ``timeout_ms``."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            still = []
            for entry, partition, offset in waiting:
                if not partition.is_leader:
                    entry["error_code"] = ErrorCode.NOT_LEADER_FOR_PARTITION
                elif partition.low_watermark >= offset:
                    entry["low_watermark"] = partition.low_watermark
                else:
                    still.append((entry, partition, offset))
            waiting = still
            if not waiting or time.monotonic() >= deadline:
                break
            gevent.sleep(LOW_WATERMARK_POLL_S)
        for entry, _, _ in waiting:
            entry["error_code"] = ErrorCode.REQUEST_TIMED_OUT

    def describe_log_dirs(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        wanted = request["topics"]
        wanted_set = None if wanted is None else {
            TopicPartition(t["topic"], p) for t in wanted for p in t["partitions"]}
        by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {d: {} for d in self.log_manager.log_dirs}
        for tp, lg in sorted(self.log_manager.all_logs().items()):
            log_dir = self.log_manager.log_dir_of(tp)
            if log_dir is None or (wanted_set is not None and tp not in wanted_set):
                continue
            # offset_lag: how far a future log (AlterReplicaLogDirs) trails the current one;
            # there are no future logs here, and a current log never trails its HW.
            by_dir[log_dir].setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "partition_size": lg.size, "offset_lag": 0,
                 "is_future_key": False})
        results = [{"error_code": ErrorCode.NONE, "log_dir": log_dir,
                    "topics": [{"name": topic, "partitions": parts} for topic, parts in topics.items()]}
                   for log_dir, topics in by_dir.items()]
        return {"throttle_time_ms": 0, "results": results}
