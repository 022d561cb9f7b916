"""``kafka-reassign-partitions.sh --throttle``: replication quotas around a reassignment,
as Kafka's ReassignPartitionsCommand sets and clears them (KIP-73).

``--execute --throttle R`` sets, before the move starts:

- on each topic moved, ``leader.replication.throttled.replicas`` to the partitions'
  current replicas (any of them may lead while the data moves) and
  ``follower.replication.throttled.replicas`` to the replicas being added (the ones
  that copy), both as ``partition:broker`` lists;
- on every broker of the current or the new replicas,
  ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate``
  to R bytes/s (dynamic broker configs, ``/config/brokers/<id>``).

``--verify``, once no partition is still moving, removes those two rates from every
live broker and the two replica lists from the topics (``Throttle was removed.``);
``--cancel`` does the same unless ``--preserve-throttles``.  The changes go through
ZooKeeper (``--zookeeper``) or the brokers (``--bootstrap-server``): :class:`ZkTarget`
and :class:`BootstrapTarget` are the two ways to read and write the same configs.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kafka_ha.admin.broker_config_changes import change_broker_config
from kafka_ha.admin.configs_bootstrap import alter_broker, alter_topic, broker_overrides, topic_overrides
from kafka_ha.admin.topic_config_changes import change_topic_config
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.client.cluster import ClusterMetadata
from kafka_ha.config import PER_BROKER_ONLY
from kafka_ha.model import TopicPartition

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
RATES = PER_BROKER_ONLY
WARNING = ("Warning: You must run Verify periodically, until the reassignment completes, to "
           "ensure the throttle is removed. You can also alter the throttle by rerunning the "
           "Execute command passing a new value.")

Replicas = Sequence[int]


def throttled_replicas(current: Mapping[TopicPartition, Replicas],
                       proposed: Mapping[TopicPartition, Replicas]) -> dict[str, dict[str, str]]:
    """Per topic, the two throttled-replica lists of the partitions that move.

    >>> throttled_replicas({TopicPartition("t", 0): (1, 2), TopicPartition("t", 1): (2, 3)},
    ...                    {TopicPartition("t", 0): (2, 4), TopicPartition("t", 1): (2, 3)})
    {'t': {'leader.replication.throttled.replicas': '0:1,0:2', \
'follower.replication.throttled.replicas': '0:4'}}
    """
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    for tp, target in proposed.items():
        existing = tuple(current.get(tp, ()))
        if not existing or existing == tuple(target):
            continue
        leader.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in existing)
        follower.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in target
                                                 if b not in existing)
    return {topic: {LEADER_REPLICAS: ",".join(dict.fromkeys(leader[topic])),
                    FOLLOWER_REPLICAS: ",".join(dict.fromkeys(follower.get(topic, [])))}
            for topic in leader}


def involved_brokers(current: Mapping[TopicPartition, Replicas],
                     proposed: Mapping[TopicPartition, Replicas]) -> list[int]:
    """Every broker of the current or the new replicas of the partitions named.

    >>> involved_brokers({TopicPartition("t", 0): (1, 2)}, {TopicPartition("t", 0): (2, 4)})
    [1, 2, 4]
    """
    return sorted({b for tp in proposed for b in (*current.get(tp, ()), *proposed[tp])})


class ZkTarget:
    """Throttle configs through ZooKeeper, the ``--zookeeper`` path."""

    def __init__(self, admin: ZkAdmin) -> None:
        self.admin = admin

    def topic_config(self, topic: str) -> dict[str, str]:
        return self.admin.store.topic_config(topic)

    def set_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        change_topic_config(self.admin, topic, lambda _current: configs)

    def broker_config(self, broker: int) -> dict[str, str]:
        return self.admin.store.broker_config(broker)

    def set_broker_config(self, broker: int, configs: dict[str, str]) -> None:
        change_broker_config(self.admin, str(broker), lambda _current: configs)

    def brokers(self) -> list[int]:
        return self.admin.store.live_broker_ids()


class BootstrapTarget:
    """Throttle configs through the brokers (Describe/AlterConfigs), ``--bootstrap-server``."""

    def __init__(self, cluster: ClusterMetadata) -> None:
        self.cluster = cluster

    def topic_config(self, topic: str) -> dict[str, str]:
        return topic_overrides(self.cluster, topic)

    def set_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        alter_topic(self.cluster, topic, configs)

    def broker_config(self, broker: int) -> dict[str, str]:
        return broker_overrides(self.cluster, str(broker))

    def set_broker_config(self, broker: int, configs: dict[str, str]) -> None:
        alter_broker(self.cluster, str(broker), configs)

    def brokers(self) -> list[int]:
        return sorted(self.cluster.refresh().brokers)


def set_rates(target, brokers: Iterable[int], rate: int) -> None:
    for broker in brokers:
        current = target.broker_config(broker)
        target.set_broker_config(broker, {**current, **{name: str(rate) for name in RATES}})


def apply_throttle(target, current: Mapping[TopicPartition, Replicas],
                   proposed: Mapping[TopicPartition, Replicas], rate: int, out) -> None:
    """Set the throttled replicas of the moving partitions, then the rates of their brokers."""
    for topic, lists in throttled_replicas(current, proposed).items():
        target.set_topic_config(topic, {**target.topic_config(topic), **lists})
    set_rates(target, involved_brokers(current, proposed), rate)
    print(f"The inter-broker throttle limit was set to {rate} B/s", file=out)


def remove_throttle(target, topics: Iterable[str], out) -> bool:
    """Remove the rates from every live broker and the replica lists from ``topics``;
    True (and ``Throttle was removed.``) if there was anything to remove."""
    changed = False
    for broker in target.brokers():
        configs = target.broker_config(broker)
        if any(name in configs for name in RATES):
            target.set_broker_config(broker, {k: v for k, v in configs.items() if k not in RATES})
            changed = True
    for topic in dict.fromkeys(topics):
        configs = target.topic_config(topic)
        if LEADER_REPLICAS in configs or FOLLOWER_REPLICAS in configs:
            target.set_topic_config(topic, {k: v for k, v in configs.items()
                                            if k not in (LEADER_REPLICAS, FOLLOWER_REPLICAS)})
            changed = True
    if changed:
        print("Throttle was removed.", file=out)
    return changed
