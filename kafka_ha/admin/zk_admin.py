"""ZooKeeper operations of the admin tools (Kafka's AdminUtils, ZooKeeper side only).

Admin tools write intent znodes and read state; they never write partition
state, which belongs to the controller and the leaders.
"""
from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError, RolledBackError, RuntimeInconsistency

from kafka_ha.model import LeaderAndIsr, TopicAssignment, TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.client import connect
from kafka_ha.zk.multi_read import get_many
from kafka_ha.zk.errors import MalformedZnode

CLI_SESSION_TIMEOUT_MS = 30000
CREATE_ATTEMPTS = 5  # of the create multi, while a config node keeps changing underneath


class ZkAdmin:
    """Admin operations; a context manager that connects to ``connect_string``,
    or a plain object over an already connected ``client`` (the broker's)."""

    def __init__(self, connect_string: str = "", client: KazooClient | None = None) -> None:
        self.connect = connect_string
        self.zk: KazooClient | None = client

    def __enter__(self) -> ZkAdmin:
        try:
            self.zk = connect(self.connect, CLI_SESSION_TIMEOUT_MS, 10000, use_gevent=False)
        except Exception as e:  # kazoo raises its own timeout type
            raise ConnectionError(f"Unable to connect to zookeeper server within timeout: "
                                  f"{self.connect}: {e}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()

    # ---- reads ------------------------------------------------------------

    def live_broker_ids(self) -> list[int]:
        try:
            return sorted(int(b) for b in self.zk.get_children(zn.BROKER_IDS_PATH) if b.isdigit())
        except NoNodeError:
            return []

    def topics(self) -> list[str]:
        try:
            return sorted(self.zk.get_children(zn.BROKER_TOPICS_PATH))
        except NoNodeError:
            return []

    def topics_marked_for_deletion(self) -> list[str]:
        try:
            return self.zk.get_children(zn.DELETE_TOPICS_PATH)
        except NoNodeError:
            return []

    def assignment(self, topic: str) -> TopicAssignment | None:
        path = zn.TopicZNode.path(topic)
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return None
        return zn.TopicZNode.decode(data, path, zk_version=stat.version)

    def topic_config(self, topic: str) -> dict[str, str]:
        path = azn.TopicConfigZNode.path(topic)
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return {}
        return azn.TopicConfigZNode.decode(data, path)

    def existing_assignment(self, topic: str) -> TopicAssignment | None:
        """Like :meth:`assignment`, but None for a name that cannot be a topic znode.

        Input files may name anything; a name that cannot exist is simply absent.
        """
        try:
            return self.assignment(topic)
        except ValueError as e:
            if isinstance(e, MalformedZnode):
                raise
            return None

    def topics_with_config(self) -> list[str]:
        """Children of ``/config/topics`` (Kafka's ``getAllEntitiesWithConfig``)."""
        try:
            return sorted(self.zk.get_children(zn.CONFIG_TOPICS_PATH))
        except NoNodeError:
            return []

    def reassignment_in_progress(self) -> dict[TopicPartition, tuple[int, ...]] | None:
        """The pending ``/admin/reassign_partitions`` request, None if there is none."""
        try:
            data, _ = self.zk.get(azn.ReassignPartitionsZNode.PATH)
        except NoNodeError:
            return None
        return azn.ReassignPartitionsZNode.decode(data)

    def preferred_election_in_progress(self) -> bytes | None:
        """The raw data of ``/admin/preferred_replica_election`` (b"" if empty), None if absent.

        Raw, because it is only shown to the user, and must be shown even if malformed.
        """
        try:
            data, _ = self.zk.get(azn.PreferredReplicaElectionZNode.PATH)
        except NoNodeError:
            return None
        return data or b""

    def partition_states(self, topic: str, partitions: dict[int, tuple[int, ...]]
                         ) -> dict[int, LeaderAndIsr]:
        """States by partition id; a missing or malformed state is left out."""
        paths = {zn.TopicPartitionStateZNode.path(topic, p): p for p in partitions}
        out = {}
        for path, got in get_many(self.zk, paths).items():
            if got is None:
                continue
            try:
                out[paths[path]] = zn.TopicPartitionStateZNode.decode(got[0], path, got[1].version)
            except MalformedZnode:
                continue
        return out

    # ---- writes -----------------------------------------------------------

    def create_topic(self, topic: str, replicas: dict[int, tuple[int, ...]],
                     configs: dict[str, str]) -> None:
        """Write the config and the assignment in one multi, so the controller, which reacts
        to the assignment, never sees a topic without its config.

        Raises NodeExistsError if the topic exists; refuses a topic still
        being deleted so that deleted data never resurfaces under its name.
        One multi also makes concurrent creates of one name atomic: the loser
        writes nothing.  (Kafka writes the config first, then the assignment,
        so a losing create could leave its config on the winner's topic.)
        """
        topic_path = zn.TopicZNode.path(topic)
        if self.zk.exists(topic_path):
            raise NodeExistsError()
        if self.zk.exists(azn.DeleteTopicZNode.path(topic)):
            raise ValueError(f'Topic "{topic}" is marked for deletion; it cannot be created '
                             f'until the deletion completes.')
        config_path = azn.TopicConfigZNode.path(topic)
        config = azn.TopicConfigZNode.encode(configs)
        assignment = zn.TopicZNode.encode(TopicAssignment(topic, dict(replicas)))
        for parent in (zn.BROKER_TOPICS_PATH, zn.CONFIG_TOPICS_PATH):
            self.zk.ensure_path(parent)  # a multi cannot create parents
        for _ in range(CREATE_ATTEMPTS):
            # A config without a topic (left by a tool that writes the two
            # apart and died between them) is overwritten, at the version read.
            config_stat = self.zk.exists(config_path)
            txn = self.zk.transaction()
            txn.create(topic_path, assignment)
            if config_stat is None:
                txn.create(config_path, config)
            else:
                txn.set_data(config_path, config, version=config_stat.version)
            results = txn.commit()
            refused = [r for r in results if isinstance(r, Exception)
                       and not isinstance(r, (RolledBackError, RuntimeInconsistency))]
            if not refused:
                return
            if results[0] is refused[0]:
                raise refused[0]  # NodeExistsError: another create won
            # The config op was refused: its node changed since we read it.
        raise refused[0]

    def add_partitions(self, current: TopicAssignment, new: dict[int, tuple[int, ...]]) -> None:
        merged = dict(current.partitions)
        merged.update(new)
        self.zk.set(zn.TopicZNode.path(current.topic),
                    zn.TopicZNode.encode(TopicAssignment(current.topic, merged)),
                    version=current.zk_version)

    def change_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        path = azn.TopicConfigZNode.path(topic)
        data = azn.TopicConfigZNode.encode(configs)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            self.zk.create(path, data, makepath=True)
        self.zk.create(azn.ConfigChangeZNode.PREFIX, azn.ConfigChangeZNode.encode(topic),
                       sequence=True, makepath=True)

    def start_reassignment(self, reassignment: dict[TopicPartition, tuple[int, ...]]) -> None:
        """Create ``/admin/reassign_partitions``; NodeExistsError if one is in progress."""
        self.zk.create(azn.ReassignPartitionsZNode.PATH,
                       azn.ReassignPartitionsZNode.encode(reassignment), makepath=True)

    def start_preferred_election(self, partitions: list[TopicPartition]) -> None:
        """Create ``/admin/preferred_replica_election``; NodeExistsError if one is in progress."""
        self.zk.create(azn.PreferredReplicaElectionZNode.PATH,
                       azn.PreferredReplicaElectionZNode.encode(partitions), makepath=True)

    def mark_for_deletion(self, topic: str) -> None:
        self.zk.create(azn.DeleteTopicZNode.path(topic), azn.DeleteTopicZNode.encode(),
                       makepath=True)
