"""Offset lookups on this broker's partitions: ListOffsets' offset for a timestamp
(Kafka's ReplicaManager.fetchOffsetForTimestamp) and OffsetsForLeaderEpoch's end
offset of an epoch (lastOffsetForLeaderEpoch).  Each returns an error code with
its values; how a request names its partitions and what its response carries per
version is the request layer's (``data_apis``).
"""
from __future__ import annotations

from kafka_ha.broker import replication
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.replica_reads import CONSUMER, DEBUG_CONSUMER
from kafka_ha.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode


def offset_for_timestamp(partitions: HostedPartitions, tp: TopicPartition, timestamp: int,
                         replica_id: int) -> tuple[int, int]:
    """(error, offset): the first offset at or after ``timestamp``, or the log's start
    or latest offset; consumers never learn an offset past the HW."""
    p, error = partitions.get_or_error(tp)
    if p is None:
        return error, -1
    if not p.is_leader and replica_id != DEBUG_CONSUMER:
        return ErrorCode.NOT_LEADER_FOR_PARTITION, -1
    if timestamp == EARLIEST_TIMESTAMP:
        return ErrorCode.NONE, p.log.log_start_offset
    if replica_id == CONSUMER and not p.latest_offset_known():
        # A new leader whose HW has not reached its epoch's start yet (KAFKA-2334).
        # Retriable: Kafka answers OFFSET_NOT_AVAILABLE from ListOffsets v5 and
        # LEADER_NOT_AVAILABLE below, the versions served here.
        return ErrorCode.LEADER_NOT_AVAILABLE, -1
    if timestamp == LATEST_TIMESTAMP:
        return ErrorCode.NONE, (p.log.log_end_offset if replica_id >= 0 else p.high_watermark)
    offset = p.log.offset_for_time(timestamp)
    return ErrorCode.NONE, (p.high_watermark if offset is None else min(offset, p.high_watermark))


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
