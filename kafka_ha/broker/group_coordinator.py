"""The group coordinator (kafka_ha/coordinator) assembled for this broker: its view of
the cluster, its partitions, and the append path its writes take."""
from __future__ import annotations

import time

from kafka_ha.broker import replica_appends
from kafka_ha.broker.group_offsets import GroupOffsets
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.kafka_apis import GroupApis
from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.coordinator.catalog import GroupCatalog
from kafka_ha.coordinator.coordinator import GroupCoordinator
from kafka_ha.coordinator.offset_apis import OffsetApis
from kafka_ha.coordinator.offsets_topic import CreateTopic, OffsetsTopic
from kafka_ha.cooperative import yield_to_io
from kafka_ha.model import TopicPartition


def start_group_coordinator(config, metadata: MetadataCache, hosted: HostedPartitions,
                            zk_offsets: GroupOffsets,
                            create_topic: CreateTopic) -> tuple[GroupCoordinator, GroupApis]:
    topic = OffsetsTopic(config, metadata, create_topic)
    coordinator: GroupCoordinator | None = None

    def append_acks_all(tp: TopicPartition, batch: bytes, timeout_s: float) -> int:
        # A produce with acks=-1: the leader's append, then the wait for the HW.
        deadline = time.monotonic() + timeout_s
        results = replica_appends.append_records(hosted, [(tp, batch)], acks=-1)
        replica_appends.await_replication(hosted, results, deadline)
        return results[tp].error

    def on_unload(group, outcome) -> None:
        if coordinator is not None:
            coordinator.on_unload(group, outcome)
    catalog = GroupCatalog(hosted, topic.partition_count,
                           config["group.initial.rebalance.delay.ms"], on_unload,
                           append_acks_all, yield_to_io)
    coordinator = GroupCoordinator(config, catalog, topic.locate)

    def partition_exists(name: str, partition: int) -> bool:
        return metadata.partition(TopicPartition(name, partition)) is not None
    offsets = OffsetApis(config, catalog, zk_offsets, partition_exists)
    coordinator.start()
    return coordinator, GroupApis(coordinator, offsets)
