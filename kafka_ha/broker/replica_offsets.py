"""Offset lookups on this broker's partitions: ListOffsets' offset for a timestamp
(Kafka's ReplicaManager.fetchOffsetForTimestamp) and OffsetsForLeaderEpoch's end
offset of an epoch (lastOffsetForLeaderEpoch).  Each returns an error code with
its values; how a request names its partitions and what its response carries per
version is the request layer's (``data_apis``).
"""
from __future__ import annotations

from typing import NamedTuple

from kafka_ha.broker import replication
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.replica_reads import CONSUMER, DEBUG_CONSUMER
from kafka_ha.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode


class OffsetLookup(NamedTuple):
    error: int
    offset: int = -1
    timestamp: int = -1            # of the record found; -1 for -1 (latest) and -2 (earliest)
    leader_epoch: int = -1         # the epoch of that offset (ListOffsets v4)


def offset_for_timestamp(partitions: HostedPartitions, tp: TopicPartition, timestamp: int,
                         replica_id: int, current_leader_epoch: int = -1) -> OffsetLookup:
    """The first offset whose record has a timestamp >= ``timestamp`` (the segments' time
    indexes find it), or the log's start (-2) or latest (-1) offset.  Consumers never
    learn an offset at or past the HW: a record found there is "none" (offset -1), as
    in Kafka.  ``current_leader_epoch`` (ListOffsets v4, KIP-320) fences a stale sender."""
    p, error = partitions.get_or_error(tp)
    if p is None:
        return OffsetLookup(error)
    if not p.is_leader and replica_id != DEBUG_CONSUMER:
        return OffsetLookup(ErrorCode.NOT_LEADER_FOR_PARTITION)
    if p.is_leader:
        fenced = replication.leader_epoch_error(current_leader_epoch, p.leader_epoch)
        if fenced != ErrorCode.NONE:
            return OffsetLookup(fenced)
    epochs = p.log.epoch_cache
    if timestamp == EARLIEST_TIMESTAMP:
        start = p.log.log_start_offset
        return OffsetLookup(ErrorCode.NONE, start, -1, epochs.epoch_at(start))
    if replica_id == CONSUMER and not p.latest_offset_known():
        # A new leader whose HW has not reached its epoch's start yet (KAFKA-2334).
        # Retriable: Kafka answers OFFSET_NOT_AVAILABLE from ListOffsets v5 and
        # LEADER_NOT_AVAILABLE below, the versions served here.
        return OffsetLookup(ErrorCode.LEADER_NOT_AVAILABLE)
    if timestamp == LATEST_TIMESTAMP:
        latest = p.log.log_end_offset if replica_id >= 0 else p.high_watermark
        return OffsetLookup(ErrorCode.NONE, latest, -1, epochs.latest_epoch)
    found = p.log.offset_for_time(timestamp)
    if found is None or (replica_id == CONSUMER and found[0] >= p.high_watermark):
        return OffsetLookup(ErrorCode.NONE)
    return OffsetLookup(ErrorCode.NONE, found[0], found[1], epochs.epoch_at(found[0]))


def end_offset_for_epoch(partitions: HostedPartitions, tp: TopicPartition,
                         leader_epoch: int, current_leader_epoch: int = -1) -> tuple[int, int, int]:
    """(error, epoch, end offset): the largest epoch up to ``leader_epoch`` that this
    leader's log holds, and where it ends (KIP-101/279).  Only a leader answers, and
    only a sender in its own epoch (``current_leader_epoch``, KIP-320; -1: unchecked)."""
    p = partitions.get(tp)
    if p is None or not p.is_leader:
        return ErrorCode.NOT_LEADER_FOR_PARTITION, -1, -1
    fenced = replication.leader_epoch_error(current_leader_epoch, p.leader_epoch)
    if fenced != ErrorCode.NONE:
        return fenced, -1, -1
    epoch, end = p.log.end_offset_for_epoch(leader_epoch)
    return ErrorCode.NONE, epoch, end
