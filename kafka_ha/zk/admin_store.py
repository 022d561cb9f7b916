"""The admin tools' ZooKeeper operations: reading cluster state and writing intent znodes.

Admin tools write requests (a topic, a config change, a reassignment, a
preferred election, a deletion marker) and read state; they never write
partition state, which belongs to the controller and the leaders.  Each
method is one znode operation through that znode family's codec; requests
are sent once and fail with the project's errors (:mod:`kafka_ha.zk.errors`).
Kafka's AdminUtils, which combines these into the tools' operations, is
:class:`kafka_ha.admin.zk_admin.ZkAdmin`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kazoo.client import KazooClient

from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.broker_store import read_config, read_controller_id
from kafka_ha.zk.client import connect
from kafka_ha.zk.errors import (
    MalformedZnode, ZkBadVersion, ZkError, ZkNodeExists, ZkNoNode, ZkRolledBack, translated)
from kafka_ha.zk.mapped_client import MappedClient

CREATE_ATTEMPTS = 5  # of the create multi, while a config node keeps changing underneath


class AdminStore:
    """Over an already connected client (the broker's), or one of its own from
    :meth:`connect`, which :meth:`close` (or leaving its ``with`` block) closes."""

    def __init__(self, client: KazooClient) -> None:
        self.zk = MappedClient(client)
        self._owns_client = False

    @classmethod
    def connect(cls, connect_string: str, session_timeout_ms: int, connection_timeout_ms: int,
                create_chroot: bool = True) -> AdminStore:
        """A store on a new client (threads, not gevent); ZkTimeout if ZooKeeper cannot be reached."""
        with translated():
            client = connect(connect_string, session_timeout_ms, connection_timeout_ms,
                             use_gevent=False, create_chroot=create_chroot)
        store = cls(client)
        store._owns_client = True
        return store

    def close(self) -> None:
        if self._owns_client:
            self.zk.close()

    def __enter__(self) -> AdminStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- brokers and the controller ------------------------------------------------

    def live_broker_ids(self) -> list[int]:
        try:
            children = self.zk.get_children(zn.BROKER_IDS_PATH)
        except ZkNoNode:
            return []
        return sorted(int(b) for b in children if b.isdigit())

    def registered_brokers(self) -> list[BrokerInfo]:
        """The registrations under ``/brokers/ids`` in id order, in one batched read.

        MalformedZnode if one cannot be read.
        """
        paths = [zn.BrokerIdZNode.path(b) for b in self.live_broker_ids()]
        brokers = []
        for path, got in self.zk.get_many(paths).items():
            if got is not None:  # None: gone since the listing
                brokers.append(zn.BrokerIdZNode.decode(got[0], path, czxid=got[1].czxid))
        return brokers

    def live_broker_racks(self) -> dict[int, str | None]:
        """Each registered broker's rack (``broker.rack``; None: none), for rack-aware
        assignment.  An unreadable registration makes every rack unknown (plain round
        robin) rather than fail the caller."""
        try:
            return {b.broker_id: b.rack for b in self.registered_brokers()}
        except MalformedZnode:
            return {b: None for b in self.live_broker_ids()}

    def controller_id(self) -> int | None:
        """The broker id in ``/controller``; None if there is none.  MalformedZnode if unreadable."""
        return read_controller_id(self.zk)

    # ---- topics ------------------------------------------------------------------------

    def topics(self) -> list[str]:
        return self._children(zn.BROKER_TOPICS_PATH)

    def topics_marked_for_deletion(self) -> list[str]:
        return self._children(zn.DELETE_TOPICS_PATH)

    def topics_with_config(self) -> list[str]:
        """Children of ``/config/topics`` (Kafka's ``getAllEntitiesWithConfig``)."""
        return self._children(zn.CONFIG_TOPICS_PATH)

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except ZkNoNode:
            return []

    def topic_exists(self, topic: str) -> bool:
        return self.zk.exists(zn.TopicZNode.path(topic)) is not None

    def marked_for_deletion(self, topic: str) -> bool:
        return self.zk.exists(azn.DeleteTopicZNode.path(topic)) is not None

    def assignment(self, topic: str) -> TopicAssignment | None:
        """The topic's assignment with its version; None if there is no such topic."""
        path = zn.TopicZNode.path(topic)
        try:
            data, stat = self.zk.get(path)
        except ZkNoNode:
            return None
        return zn.TopicZNode.decode(data, path, zk_version=stat.version)

    def topic_config(self, topic: str) -> dict[str, str]:
        """``/config/topics/<t>``; no node means no overrides."""
        return read_config(self.zk, azn.TopicConfigZNode, topic)

    def partition_states(self, partitions: Iterable[TopicPartition]
                         ) -> dict[TopicPartition, LeaderAndIsr]:
        """States in one batched read; a missing or malformed state is left out."""
        paths = {zn.TopicPartitionStateZNode.path(*tp): tp for tp in partitions}
        out = {}
        for path, got in self.zk.get_many(paths).items():
            if got is None:
                continue
            try:
                out[paths[path]] = zn.TopicPartitionStateZNode.decode(got[0], path, got[1].version)
            except MalformedZnode:
                continue
        return out

    def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str]) -> None:
        """Write the topic's config and assignment in one multi; ZkNodeExists if it exists.

        The multi makes concurrent creates of one name atomic: the loser writes
        nothing.  A config without a topic (left by a tool that writes the two
        apart and died between them) is overwritten, at the version read, so the
        multi is sent again if that config changes underneath.
        """
        topic_path = zn.TopicZNode.path(assignment.topic)
        config_path = azn.TopicConfigZNode.path(assignment.topic)
        assignment_data = zn.TopicZNode.encode(assignment)
        config_data = azn.TopicConfigZNode.encode(config)
        for parent in (zn.BROKER_TOPICS_PATH, zn.CONFIG_TOPICS_PATH):
            self.zk.ensure_path(parent)  # a multi cannot create parents
        for _ in range(CREATE_ATTEMPTS):
            config_stat = self.zk.exists(config_path)
            config_op = (("create", config_path, config_data) if config_stat is None
                         else ("set", config_path, config_data, config_stat.version))
            results = self.zk.multi([("create", topic_path, assignment_data), config_op])
            refused = [r for r in results
                       if isinstance(r, ZkError) and not isinstance(r, ZkRolledBack)]
            if not refused:
                return
            if results[0] is refused[0]:
                raise refused[0]  # ZkNodeExists: another create won
            # The config op was refused: its node changed since we read it.
        raise refused[0]

    def set_assignment(self, assignment: TopicAssignment) -> None:
        """Rewrite the topic's assignment if it is still at ``assignment.zk_version``
        (ZkBadVersion if someone changed it since)."""
        self.zk.set(zn.TopicZNode.path(assignment.topic), zn.TopicZNode.encode(assignment),
                    version=assignment.zk_version)

    # ---- config changes -------------------------------------------------------------

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Write the topic's overrides, creating the node if the topic had none."""
        self._write_config(azn.TopicConfigZNode, topic, config)

    def _write_config(self, codec, entity: str | int, config: Mapping[str, str]) -> None:
        path = codec.path(entity)
        data = codec.encode(config)
        try:
            self.zk.set(path, data)
        except ZkNoNode:
            self.zk.create(path, data, makepath=True)

    def notify_config_change(self, topic: str, entity_type: str = "topics") -> None:
        """Tell the brokers to re-read the topic's overrides (a ``config_change_`` node);
        with ``entity_type="brokers"``, a broker's (``topic``: its id or ``<default>``)."""
        self.zk.create(azn.ConfigChangeZNode.PREFIX, azn.ConfigChangeZNode.encode(topic, entity_type),
                       sequence=True, makepath=True)

    def broker_config(self, entity: str | int) -> dict[str, str]:
        """``/config/brokers/<id>`` or ``<default>``; no node means no overrides."""
        return read_config(self.zk, azn.BrokerConfigZNode, entity)

    def brokers_with_config(self) -> list[str]:
        """Children of ``/config/brokers`` (ids and ``<default>``)."""
        try:
            return sorted(self.zk.get_children(zn.CONFIG_BROKERS_PATH))
        except ZkNoNode:
            return []

    def set_broker_config(self, entity: str | int, config: Mapping[str, str]) -> None:
        """Write a broker's (or the default) dynamic overrides, creating the node if needed."""
        self._write_config(azn.BrokerConfigZNode, entity, config)

    # ---- requests to the controller -------------------------------------------------

    def reassignment(self) -> dict[TopicPartition, tuple[int, ...]] | None:
        """The pending ``/admin/reassign_partitions`` request, None if there is none."""
        try:
            data, _ = self.zk.get(azn.ReassignPartitionsZNode.PATH)
        except ZkNoNode:
            return None
        return azn.ReassignPartitionsZNode.decode(data)

    def create_reassignment(self, reassignment: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Create ``/admin/reassign_partitions``; ZkNodeExists if one is in progress."""
        self.zk.create(azn.ReassignPartitionsZNode.PATH,
                       azn.ReassignPartitionsZNode.encode(reassignment), makepath=True)

    def add_to_reassignment(self, additions: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Merge ``additions`` into ``/admin/reassign_partitions``, creating it if absent.

        The Admin API's way in (KIP-455): unlike the script it may add to a
        reassignment in progress.  Compare-and-set on the node's version, since the
        controller rewrites it as partitions complete; ZkBadVersion/ZkNodeExists
        after the attempts are spent.
        """
        path = azn.ReassignPartitionsZNode.PATH
        for attempt in range(CREATE_ATTEMPTS):
            try:
                data, stat = self.zk.get(path)
            except ZkNoNode:
                try:
                    self.create_reassignment(additions)
                    return
                except ZkNodeExists:
                    if attempt + 1 == CREATE_ATTEMPTS:
                        raise
                    continue
            merged = {**azn.ReassignPartitionsZNode.decode(data), **additions}
            try:
                self.zk.set(path, azn.ReassignPartitionsZNode.encode(merged), version=stat.version)
                return
            except (ZkBadVersion, ZkNoNode):
                if attempt + 1 == CREATE_ATTEMPTS:
                    raise

    def preferred_election_data(self) -> bytes | None:
        """The raw data of ``/admin/preferred_replica_election`` (b"" if empty), None if absent.

        Raw, because it is only shown to the user, and must be shown even if malformed.
        """
        try:
            data, _ = self.zk.get(azn.PreferredReplicaElectionZNode.PATH)
        except ZkNoNode:
            return None
        return data or b""

    def create_preferred_election(self, partitions: Iterable[TopicPartition]) -> None:
        """Create ``/admin/preferred_replica_election``; ZkNodeExists if one is in progress."""
        self.zk.create(azn.PreferredReplicaElectionZNode.PATH,
                       azn.PreferredReplicaElectionZNode.encode(partitions), makepath=True)

    def create_deletion_marker(self, topic: str) -> None:
        """Create ``/admin/delete_topics/<t>``; ZkNodeExists if it is marked already."""
        self.zk.create(azn.DeleteTopicZNode.path(topic), azn.DeleteTopicZNode.encode(),
                       makepath=True)
