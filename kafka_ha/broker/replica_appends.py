"""Appends to the partitions this broker leads, and the wait for acks=all (Kafka's
ReplicaManager.appendRecords and its produce purgatory).

Record data stays opaque here: it goes to the leader's log as it came.  An
acks=all append waits on the partition's high-watermark event, without blocking
other connections, until every ISR member has it, the ISR falls below
min.insync.replicas, or the request's timeout passes.  What a request looks like
on the wire, and what its response carries per version, is the request layer's
(``data_apis``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from kafka_ha import metrics
from kafka_ha.cooperative import yielding
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.partition import AppendResult, Partition
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode, KafkaProtocolError
from kafka_ha.records.errors import RecordsError

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)

Records = bytes | memoryview | None


@dataclass(slots=True)
class PartitionAppend:
    """One partition's append: its error, else where it went and what acks=all waits for."""

    error: int
    base_offset: int = -1
    appended: AppendResult | None = None
    # The Partition appended to, not a new lookup: while the request waited on
    # others, this one may have been deleted, moved away or re-created.
    partition: Partition | None = None


def append_records(partitions: HostedPartitions, entries: Iterable[tuple[TopicPartition, Records]],
                   acks: int, refusal: Callable[[Records], int | None] | None = None
                   ) -> dict[TopicPartition, PartitionAppend]:
    """Append each partition's records as its leader; one result per partition, in order.

    ``refusal``, if given, returns the error code for a record set the request's
    version does not allow (checked first, as Kafka validates a request's records
    before it looks for the partitions), or None."""
    results: dict[TopicPartition, PartitionAppend] = {}
    # In slices: a first write to thousands of partitions must not hold the loop
    # (requests of one connection stay in order: they are served one at a time).
    for tp, records in yielding(entries):
        refused = refusal(records) if refusal is not None and records else None
        results[tp] = PartitionAppend(refused) if refused is not None else \
            _append(partitions, tp, records, acks)
    return results


def _append(partitions: HostedPartitions, tp: TopicPartition, records: Records,
            acks: int) -> PartitionAppend:
    if acks not in VALID_ACKS:
        return PartitionAppend(ErrorCode.INVALID_REQUIRED_ACKS)
    p, error = partitions.get_or_error(tp)
    if p is None:
        return PartitionAppend(error)
    if not records:
        return PartitionAppend(ErrorCode.CORRUPT_MESSAGE)
    try:
        result = p.append_as_leader(records, acks)
    except KafkaProtocolError as e:
        # The partition goes along: a Produce v5+ answer gives its log start offset
        # with the error (how a producer tells UNKNOWN_PRODUCER_ID after retention
        # from a lost write).
        return PartitionAppend(e.code, partition=p)
    except RecordsError as e:
        log.info("Rejected produce to %s: %s", tp, e)
        return PartitionAppend(e.code)
    metrics.appended(tp.topic, len(records), result.last_offset - result.first_offset + 1)
    return PartitionAppend(ErrorCode.NONE, result.first_offset, result, p)


def any_waiting(results: dict[TopicPartition, PartitionAppend]) -> bool:
    """Whether an acks=all answer has anything to wait for: an append its HW has not passed."""
    return any(r.error == ErrorCode.NONE and r.partition.high_watermark <= r.appended.last_offset
               for r in results.values())


def await_replication(partitions: HostedPartitions, results: dict[TopicPartition, PartitionAppend],
                      deadline: float) -> None:
    """acks=all: wait, until ``deadline`` (time.monotonic()) for all of them, until each
    appended partition's HW passes its append; sets each result's error to the outcome."""
    for tp, result in results.items():
        if result.error != ErrorCode.NONE:
            continue
        partition = result.partition
        error = partition.wait_for_acks(result.appended, max(0.0, deadline - time.monotonic()))
        if error != ErrorCode.NONE and partitions.get(tp) is not partition:
            error = partitions.not_hosted_error(tp)
        result.error = error
