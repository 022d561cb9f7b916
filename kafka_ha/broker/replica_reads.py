"""Reads of this broker's partitions for a fetch (Kafka's ReplicaManager.fetchMessages).

A follower's fetch first records its position on each partition it fetches
(which may advance the HW or grow the ISR).  Then the partitions are read within
the fetch's limits, and a fetch that wants more bytes than are there waits on
the partitions' change events (Kafka's fetch purgatory) without blocking other
connections, until there are enough, a partition has an error, or its wait is
over.  Records stay opaque: byte ranges of the log.  What a request looks like on
the wire, and what its response carries per version, is the request layer's
(``data_apis``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

import gevent

from kafka_ha.broker import replication
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.cooperative import yielding
from kafka_ha.log.errors import OffsetOutOfRangeError
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.file_region import fetch_payload
from kafka_ha.state_change_log import StateChangeBatch

CONSUMER, DEBUG_CONSUMER = -1, -2   # the replica ids of clients; brokers' are their ids
# Where a leader's per-partition lines about its followers go (Partition's own logger).
PARTITION_LOG = logging.getLogger("kafka_ha.broker.partition")

PartitionFetch = tuple[TopicPartition, int, int]   # (partition, fetch offset, partition max bytes)


def reads_up_to_leo(replica_id: int) -> bool:
    """Followers and the debug consumer read up to the LEO; consumers only below the HW.

    >>> [reads_up_to_leo(r) for r in (2, CONSUMER, DEBUG_CONSUMER)]
    [True, False, True]
    """
    return replica_id >= 0 or replica_id == DEBUG_CONSUMER


@dataclass(frozen=True, slots=True)
class FetchParams:
    """How one fetch reads (Kafka's FetchParams); the request layer derives it from the request."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int                # for all partitions together
    # Fetch v0-2: the limits are hard, an oversized entry comes back cut (and the
    # client reports it as too large).  From v3 (KIP-74) the first partition
    # returns its first entry whole, even beyond the limits, so a reader progresses.
    hard_max_bytes_limit: bool
    # Records in the stored format may stay in their files until the socket takes
    # them (sendfile); readers that need them converted get bytes.
    as_stored: bool
    # The leader's replication quota (replication_quota.ReplicationQuota), for a
    # follower's fetch: a throttled partition is left out while it is exceeded.
    quota: Any = None
    # An incremental session's test (FetchSession.unchanged_answers): whether reading a
    # partition from an offset would give the answer the session last sent, which an
    # incremental response leaves out, so it is not read at all.
    unchanged: Callable[[TopicPartition, int], bool] | None = None


@dataclass(slots=True)
class PartitionRead:
    """One partition's part of a fetch (Kafka's FetchPartitionData)."""

    error: int = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    records: Any = b""            # bytes, or FileRegions when ``as_stored``


def fenced_partitions(partitions: HostedPartitions,
                      leader_epochs: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """KIP-320: of the partitions a fetch names a leader epoch for (``leader_epochs``),
    those this broker hosts in another epoch, with the error to answer (see
    ``replication.leader_epoch_error``).  They must be neither read nor counted as
    the follower's position.  A follower replica checks too, before leadership (as
    Kafka 2.1 does): a consumer behind the times learns it is fenced, not only that
    this broker does not lead."""
    fenced = {}
    get = partitions.get
    for tp, epoch in leader_epochs.items():
        p = get(tp)
        # The same epoch (every partition of a follower's fetch, thousands) needs no check.
        if p is not None and epoch != p.leader_epoch and p.leader_epoch >= 0:
            error = replication.leader_epoch_error(epoch, p.leader_epoch)
            if error != ErrorCode.NONE:
                fenced[tp] = error
    return fenced


def zstd_refused(partitions: HostedPartitions, tps) -> dict[TopicPartition, int]:
    """Of ``tps``, those whose topic stores zstd (``compression.type=zstd``), with
    UNSUPPORTED_COMPRESSION_TYPE: a consumer below Fetch v10 may not read them.  As in
    Kafka 2.1 the topic's setting decides, not the bytes: zstd batches a producer sent to a
    ``producer`` topic go to any reader, which fails on them if it cannot decode zstd."""
    refused = {}
    for tp in tps:
        p = partitions.get(tp)
        if p is not None and p.log is not None and p.log.config.compression_type == "zstd":
            refused[tp] = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    return refused


def fetch_records(partitions: HostedPartitions, params: FetchParams, wanted: list[PartitionFetch],
                  now_ms: int, session: Any = None) -> list[tuple[TopicPartition, PartitionRead]]:
    """Each of ``wanted``'s partitions read, once there is enough to answer (see the module
    docstring); a follower's fetch counts as made at ``now_ms``.  ``session``: the incremental
    fetch session ``wanted`` comes from (fetch_sessions.FetchSession), whose resting
    partitions wake the wait too, and are read from then on."""
    replica_id = params.replica_id
    if replica_id >= 0:
        lines = StateChangeBatch(PARTITION_LOG)
        for tp, offset, _ in wanted:
            p = partitions.get(tp)
            if p is not None:
                p.on_follower_fetch(replica_id, offset, now_ms, lines)
        lines.emit()
    deadline = time.monotonic() + params.max_wait_ms / 1000
    up_to_leo = reads_up_to_leo(replica_id)
    while True:
        reads, total, errors = read_partitions(partitions, params, wanted)
        remaining = deadline - time.monotonic()
        if total >= params.min_bytes or errors or remaining <= 0:
            return reads
        events = [p.changed_event(up_to_leo) for tp, _, _ in wanted
                  if (p := partitions.get(tp))]
        if session is not None:
            events.append(session.wake)
        if not events:
            return reads
        gevent.wait(events, timeout=remaining, count=1)
        if session is not None:
            wanted = session.wanted()


def read_partitions(partitions: HostedPartitions, params: FetchParams, wanted: list[PartitionFetch]
                    ) -> tuple[list[tuple[TopicPartition, PartitionRead]], int, bool]:
    """One read of every partition within the limits: (reads, bytes read, whether any failed)."""
    reads, total, errors = [], 0, False
    unchanged = params.unchanged
    # A fetch of thousands of partitions must not starve the ZooKeeper
    # heartbeat or other connections: it reads in slices.
    for tp, offset, max_bytes in yielding(wanted):
        if unchanged is not None and unchanged(tp, offset):
            continue
        read = read_partition(partitions, tp, offset, max_bytes, params,
                              min_one=not params.hard_max_bytes_limit and total == 0,
                              budget=params.max_bytes - total)
        total += len(read.records or b"")
        errors |= read.error != ErrorCode.NONE
        reads.append((tp, read))
    return reads, total, errors


def read_partition(partitions: HostedPartitions, tp: TopicPartition, offset: int, max_bytes: int,
                   params: FetchParams, min_one: bool, budget: int) -> PartitionRead:
    """One partition's read from ``offset``, of at most ``max_bytes`` and what is left of
    the fetch's ``budget`` (beyond them only its first entry, and only if ``min_one``)."""
    replica_id = params.replica_id
    read = PartitionRead()
    p, error = partitions.get_or_error(tp)
    if p is None:
        read.error = error
        return read
    if not p.is_leader and replica_id != DEBUG_CONSUMER:
        read.error = ErrorCode.NOT_LEADER_FOR_PARTITION
        return read
    read.high_watermark = p.high_watermark
    read.log_start_offset = p.log.log_start_offset
    if params.quota is not None and replica_id >= 0 and params.quota.should_throttle(
            tp, in_sync=replica_id in p.isr):
        return read   # KIP-73: no records this time, as Kafka answers a throttled replica
    # Consumers read committed data only; followers (and the debug consumer) up to the LEO.
    max_offset = None if reads_up_to_leo(replica_id) else p.high_watermark
    if offset == (p.log.log_end_offset if max_offset is None else max_offset):
        return read  # caught up: the common case of an idle follower's fetch
    try:
        # v3+ readers treat a lone partial entry as an error ("no complete
        # records"): for them an oversized first entry (of a partition after the
        # first) is not cut but left for a later fetch with budget left, as in Kafka.
        data = p.log.read(offset, min(max_bytes, max(budget, 0)), max_offset,
                          min_one_message=min_one, cut_oversized=params.hard_max_bytes_limit)
    except OffsetOutOfRangeError:
        read.error = ErrorCode.OFFSET_OUT_OF_RANGE
        return read
    # Large reads leave the page cache only for the socket (sendfile);
    # small ones, and data to convert, are copied once.
    read.records = fetch_payload(data.slices) if params.as_stored else data.to_bytes()
    return read
