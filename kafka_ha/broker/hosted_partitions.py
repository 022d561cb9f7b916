"""This broker's partitions as Produce, Fetch and the offset requests find them.

A partition that a request names may not be here: it never was (the client's
metadata is stale, or the topic does not exist), or it just left (StopReplica,
a topic deletion).  The answer tells the two apart with the cluster metadata, as
Kafka's ReplicaManager.getPartitionOrError does: NOT_LEADER_FOR_PARTITION if the
metadata knows the partition, so that the client refreshes its metadata and
retries elsewhere, else UNKNOWN_TOPIC_OR_PARTITION (also for a partition number
beyond an existing topic's).

>>> hosted = HostedPartitions({}, partition_exists=lambda tp: tp == TopicPartition("known", 0))
>>> hosted.get_or_error(TopicPartition("known", 0))
(None, <ErrorCode.NOT_LEADER_FOR_PARTITION: 6>)
>>> hosted.get_or_error(TopicPartition("known", 9))
(None, <ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 3>)
"""
from __future__ import annotations

from typing import Callable

from kafka_ha.broker.partition import Partition
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode


class HostedPartitions:
    def __init__(self, partitions: dict[TopicPartition, Partition],
                 partition_exists: Callable[[TopicPartition], bool]) -> None:
        # The replica manager's own dict, not a copy: LeaderAndIsr and StopReplica
        # add and remove partitions while requests are served.
        self._partitions = partitions
        self._partition_exists = partition_exists

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
