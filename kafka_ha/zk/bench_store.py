"""The controller benchmark's ZooKeeper operations: an admin tool's, plus the pipelined
writes it needs to load a cluster fast and to measure the floor.

The floor is what ZooKeeper itself costs: the same state znodes the
controller rewrote, rewritten unchanged, conditionally, in pipelined multis
of 1,000 ops, the shape of the controller's own writes without its decisions.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafka_ha.model import TopicAssignment, TopicPartition
from kafka_ha.zk import znodes as zn
from kafka_ha.zk.admin_store import AdminStore
from kafka_ha.zk.errors import ZkNoNode, translated
from kafka_ha.zk.mapped_client import Watch

MULTI_CHUNK = 1000


@dataclass(frozen=True)
class StateSnapshot:
    """State znodes as read: path -> (data, version)."""

    states: dict[str, tuple[bytes, int]]


class BenchStore(AdminStore):
    def create_assignments(self, assignments: Iterable[TopicAssignment]) -> None:
        """Create every ``/brokers/topics/<t>`` at once (pipelined), without configs."""
        with translated():
            pending = [self.zk.client.create_async(zn.TopicZNode.path(a.topic),
                                                   zn.TopicZNode.encode(a))
                       for a in assignments]
            for result in pending:
                result.get()

    def watch_registration(self, broker_id: int, watch: Watch) -> bool:
        """Set ``watch`` on ``/brokers/ids/<id>``; True if it exists."""
        return self.zk.exists(zn.BrokerIdZNode.path(broker_id), watch=watch) is not None

    def snapshot_states(self, partitions: Iterable[TopicPartition]) -> StateSnapshot:
        """The state znodes of ``partitions`` (all must exist), in one batched read."""
        paths = [zn.TopicPartitionStateZNode.path(*tp) for tp in partitions]
        states = {}
        for path, got in self.zk.get_many(paths).items():
            if got is None:
                raise ZkNoNode(f"{path} does not exist")
            states[path] = (got[0], got[1].version)
        return StateSnapshot(states)

    def rewrite_unchanged(self, snapshot: StateSnapshot) -> None:
        """Rewrite each state znode with the data read, at the version read, in pipelined
        multis of 1,000; ZkError if any op is refused (someone wrote in between)."""
        items = list(snapshot.states.items())
        with translated():
            pending = []
            for i in range(0, len(items), MULTI_CHUNK):
                txn = self.zk.client.transaction()
                for path, (data, version) in items[i:i + MULTI_CHUNK]:
                    txn.set_data(path, data, version=version)
                pending.append(txn.commit_async())
            for result in pending:
                refused = [r for r in result.get() if isinstance(r, Exception)]
                if refused:
                    raise refused[0]
