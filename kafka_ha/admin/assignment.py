"""Pure replica-assignment rules for creating topics and adding partitions.

Kafka's round robin (AdminUtils.assignReplicasToBrokers with a fixed start and no
shift; docs/design.md §7): over the sorted brokers, partition
i's replica j goes to broker ``(i + j) mod n``; the first replica is the
preferred leader.
"""
from __future__ import annotations

from kafka_ha.zk.admin_znodes import duplicates


class AdminOperationError(ValueError):
    """Bad admin input; the message is Kafka's."""


def assign_replicas(brokers: list[int], partitions: int, replication_factor: int,
                    first_partition: int = 0) -> dict[int, tuple[int, ...]]:
    """Round-robin assignment of ``partitions`` partitions starting at ``first_partition``.

    >>> assign_replicas([3, 1, 2], 3, 3)
    {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}
    >>> assign_replicas([1, 2, 3], 2, 2, first_partition=3)
    {3: (1, 2), 4: (2, 3)}
    >>> assign_replicas([1, 2], 1, 3)
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.AdminOperationError: replication factor: 3 larger than available brokers: 2
    """
    if partitions <= 0:
        raise AdminOperationError("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise AdminOperationError("replication factor must be larger than 0")
    if replication_factor > len(brokers):
        raise AdminOperationError(f"replication factor: {replication_factor} larger than "
                                  f"available brokers: {len(brokers)}")
    ordered = sorted(brokers)
    n = len(ordered)
    return {p: tuple(ordered[(p + j) % n] for j in range(replication_factor))
            for p in range(first_partition, first_partition + partitions)}


def parse_broker_ids(text: str, separator: str) -> tuple[int, ...]:
    """Broker ids separated by ``separator``; ValueError saying what is wrong.

    >>> parse_broker_ids(" 3, 1", ",")
    (3, 1)
    >>> parse_broker_ids("1:-2", ":")
    Traceback (most recent call last):
    ...
    ValueError: broker ids must not be negative
    """
    try:
        ids = tuple(int(b.strip()) for b in text.split(separator))
    except ValueError:
        raise ValueError("broker ids must be integers") from None
    if any(b < 0 for b in ids):
        raise ValueError("broker ids must not be negative")
    return ids


def parse_replica_assignment(text: str, first_partition: int = 0) -> dict[int, tuple[int, ...]]:
    """``--replica-assignment 1:2,2:3``: commas separate partitions, colons replicas.

    >>> parse_replica_assignment("1:2,2:3")
    {0: (1, 2), 1: (2, 3)}
    >>> parse_replica_assignment("1:1")
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.AdminOperationError: Partition replica lists may not contain duplicate entries: 1
    """
    result: dict[int, tuple[int, ...]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            replicas = parse_broker_ids(part, ":")
        except ValueError as e:
            raise AdminOperationError(f"Invalid replica assignment {text!r}: {e}") from None
        if twice := sorted(duplicates(replicas)):
            raise AdminOperationError("Partition replica lists may not contain duplicate entries: "
                                      + ",".join(map(str, twice)))
        p = first_partition + i
        if result and len(replicas) != len(result[first_partition]):
            raise AdminOperationError(f"Partition {p} has different replication factor: "
                                      f"{list(replicas)}")
        result[p] = replicas
    return result
