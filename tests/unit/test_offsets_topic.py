"""__consumer_offsets is created on first use with its own settings, and only once
enough brokers are alive for its replication factor."""
from kafka_ha.coordinator.offsets_topic import OffsetsTopic
from kafka_ha.model import BrokerEndpoint, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.errors import ErrorCode


class Metadata:
    def __init__(self, brokers):
        self.brokers = {b: BrokerEndpoint(b, "h", 9000 + b) for b in brokers}
        self.partitions = {}


CONFIG = {"offsets.topic.num.partitions": 5, "offsets.topic.replication.factor": 3,
          "offsets.topic.segment.bytes": 104857600}


def test_not_created_with_fewer_live_brokers_than_its_replication_factor(caplog):
    created = []
    topic = OffsetsTopic(CONFIG, Metadata([1, 2]), lambda *a: created.append(a))
    assert topic.locate(0) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
    assert created == []
    assert "does not meet the required replication factor '3'" in caplog.text


def test_created_compacted_with_the_configured_partitions_then_located():
    created = []
    metadata = Metadata([1, 2, 3])
    topic = OffsetsTopic(CONFIG, metadata, lambda *a: created.append(a))
    assert topic.partition_count() == 5
    assert topic.locate(2) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
    [(name, replicas, configs)] = created
    assert name == "__consumer_offsets"
    assert configs == {"cleanup.policy": "compact", "segment.bytes": "104857600"}
    assert len(replicas) == 5 and all(len(r) == 3 for r in replicas.values())
    state = PartitionStateInfo(TopicPartition(name, 2), leader=3, leader_epoch=0, isr=(3, 1, 2),
                               zk_version=0, controller_epoch=1, replicas=(3, 1, 2))
    metadata.partitions[name] = {2: state}
    assert topic.locate(2) == (ErrorCode.NONE, metadata.brokers[3])
    assert topic.partition_count() == 1   # the topic as it exists wins over the config
