"""The admin operations that take more than one znode operation (Kafka's AdminUtils).

Each step is a call on the admin store (:class:`kafka_ha.zk.admin_store.AdminStore`),
which the commands also use directly, as ``admin.store``, for single reads and writes.
"""
from __future__ import annotations

from typing import Any

from kafka_ha.model import TopicAssignment
from kafka_ha.zk.admin_store import AdminStore
from kafka_ha.zk.errors import MalformedZnode, ZkNodeExists

CLI_SESSION_TIMEOUT_MS = 30000
CLI_CONNECTION_TIMEOUT_MS = 10000


class ZkAdmin:
    """A context manager that connects to ``connect_string``, or a plain object over an
    already connected ``client`` (the broker's)."""

    def __init__(self, connect_string: str = "", client: Any = None) -> None:
        self.connect = connect_string
        self._store = None if client is None else AdminStore(client)

    @property
    def store(self) -> AdminStore:
        if self._store is None:
            raise RuntimeError("ZkAdmin is not connected: use it in a with block")
        return self._store

    def __enter__(self) -> ZkAdmin:
        try:
            self._store = AdminStore.connect(self.connect, CLI_SESSION_TIMEOUT_MS,
                                             CLI_CONNECTION_TIMEOUT_MS)
        except Exception as e:  # a timeout, or a connect string the client refuses
            raise ConnectionError(f"Unable to connect to zookeeper server within timeout: "
                                  f"{self.connect}: {e}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._store is not None:
            self._store.close()

    def existing_assignment(self, topic: str) -> TopicAssignment | None:
        """The topic's assignment, or None also for a name that cannot be a topic znode.

        Input files may name anything; a name that cannot exist is simply absent.
        """
        try:
            return self.store.assignment(topic)
        except ValueError as e:
            if isinstance(e, MalformedZnode):
                raise
            return None

    def create_topic(self, topic: str, replicas: dict[int, tuple[int, ...]],
                     configs: dict[str, str]) -> None:
        """Create the topic (its config and assignment together); ZkNodeExists if it exists.

        Refuses a topic still being deleted so that deleted data never resurfaces
        under its name.  (Kafka writes the config first, then the assignment, so
        a losing create could leave its config on the winner's topic; the store
        writes both in one multi.)
        """
        if self.store.topic_exists(topic):
            raise ZkNodeExists()
        if self.store.marked_for_deletion(topic):
            raise ValueError(f'Topic "{topic}" is marked for deletion; it cannot be created '
                             f'until the deletion completes.')
        self.store.create_topic(TopicAssignment(topic, dict(replicas)), configs)

    def add_partitions(self, current: TopicAssignment, new: dict[int, tuple[int, ...]]) -> None:
        """Add partitions to the assignment read as ``current``; ZkBadVersion if it changed since."""
        merged = dict(current.partitions)
        merged.update(new)
        self.store.set_assignment(TopicAssignment(current.topic, merged, current.zk_version))

    def change_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        """Replace the topic's overrides and tell the brokers to re-read them."""
        self.store.set_topic_config(topic, configs)
        self.store.notify_config_change(topic)
