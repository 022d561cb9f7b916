"""What the brokers of a test cluster hold on disk: replica directories, segment bytes,
recovery-point checkpoints.  Reading the files shows what a replica really holds, which
no request to a broker can (a broker answers only up to its high watermark)."""

from kafka_ha.log.checkpoints import OffsetCheckpointFile
from kafka_ha.model import TopicPartition


def partition_dir(cluster, broker, topic, partition=0):
    return cluster.data_dir(broker) / f"{topic}-{partition}"


def topic_dirs(cluster, topic):
    """The directories of every replica of ``topic`` on every broker (left until deleted)."""
    return [d for i in cluster.broker_ids for d in cluster.data_dir(i).glob(f"{topic}-*")]


def segment_bytes(cluster, broker, topic, partition=0):
    """Everything in ``broker``'s segment files of one partition, in offset order."""
    segments = sorted(partition_dir(cluster, broker, topic, partition).glob("*.log"))
    return b"".join(f.read_bytes() for f in segments)


def recovery_point(cluster, broker, topic, partition=0):
    """The recovery point ``broker`` last checkpointed for the partition; None if none."""
    path = cluster.data_dir(broker) / "recovery-point-offset-checkpoint"
    points = OffsetCheckpointFile(str(path)).read() if path.exists() else {}
    return points.get(TopicPartition(topic, partition))
