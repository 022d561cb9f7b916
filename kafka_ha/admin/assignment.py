"""Pure replica-assignment rules for creating topics and adding partitions.

Kafka's round robin (AdminUtils.assignReplicasToBrokers with a fixed start and no
shift; docs/design.md §7): over the sorted brokers, partition
i's replica j goes to broker ``(i + j) mod n``; the first replica is the
preferred leader.  When the brokers have racks (``broker.rack``), Kafka's
rack-aware variant instead (:func:`assign_replicas_rack_aware`, docs/design.md §7).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka_ha.zk.admin_znodes import duplicates

NOT_ALL_RACKS = "Not all brokers have rack information for replica rack aware assignment."


class AdminOperationError(ValueError):
    """Bad admin input; the message is Kafka's.  The subclasses name what is wrong, so
    that the broker can answer the Admin API with Kafka's error code for it."""


class InvalidPartitions(AdminOperationError):
    pass


class InvalidReplicationFactor(AdminOperationError):
    pass


class InvalidReplicaAssignment(AdminOperationError):
    pass


def assign_replicas(brokers: Sequence[int] | Mapping[int, str | None], partitions: int,
                    replication_factor: int, first_partition: int = 0,
                    rack_aware: bool = True) -> dict[int, tuple[int, ...]]:
    """Round-robin assignment of ``partitions`` partitions starting at ``first_partition``.

    ``brokers`` may map each id to its rack: when any has one, the assignment is
    rack-aware, and every broker must have one (Kafka's RackAwareMode.Enforced); with
    ``rack_aware=False`` the racks are ignored when not all brokers have one (Safe,
    as for auto-created topics).

    >>> assign_replicas({1: "a", 2: "a", 3: "b", 4: "b"}, 2, 2)
    {0: (1, 3), 1: (3, 2)}
    >>> assign_replicas({1: "a", 2: None}, 1, 2)
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.InvalidReplicaAssignment: Not all brokers have rack information for replica rack aware assignment.

    >>> assign_replicas([3, 1, 2], 3, 3)
    {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}
    >>> assign_replicas([1, 2, 3], 2, 2, first_partition=3)
    {3: (1, 2), 4: (2, 3)}
    >>> assign_replicas([1, 2], 1, 3)
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.InvalidReplicationFactor: replication factor: 3 larger than available brokers: 2
    """
    if partitions <= 0:
        raise InvalidPartitions("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise InvalidReplicationFactor("replication factor must be larger than 0")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactor(f"replication factor: {replication_factor} larger than "
                                  f"available brokers: {len(brokers)}")
    if isinstance(brokers, Mapping):
        racks = {b: r for b, r in brokers.items() if r is not None}
        if racks and len(racks) == len(brokers):
            return assign_replicas_rack_aware(racks, partitions, replication_factor, first_partition)
        if racks and rack_aware:
            raise InvalidReplicaAssignment(NOT_ALL_RACKS)
    ordered = sorted(brokers)
    n = len(ordered)
    return {p: tuple(ordered[(p + j) % n] for j in range(replication_factor))
            for p in range(first_partition, first_partition + partitions)}


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """The brokers ordered so that consecutive ones are on different racks where possible:
    one from each rack in rack-name order, each rack's brokers in id order, round after
    round (Kafka's getRackAlternatedBrokerList).

    >>> rack_alternated({0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"})
    [0, 3, 1, 5, 4, 2]
    """
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    out: list[int] = []
    for round_ in range(max(len(q) for q in queues)):
        out += [q[round_] for q in queues if round_ < len(q)]
    return out


def assign_replicas_rack_aware(racks: Mapping[int, str], partitions: int, replication_factor: int,
                               first_partition: int = 0) -> dict[int, tuple[int, ...]]:
    """Kafka's assignReplicasToBrokersRackAware, with a fixed start (index 0, shift 0):
    the leaders walk the rack-alternated list; each further replica is tried at growing
    distances from the leader (the distance grows by one more every n partitions), and
    taken only if its rack has no replica yet (unless every rack has one) and it is not
    already a replica (unless every broker is).

    >>> assign_replicas_rack_aware({0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"}, 6, 3)[0]
    (0, 3, 1)
    """
    arranged = rack_alternated(racks)
    n, n_racks = len(arranged), len(set(racks.values()))
    shift = 0
    out: dict[int, tuple[int, ...]] = {}
    for p in range(max(0, first_partition), max(0, first_partition) + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = p % n
        replicas = [arranged[first]]
        used_racks, used = {racks[arranged[first]]}, {arranged[first]}
        k = 0
        while len(replicas) < replication_factor:
            broker = arranged[(first + 1 + (shift * n_racks + k) % (n - 1)) % n]
            rack = racks[broker]
            if ((rack not in used_racks or len(used_racks) == n_racks)
                    and (broker not in used or len(used) == n)):
                replicas.append(broker)
                used_racks.add(rack)
                used.add(broker)
            k += 1
        out[p] = tuple(replicas)
    return out


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
    kafka_ha.admin.assignment.InvalidReplicaAssignment: Partition replica lists may not contain duplicate entries: 1
    """
    result: dict[int, tuple[int, ...]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            result[first_partition + i] = parse_broker_ids(part, ":")
        except ValueError as e:
            raise InvalidReplicaAssignment(f"Invalid replica assignment {text!r}: {e}") from None
    validate_assignment(result, first_partition)
    return result


def validate_assignment(assignment: dict[int, tuple[int, ...]], first_partition: int = 0,
                        known_brokers: set[int] | None = None) -> None:
    """An explicit assignment's rules, whether it came from ``--replica-assignment`` or the
    Admin API: partitions numbered on from ``first_partition``, each with at least one
    replica, no broker twice, one replication factor, and (given ``known_brokers``)
    only brokers that exist.

    >>> validate_assignment({0: (1, 2), 1: (3,)})
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.InvalidReplicaAssignment: Partition 1 has different replication factor: [3]
    >>> validate_assignment({0: (1,), 2: (2,)})
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.InvalidReplicaAssignment: Partitions should be a consecutive 0-based integer sequence
    >>> validate_assignment({0: (1, 7)}, known_brokers={1, 2})
    Traceback (most recent call last):
    ...
    kafka_ha.admin.assignment.InvalidReplicaAssignment: Unknown broker(s) in replica assignment: 7
    """
    if sorted(assignment) != list(range(first_partition, first_partition + len(assignment))):
        raise InvalidReplicaAssignment("Partitions should be a consecutive 0-based integer sequence"
                                       if first_partition == 0 else
                                       f"Partitions should be numbered on from {first_partition}")
    first_rf = None
    for p, replicas in sorted(assignment.items()):
        if not replicas:
            raise InvalidReplicaAssignment(f"Partition {p} has an empty replica list")
        if any(b < 0 for b in replicas):
            raise InvalidReplicaAssignment(f"Partition {p} names a negative broker id")
        if twice := sorted(duplicates(replicas)):
            raise InvalidReplicaAssignment("Partition replica lists may not contain duplicate "
                                           "entries: " + ",".join(map(str, twice)))
        if first_rf is None:
            first_rf = len(replicas)
        elif len(replicas) != first_rf:
            raise InvalidReplicaAssignment(f"Partition {p} has different replication factor: "
                                           f"{list(replicas)}")
    if known_brokers is not None:
        unknown = sorted({b for rs in assignment.values() for b in rs} - set(known_brokers))
        if unknown:
            raise InvalidReplicaAssignment("Unknown broker(s) in replica assignment: "
                                           + ", ".join(map(str, unknown)))
