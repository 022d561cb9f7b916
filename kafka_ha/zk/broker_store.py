"""A broker's own ZooKeeper operations (outside the controller): registration, config
overrides and their change notifications, consumer offsets, the controller's id, and a
leader's ISR writes.

Each method is one znode operation through that znode family's codec
(:mod:`kafka_ha.zk.znodes`, :mod:`kafka_ha.zk.admin_znodes`).  Requests are
sent once, and fail with the project's errors (:mod:`kafka_ha.zk.errors`);
see :mod:`kafka_ha.zk.mapped_client` for why they are not retried here.  A
leader's ISR write is fenced by the partition state's version: it applies
only if nobody (the controller) has written the state since.  Like the
controller's store, it reports outcomes and decides nothing.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable

from kazoo.client import KazooClient

from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.errors import MalformedZnode, ZkNodeExists, ZkNoNode
from kafka_ha.zk.mapped_client import MappedClient, Watch


@dataclass(frozen=True)
class Registration:
    """A broker's ``/brokers/ids/<id>`` as it is in ZooKeeper."""

    info: BrokerInfo | None  # None if its data is malformed
    owner_session: int  # the session whose ephemeral node it is
    version: int


@dataclass(frozen=True)
class ConfigChange:
    """One ``/config/changes/config_change_<seq>`` notification."""

    path: str
    topic: str | None  # None for a change to another entity type (clients, users...)
    created_ms: int
    broker: str | None = None   # a broker id or <default>, for a change of broker configs



def read_controller_id(zk) -> int | None:
    """The broker id in ``/controller`` read through ``zk`` (a MappedClient); None if there is
    none; MalformedZnode if unreadable.  The broker's and the admin tools' stores both ask."""
    try:
        data, _ = zk.get(zn.ControllerZNode.PATH)
    except ZkNoNode:
        return None
    return zn.ControllerZNode.decode(data, zn.ControllerZNode.PATH)


def read_config(zk, codec, entity: str | int) -> dict[str, str]:
    """The config znode of ``entity`` that ``codec`` (``TopicConfigZNode``: a topic,
    ``BrokerConfigZNode``: a broker id or ``<default>``) places; no node means no
    overrides.  MalformedZnode if unreadable.  The broker's and the admin stores both ask."""
    path = codec.path(entity)
    try:
        data, _ = zk.get(path)
    except ZkNoNode:
        return {}
    return codec.decode(data, path)

class BrokerStore:
    def __init__(self, client: KazooClient) -> None:
        self.zk = MappedClient(client)

    # ---- the session ---------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        """The current session's id; None while disconnected."""
        return self.zk.session_id

    @property
    def connected(self) -> bool:
        return self.zk.connected

    def on_connected(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (which must not block) whenever the client (re)connects."""
        self.zk.on_connected(callback)

    # ---- registration ----------------------------------------------------------

    def ensure_persistent_paths(self) -> None:
        """Create the paths a broker expects at start-up, as Kafka does, if missing."""
        for path in zn.PERSISTENT_PATHS:
            self.zk.ensure_path(path)

    def cluster_id(self) -> str:
        """``/cluster/id``, created with a new id if absent (the first broker of a cluster
        does it, as Kafka's do); a broker that loses the creation race reads the winner's.
        MalformedZnode if unreadable (it is never overwritten)."""
        path = zn.ClusterIdZNode.PATH
        try:
            data, _ = self.zk.get(path)
        except ZkNoNode:
            try:
                self.zk.create(path, zn.ClusterIdZNode.encode(zn.ClusterIdZNode.generate()),
                               makepath=True)
            except ZkNodeExists:
                pass
            data, _ = self.zk.get(path)
        return zn.ClusterIdZNode.decode(data, path)

    def create_registration(self, info: BrokerInfo) -> None:
        """Create the ephemeral ``/brokers/ids/<id>``; ZkNodeExists if it exists."""
        self.zk.create(zn.BrokerIdZNode.path(info.broker_id), zn.BrokerIdZNode.encode(info),
                       ephemeral=True)

    def registration(self, broker_id: int) -> Registration | None:
        """The registration of ``broker_id``; None if there is none."""
        path = zn.BrokerIdZNode.path(broker_id)
        try:
            data, stat = self.zk.get(path)
        except ZkNoNode:
            return None
        try:
            info: BrokerInfo | None = zn.BrokerIdZNode.decode(data, path, czxid=stat.czxid)
        except MalformedZnode:
            info = None
        return Registration(info, stat.ephemeralOwner, stat.version)

    def delete_registration(self, broker_id: int, version: int) -> None:
        """Delete it if still at ``version`` (ZkBadVersion if not, ZkNoNode if gone)."""
        self.zk.delete(zn.BrokerIdZNode.path(broker_id), version=version)

    def watch_registration(self, broker_id: int, watch: Watch) -> bool:
        """Set ``watch`` on the registration (it fires on creation too); True if it exists."""
        return self.zk.exists(zn.BrokerIdZNode.path(broker_id), watch=watch) is not None

    # ---- topic config overrides and their change notifications -----------------

    def topic_config(self, topic: str) -> dict[str, str]:
        """``/config/topics/<t>``; no node means no overrides.  MalformedZnode if unreadable."""
        return read_config(self.zk, azn.TopicConfigZNode, topic)

    def broker_config(self, entity: str | int) -> dict[str, str]:
        """``/config/brokers/<id>`` or ``<default>`` (KIP-226); no node means no overrides.
        MalformedZnode if unreadable."""
        return read_config(self.zk, azn.BrokerConfigZNode, entity)

    def config_changes(self, watch: Watch) -> list[str]:
        """Names of the pending ``config_change_`` notifications, setting a child watch."""
        return self.zk.get_children(azn.ConfigChangeZNode.PATH, watch=watch)

    def read_config_changes(self, names: Iterable[str]) -> list[ConfigChange | MalformedZnode]:
        """The notifications named (in one batched read), or the error of each malformed
        one; those gone meanwhile are left out."""
        paths = [f"{azn.ConfigChangeZNode.PATH}/{name}" for name in names]
        out: list[ConfigChange | MalformedZnode] = []
        for path, got in self.zk.get_many(paths).items():
            if got is None:
                continue
            data, stat = got
            try:
                kind, name = azn.ConfigChangeZNode.decode_entity(data, path)
                out.append(ConfigChange(path, name if kind == "topics" else None, stat.ctime,
                                        name if kind == "brokers" else None))
            except MalformedZnode as e:
                out.append(e)
        return out

    def delete_config_change(self, path: str) -> None:
        self.zk.delete(path)

    # ---- consumer offsets (the 0.8 layout) ----------------------------------------

    def commit_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Write the group's offset, creating its node (and parents) on the first commit.

        ValueError, before any request, for a name that cannot be a znode or a bad offset.
        """
        path = azn.ConsumerOffsetZNode.path(group, topic, partition)
        data = azn.ConsumerOffsetZNode.encode(offset)
        try:
            self.zk.set(path, data)
        except ZkNoNode:
            self.zk.create(path, data, makepath=True)

    def committed_offsets(self, group: str, partitions: Iterable[tuple[str, int]]
                          ) -> dict[tuple[str, int], int | MalformedZnode | None]:
        """Committed offsets by (topic, partition), in one batched read: None where none
        was committed, the error where the node is malformed.

        ValueError, before any request, for a name that cannot be a znode.
        """
        paths = {azn.ConsumerOffsetZNode.path(group, t, p): (t, p) for t, p in partitions}
        out: dict[tuple[str, int], int | MalformedZnode | None] = {}
        for path, got in self.zk.get_many(paths).items():
            if got is None:
                out[paths[path]] = None
                continue
            try:
                out[paths[path]] = azn.ConsumerOffsetZNode.decode(got[0], path)
            except MalformedZnode as e:
                out[paths[path]] = e
        return out

    # ---- the controller ------------------------------------------------------------

    def controller_id(self) -> int | None:
        """The broker id in ``/controller``; None if there is none.  MalformedZnode if unreadable."""
        return read_controller_id(self.zk)

    def active_controller(self) -> tuple[int | None, int]:
        """(``/controller``'s broker id or None, ``/controller_epoch`` or 0), read in one round.

        A broker confirms a higher controller epoch with this before obeying it
        (``broker/controller_requests.py``); a malformed znode counts as absent.
        """
        got = self.zk.get_many([zn.ControllerZNode.PATH, zn.ControllerEpochZNode.PATH])
        controller_read, epoch_read = got[zn.ControllerZNode.PATH], got[zn.ControllerEpochZNode.PATH]
        try:
            controller = None if controller_read is None else zn.ControllerZNode.decode(controller_read[0])
        except MalformedZnode:
            controller = None
        try:
            epoch = 0 if epoch_read is None else zn.ControllerEpochZNode.decode(epoch_read[0])
        except MalformedZnode:
            epoch = 0
        return controller, epoch

    # ---- a leader's ISR changes ----------------------------------------------------

    def partition_state(self, tp: TopicPartition) -> LeaderAndIsr:
        """The state znode of ``tp`` with its version (ZkNoNode, MalformedZnode)."""
        path = zn.TopicPartitionStateZNode.path(*tp)
        data, stat = self.zk.get(path)
        return zn.TopicPartitionStateZNode.decode(data, path, zk_version=stat.version)

    def write_partition_state(self, tp: TopicPartition, state: LeaderAndIsr, version: int) -> int:
        """Rewrite the state of ``tp`` if it is still at ``version``; its new version.

        ZkBadVersion if someone (the controller) wrote it since.
        """
        stat = self.zk.set(zn.TopicPartitionStateZNode.path(*tp),
                           zn.TopicPartitionStateZNode.encode(state), version=version)
        return stat.version

    def notify_isr_change(self, partitions: Iterable[TopicPartition]) -> str:
        """Create an ``isr_change_<seq>`` notification for the controller; its path."""
        return self.zk.create(azn.IsrChangeNotificationZNode.PREFIX,
                              azn.IsrChangeNotificationZNode.encode(partitions),
                              sequence=True, makepath=True)
