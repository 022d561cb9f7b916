"""Assembles the group coordinator for a broker (``KafkaServer`` calls this)."""
from __future__ import annotations

from kafka_ha.broker.group_offsets import GroupOffsets
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.kafka_apis import GroupApis
from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.coordinator.catalog import GroupCatalog
from kafka_ha.coordinator.coordinator import GroupCoordinator
from kafka_ha.coordinator.offset_apis import OffsetApis
from kafka_ha.coordinator.offsets_topic import CreateTopic, OffsetsTopic
from kafka_ha.model import TopicPartition


def start_group_coordinator(config, metadata: MetadataCache, hosted: HostedPartitions,
                            zk_offsets: GroupOffsets,
                            create_topic: CreateTopic) -> tuple[GroupCoordinator, GroupApis]:
    topic = OffsetsTopic(config, metadata, create_topic)
    coordinator: GroupCoordinator | None = None

    def on_unload(group, outcome) -> None:
        if coordinator is not None:
            coordinator.on_unload(group, outcome)
    catalog = GroupCatalog(hosted, topic.partition_count,
                           config["group.initial.rebalance.delay.ms"], on_unload)
    coordinator = GroupCoordinator(config, catalog, topic.locate)

    def partition_exists(name: str, partition: int) -> bool:
        return metadata.partition(TopicPartition(name, partition)) is not None
    offsets = OffsetApis(config, catalog, zk_offsets, partition_exists)
    coordinator.start()
    return coordinator, GroupApis(coordinator, offsets)
