"""``__consumer_offsets``: created on the first FindCoordinator, as Kafka does,
and where each of its partitions is led.

It is created through the normal topic creation path with
``offsets.topic.num.partitions`` partitions, ``offsets.topic.replication.factor``
replicas and ``cleanup.policy=compact`` (only the latest commit per key matters).
With fewer live brokers than the replication factor the topic is not created and
FindCoordinator answers COORDINATOR_NOT_AVAILABLE until enough brokers are up:
an offsets topic created under-replicated would stay so.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from kafka_ha.admin.assignment import AdminOperationError, assign_replicas
from kafka_ha.coordinator.placement import OFFSETS_TOPIC
from kafka_ha.model import BrokerEndpoint
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk.errors import ZkError, ZkNodeExists

log = logging.getLogger(__name__)

TOPIC_CONFIGS = {"cleanup.policy": "compact"}   # plus segment.bytes, from the broker's config

CreateTopic = Callable[[str, dict[int, tuple[int, ...]], dict[str, str]], None]


class OffsetsTopic:
    def __init__(self, config, metadata: Any, create_topic: CreateTopic) -> None:
        """``metadata``: the broker's cluster view (``partitions``, ``brokers``)."""
        self.config = config
        self.metadata = metadata
        self._create_topic = create_topic
        self._creating = False

    def partition_count(self) -> int:
        """The topic's partitions as the cluster has it, else the configured count."""
        return len(self.metadata.partitions.get(OFFSETS_TOPIC) or ()) or \
            self.config["offsets.topic.num.partitions"]

    def locate(self, partition: int) -> tuple[int, BrokerEndpoint | None]:
        """The live leader of ``partition``, creating the topic if it does not exist."""
        partitions = self.metadata.partitions.get(OFFSETS_TOPIC)
        if not partitions:
            self._create()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        state = partitions.get(partition)
        leader = self.metadata.brokers.get(state.leader) if state is not None else None
        if leader is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode.NONE, leader

    def _create(self) -> None:
        if self._creating:
            return
        brokers = sorted(self.metadata.brokers)
        wanted = self.config["offsets.topic.replication.factor"]
        if len(brokers) < wanted:
            log.error("Number of alive brokers '%d' does not meet the required replication "
                      "factor '%d' for the offsets topic (configured via "
                      "'offsets.topic.replication.factor'). This error can be ignored if the "
                      "cluster is starting up and not all brokers are up yet.",
                      len(brokers), wanted)
            return
        self._creating = True
        try:
            replicas = assign_replicas(brokers, self.config["offsets.topic.num.partitions"], wanted)
            # Small segments (Kafka: 100 MB), or a quiet group's commits sit in one
            # active segment, which the cleaner never touches, for a gigabyte or a week.
            configs = dict(TOPIC_CONFIGS, **{
                "segment.bytes": str(self.config["offsets.topic.segment.bytes"])})
            self._create_topic(OFFSETS_TOPIC, replicas, configs)
            log.info("Created the offsets topic %s with %d partitions, replication factor %d",
                     OFFSETS_TOPIC, len(replicas), wanted)
        except ZkNodeExists:
            pass
        except (ValueError, AdminOperationError, ZkError) as e:
            log.warning("Could not create the offsets topic %s: %s", OFFSETS_TOPIC, e)
        finally:
            self._creating = False
