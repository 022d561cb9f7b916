"""This broker's partitions as Produce, Fetch and the offset requests find them.

A partition that a request names may not be here: it never was (the client's
metadata is stale, or the topic does not exist), or it just left (StopReplica,
a topic deletion).  The answer tells the two apart with the cluster metadata, as
Kafka's ReplicaManager.getPartitionOrError does: NOT_LEADER_FOR_PARTITION if the
metadata knows the partition, so that the client refreshes its metadata and
retries elsewhere, else UNKNOWN_TOPIC_OR_PARTITION (also for a partition number
beyond an existing topic's).

A partition the metadata already names this broker the leader of, at a newer leader
epoch than its replica here has taken, is a leadership on its way: the controller
sends UpdateMetadata before LeaderAndIsr, so that clients learn new leaders early.
A Produce for it waits for the LeaderAndIsr (``await_leaderships``, at most
``ANNOUNCED_LEADERSHIP_WAIT_S``) instead of bouncing the client: answered
NOT_LEADER_FOR_PARTITION, a producer refreshes its metadata, finds the same
leader and retries with a back-off that grows to a second (librdkafka's
retry.backoff.max.ms), and after a kill -9 at 10k partitions its writes were
accepted 2-3 s after the new leaders were ready.

>>> hosted = HostedPartitions({}, partition_exists=lambda tp: tp == TopicPartition("known", 0))
>>> hosted.get_or_error(TopicPartition("known", 0))
(None, <ErrorCode.NOT_LEADER_FOR_PARTITION: 6>)
>>> hosted.get_or_error(TopicPartition("known", 9))
(None, <ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 3>)
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

from kafka_ha.broker.partition import Partition
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode

# How long a Produce waits for a leadership that the metadata announced (the LeaderAndIsr
# of a failover at 10k partitions was applied 1.5-2 s after the UpdateMetadata).
ANNOUNCED_LEADERSHIP_WAIT_S = 5.0


class HostedPartitions:
    def __init__(self, partitions: dict[TopicPartition, Partition],
                 partition_exists: Callable[[TopicPartition], bool],
                 announced_leader_epoch: Callable[[TopicPartition], int | None] = lambda _tp: None,
                 wait_for_state_change: Callable[[float], None] = time.sleep) -> None:
        """``announced_leader_epoch(tp)``: the leader epoch at which the cluster metadata
        names this broker tp's leader, else None; ``wait_for_state_change(timeout_s)``
        returns when the next LeaderAndIsr or StopReplica has been applied, or after the
        timeout."""
        # The replica manager's own dict, not a copy: LeaderAndIsr and StopReplica
        # add and remove partitions while requests are served.
        self._partitions = partitions
        self._partition_exists = partition_exists
        self._announced_leader_epoch = announced_leader_epoch
        self._wait_for_state_change = wait_for_state_change

    def get(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def get_or_error(self, tp: TopicPartition) -> tuple[Partition | None, int]:
        """The partition and NONE, or None and the error for one not hosted here."""
        p = self._partitions.get(tp)
        if p is None:
            return None, self.not_hosted_error(tp)
        return p, ErrorCode.NONE

    def not_hosted_error(self, tp: TopicPartition) -> int:
        """The error for a partition this broker has no replica of (see the module docstring)."""
        known = self._partition_exists(tp)
        return ErrorCode.NOT_LEADER_FOR_PARTITION if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def leadership_on_its_way(self, tp: TopicPartition) -> bool:
        """The metadata names this broker tp's leader at a newer leader epoch than the
        replica here has taken (or the replica does not exist yet)."""
        epoch = self._announced_leader_epoch(tp)
        if epoch is None:
            return False
        p = self._partitions.get(tp)
        return p is None or p.leader_epoch < epoch

    def await_leaderships(self, tps: Iterable[TopicPartition]) -> None:
        """Wait until none of ``tps`` is a leadership on its way, or
        ``ANNOUNCED_LEADERSHIP_WAIT_S`` have passed."""
        waiting = [tp for tp in tps if self.leadership_on_its_way(tp)]
        deadline = time.monotonic() + ANNOUNCED_LEADERSHIP_WAIT_S
        while waiting and (left := deadline - time.monotonic()) > 0:
            self._wait_for_state_change(left)
            waiting = [tp for tp in waiting if self.leadership_on_its_way(tp)]
