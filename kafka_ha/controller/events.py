"""The closed family of controller events.

ZooKeeper watch callbacks and the broker's session listener only put one of
these on the controller's queue; the event loop re-reads ZooKeeper when it
handles them (watches are level-triggered hints, not data).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka_ha.clock import monotonic_ms


@dataclass(frozen=True)
class Startup:
    """The broker has started: register, then try to become controller."""


@dataclass(frozen=True)
class ControllerChange:
    """``/controller`` was created, changed or deleted."""


@dataclass(frozen=True)
class BrokerChange:
    """The children of ``/brokers/ids`` changed."""


@dataclass(frozen=True)
class TopicChange:
    """The children of ``/brokers/topics`` changed."""


@dataclass(frozen=True)
class PartitionModifications:
    """The assignment znode of one topic changed (partitions added)."""

    topic: str


@dataclass(frozen=True)
class IsrChangeNotification:
    """Leaders changed ISRs: children of ``/isr_change_notification`` appeared."""


@dataclass(frozen=True)
class PreferredReplicaElection:
    """``/admin/preferred_replica_election`` was created or changed."""


@dataclass(frozen=True)
class AutoRebalance:
    """Timer: time to check leader imbalance."""


@dataclass(frozen=True)
class TopicDeletion:
    """The children of ``/admin/delete_topics`` changed."""


@dataclass(frozen=True)
class PartitionReassignment:
    """``/admin/reassign_partitions`` was created or changed."""


@dataclass(frozen=True)
class StopReplicaResult:
    """A broker answered StopReplica(delete) for a topic being deleted.

    ``controller_epoch`` is that of the term which sent the request: an answer that
    outlives its term is ignored.
    """

    topic: str
    broker: int
    response: Any
    controller_epoch: int


@dataclass(frozen=True)
class ControlledShutdownRequest:
    """A broker asked to shut down; ``reply`` (an AsyncResult) gets the response body."""

    broker_id: int
    reply: Any
    # The sender's broker epoch (v2, KIP-380); -1 when the request names none (v0 and v1).
    broker_epoch: int = -1
    queued_ms: int = field(default_factory=monotonic_ms)   # for the handling line's timings


@dataclass(frozen=True)
class TopicConfigChange:
    """A topic's config changed (``/config/changes``): re-read its overrides."""

    topic: str


@dataclass(frozen=True)
class SessionExpired:
    """The ZooKeeper session is gone: ephemerals and watches with it."""


@dataclass(frozen=True)
class NewSession:
    """Connected again on a new session: re-register and re-elect (KAFKA-1387/7165)."""


@dataclass(frozen=True)
class Shutdown:
    """The broker is stopping: resign and leave the loop."""
