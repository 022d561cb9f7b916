"""What a new topic or a partition increase will be, decided before anything is written.

Pure functions shared by ``kafka-topics.sh --zookeeper`` (:mod:`.topics_command`) and
the controller broker's CreateTopics / CreatePartitions handlers
(:mod:`kafka_ha.broker.topic_admin_apis`), so that both refuse the same input with
the same message.  Each refusal is an :class:`AdminOperationError` subclass, or a
:class:`ConfigError` for a bad topic config, or :class:`InvalidTopicName`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka_ha.admin.assignment import (
    AdminOperationError, InvalidPartitions, InvalidReplicaAssignment, assign_replicas,
    validate_assignment)
from kafka_ha.config import validate_topic_config
from kafka_ha.model import TopicAssignment
from kafka_ha.zk.znodes import validate_topic_name

Assignment = dict[int, tuple[int, ...]]
# A topic's assignment is one znode, and ZooKeeper refuses a znode over 1 MB (jute.maxbuffer);
# about 100k partitions of 3 replicas fit.  A bigger count is refused before the assignment is
# even built, so that a request for 2**31 partitions cannot stall or exhaust the broker.
MAX_PARTITIONS = 100_000


def _check_count(partitions: int) -> None:
    if partitions > MAX_PARTITIONS:
        raise InvalidPartitions(f"Number of partitions {partitions} is more than one topic's "
                                f"assignment znode holds (at most {MAX_PARTITIONS})")


class InvalidTopicName(AdminOperationError):
    pass


def check_topic_name(topic: str) -> None:
    """Kafka's topic-name rules (:func:`validate_topic_name`), as an InvalidTopicName.

    >>> check_topic_name("a b")
    Traceback (most recent call last):
    ...
    kafka_ha.admin.topic_plans.InvalidTopicName: Topic name "a b" is illegal, it contains \
a character other than ASCII alphanumerics, '.', '_' and '-'
    """
    try:
        validate_topic_name(topic)
    except ValueError as e:
        raise InvalidTopicName(str(e)) from None


def plan_new_topic(topic: str, partitions: int | None, replication_factor: int | None,
                   assignment: Assignment | None, brokers: Sequence[int],
                   known_brokers: set[int] | None = None) -> Assignment:
    """The new topic's assignment: ``assignment`` checked, or a round robin over ``brokers``.

    >>> plan_new_topic("t", 2, 2, None, [1, 2, 3])
    {0: (1, 2), 1: (2, 3)}
    >>> plan_new_topic("t", None, None, {0: (3, 1)}, [1, 2, 3], known_brokers={1, 2, 3})
    {0: (3, 1)}
    >>> plan_new_topic("t", 1, 4, None, [1, 2, 3])
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.InvalidReplicationFactor: replication factor: 4 larger than available brokers: 3
    >>> plan_new_topic("t", 2**31 - 1, 1, None, [1])
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.InvalidPartitions: Number of partitions 2147483647 is more than one \
topic's assignment znode holds (at most 100000)
    """
    check_topic_name(topic)
    _check_count(len(assignment) if assignment is not None else partitions or 0)
    if assignment is not None:
        validate_assignment(assignment, 0, known_brokers)
        return dict(assignment)
    return assign_replicas(brokers if isinstance(brokers, Mapping) else list(brokers),
                           partitions if partitions is not None else 0,
                           replication_factor if replication_factor is not None else 0)


def checked_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """The overrides as given, once :func:`validate_topic_config` accepts them (ConfigError if not).

    >>> checked_configs({"retention.ms": "1000"})
    {'retention.ms': '1000'}
    """
    validate_topic_config(dict(configs))
    return dict(configs)


def plan_added_partitions(current: TopicAssignment, count: int,
                          assignment: Sequence[tuple[int, ...]] | None, brokers: Sequence[int],
                          known_brokers: set[int] | None = None) -> Assignment:
    """The partitions to add so that ``current``'s topic has ``count`` in all.

    >>> t = TopicAssignment("t", {0: (1, 2), 1: (2, 3)})
    >>> plan_added_partitions(t, 3, None, [1, 2, 3])
    {2: (3, 1)}
    >>> plan_added_partitions(t, 4, [(1, 3)], [1, 2, 3])
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.InvalidReplicaAssignment: Increasing the number of partitions by 2 but 1 assignments provided.
    >>> plan_added_partitions(t, 2, None, [1, 2, 3])
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.InvalidPartitions: The number of partitions for a topic can only be increased: topic t has 2 partitions, 2 requested
    """
    existing = len(current.partitions)
    _check_count(count)
    if count <= existing:
        raise InvalidPartitions(f"The number of partitions for a topic can only be increased: "
                                f"topic {current.topic} has {existing} partitions, {count} requested")
    rf = len(current.partitions[min(current.partitions)])
    if assignment is None:
        return assign_replicas(brokers if isinstance(brokers, Mapping) else list(brokers),
                               count - existing, rf, existing)
    if len(assignment) != count - existing:
        raise InvalidReplicaAssignment(f"Increasing the number of partitions by {count - existing} "
                                       f"but {len(assignment)} assignments provided.")
    new = {existing + i: tuple(replicas) for i, replicas in enumerate(assignment)}
    validate_assignment(new, existing, known_brokers)
    if len(new[existing]) != rf:
        raise InvalidReplicaAssignment(f"Inconsistent replication factor between partitions: the "
                                       f"topic has {rf} replicas per partition, the new ones "
                                       f"{len(new[existing])}")
    return new
