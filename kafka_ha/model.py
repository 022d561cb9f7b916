"""Immutable values shared by the controller, the brokers and the tools.

Versions travel with the data: a value read from ZooKeeper carries the stat
version it was read at (``zk_version``) so that the next write can be made
conditional on it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

NO_LEADER = -1
# UpdateMetadata uses leader -2 for partitions of a topic being deleted.
LEADER_DURING_DELETE = -2


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        # Kafka <= 1.0 prints partitions as [topic,partition] in logs and tools.
        return f"[{self.topic},{self.partition}]"


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """The content of ``/brokers/topics/<t>/partitions/<p>/state`` plus its version."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        # The constructor, not dataclasses.replace: this runs once per partition write.
        return LeaderAndIsr(self.leader, self.leader_epoch, self.isr, self.controller_epoch, zk_version)

    def same_content(self, other: LeaderAndIsr) -> bool:
        """Equal apart from the znode version (KAFKA-1382's check)."""
        return (self.leader, self.leader_epoch, self.isr, self.controller_epoch) == (
            other.leader, other.leader_epoch, other.isr, other.controller_epoch)

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker as registered in ``/brokers/ids/<id>``.

    ``epoch`` is the registration znode's czxid (KIP-380): a broker that
    re-registered in the meantime has a larger one.
    """

    broker_id: int
    host: str
    port: int
    jmx_port: int = -1
    timestamp_ms: int = 0
    endpoints: tuple[str, ...] = ()
    rack: str | None = None
    epoch: int = -1

    @property
    def endpoint(self) -> BrokerEndpoint:
        return BrokerEndpoint(self.broker_id, self.host, self.port)


@dataclass(frozen=True, slots=True)
class PartitionStateInfo:
    """One partition entry of LeaderAndIsr / UpdateMetadata requests."""

    tp: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]

    def describe(self) -> str:
        """Kafka's LeaderIsrAndControllerEpoch text, used by both ends of the state-change log."""
        return (f"(Leader:{self.leader},ISR:{','.join(map(str, self.isr))},"
                f"LeaderEpoch:{self.leader_epoch},ControllerEpoch:{self.controller_epoch})")

    @classmethod
    def of(cls, tp: TopicPartition, lai: LeaderAndIsr,
           replicas: tuple[int, ...] | list[int]) -> PartitionStateInfo:
        return cls(tp, lai.controller_epoch, lai.leader, lai.leader_epoch,
                   tuple(lai.isr), lai.zk_version, tuple(replicas))


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<t>``: partition id -> replica list in preference order."""

    topic: str
    partitions: dict[int, tuple[int, ...]] = field(default_factory=dict)
    zk_version: int = -1
