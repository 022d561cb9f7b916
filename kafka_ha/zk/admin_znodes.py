"""Znode codecs for the admin, config, ISR-change and old-consumer families.

These are the nodes that admin tools, other Kafka versions and third-party
operators write as well as we do, so the decoders here are the most tolerant
ones: ``version`` may be missing, keys may come in any order with spaces
between them, and all three config-change notification formats are read
(docs/design.md §5).  Encoders still write exactly what
our Kafka versions write.  Same conventions as :mod:`kafka_ha.zk.znodes`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kafka_ha.model import TopicPartition
from kafka_ha.zk.errors import (DuplicatePartitions, MalformedZnode, check_broker_ids,
                                check_int, check_str, check_version, json_object,
                                parse_decimal, parse_json, required, show)
from kafka_ha.zk.znodes import (CONFIG_BROKERS_PATH, CONFIG_CHANGES_PATH, CONFIG_TOPICS_PATH, CONSUMERS_PATH,
                                DELETE_TOPICS_PATH, ISR_CHANGE_NOTIFICATION_PATH,
                                PREFERRED_REPLICA_ELECTION_PATH, REASSIGN_PARTITIONS_PATH,
                                non_negative, path_segment, replica_list, to_json_bytes)

T = TypeVar("T")

__all__ = [
    "ReassignPartitionsZNode", "PreferredReplicaElectionZNode", "DeleteTopicZNode",
    "TopicConfigZNode", "BrokerConfigZNode", "ConfigChangeZNode", "IsrChangeNotificationZNode",
    "ConsumerOffsetZNode",
]


def _sequential_path(prefix: str, sequence: int) -> str:
    # ZooKeeper appends the sequence as ten zero-padded digits.
    return f"{prefix}{non_negative(sequence, 'sequence number'):010d}"


def _tp_entries(obj: dict[str, Any], path: str) -> list[tuple[TopicPartition, dict[str, Any]]]:
    """The ``"partitions"`` list of ``{"topic":..,"partition":..}`` objects."""
    entries = required(obj, "partitions", path)
    if not isinstance(entries, list):
        raise MalformedZnode(path, f"partitions must be a list, got {show(entries)}")
    out = []
    for i, entry in enumerate(entries):
        where = f"partitions[{i}]."
        entry = json_object(entry, path, f"partitions[{i}]")
        topic = check_str(required(entry, "topic", path, where), path, f"{where}topic")
        partition = check_int(required(entry, "partition", path, where), path, f"{where}partition")
        out.append((TopicPartition(topic, partition), entry))
    return out


def _tp_json(tp: TopicPartition) -> dict[str, Any]:
    return {"topic": path_segment(tp.topic, "topic"),
            "partition": non_negative(tp.partition, "partition")}


def duplicates(items: Iterable[T]) -> list[T]:
    """Items seen more than once, each once, in order of their first repeat.

    >>> duplicates([1, 2, 1, 3, 2, 1])
    [1, 2]
    """
    seen: set[T] = set()
    twice: dict[T, None] = {}
    for item in items:
        if item in seen:
            twice[item] = None
        seen.add(item)
    return list(twice)


class ReassignPartitionsZNode:
    """``/admin/reassign_partitions``: target replica lists, one entry per partition.

    Other tools write it with spaces, sorted keys and ``version`` last or
    missing; list order matters (the head becomes the preferred leader).

    >>> ReassignPartitionsZNode.encode({TopicPartition("t", 0): (4, 5, 6)})
    b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,5,6]}]}'
    >>> ReassignPartitionsZNode.decode(
    ...     b'{"partitions": [{"partition": 0, "replicas": [2, 1], "topic": "bar"}]}')
    {TopicPartition(topic='bar', partition=0): (2, 1)}
    """

    SCHEMA = "reassign_partitions"
    PATH = REASSIGN_PARTITIONS_PATH

    @staticmethod
    def encode(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
        if not reassignment:
            # An empty node would block every other reassignment for nothing.
            raise ValueError("a reassignment needs at least one partition")
        partitions = [{**_tp_json(tp), "replicas": replica_list(replicas, f"{tp} replicas")}
                      for tp, replicas in reassignment.items()]
        return to_json_bytes({"version": 1, "partitions": partitions})

    @staticmethod
    def decode(data: bytes | None, path: str = REASSIGN_PARTITIONS_PATH
               ) -> dict[TopicPartition, tuple[int, ...]]:
        obj = json_object(parse_json(data, path), path)
        check_version(obj, path)
        out: dict[TopicPartition, tuple[int, ...]] = {}
        for i, (tp, entry) in enumerate(_tp_entries(obj, path)):
            if tp in out:
                raise MalformedZnode(path, f"partition {tp} is listed more than once")
            where = f"partitions[{i}].replicas"
            out[tp] = check_broker_ids(required(entry, "replicas", path, f"partitions[{i}]."),
                                       path, where, allow_empty=False)
        return out


class PreferredReplicaElectionZNode:
    """``/admin/preferred_replica_election``: partitions to move back to their preferred leader.

    >>> PreferredReplicaElectionZNode.encode([TopicPartition("t", 0)])
    b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    """

    SCHEMA = "preferred_replica_election"
    PATH = PREFERRED_REPLICA_ELECTION_PATH

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        tps = [TopicPartition(*tp) for tp in partitions]
        if not tps:
            raise ValueError("a preferred replica election needs at least one partition")
        if twice := duplicates(tps):
            raise DuplicatePartitions(PREFERRED_REPLICA_ELECTION_PATH, twice)
        return to_json_bytes({"version": 1, "partitions": [_tp_json(tp) for tp in tps]})

    @staticmethod
    def decode(data: bytes | None, path: str = PREFERRED_REPLICA_ELECTION_PATH
               ) -> list[TopicPartition]:
        """The partitions in file order; a partition named twice raises DuplicatePartitions."""
        obj = json_object(parse_json(data, path), path)
        check_version(obj, path)  # optional: the tools' input files may omit it
        tps = [tp for tp, _ in _tp_entries(obj, path)]
        if twice := duplicates(tps):
            raise DuplicatePartitions(path, twice)
        return tps


class DeleteTopicZNode:
    """``/admin/delete_topics/<t>``: the node's existence is the request.

    >>> DeleteTopicZNode.encode()
    b''
    >>> DeleteTopicZNode.decode(None, DeleteTopicZNode.path("t")) is None
    True
    """

    SCHEMA = "delete_topic_marker"

    @staticmethod
    def path(topic: str) -> str:
        return f"{DELETE_TOPICS_PATH}/{path_segment(topic, 'topic')}"

    @staticmethod
    def encode(value: None = None) -> bytes:
        return b""

    @staticmethod
    def decode(data: bytes | None, path: str) -> None:
        # Kafka writes empty data and never reads it back.  Other writers do
        # put bytes here (Curator's create().forPath(p) stores the client's IP
        # address), so any content still means "delete this topic".
        return None


class TopicConfigZNode:
    """``/config/topics/<t>``: the topic's config overrides, all values strings.

    >>> TopicConfigZNode.encode({"retention.ms": "1000"})
    b'{"version":1,"config":{"retention.ms":"1000"}}'
    """

    SCHEMA = "topic_config"

    @staticmethod
    def path(topic: str) -> str:
        return f"{CONFIG_TOPICS_PATH}/{path_segment(topic, 'topic')}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        for key, value in config.items():
            if not isinstance(key, str) or not key or not isinstance(value, str):
                raise ValueError(f"topic config must map names to strings, got {key!r}: {value!r}")
        return to_json_bytes({"version": 1, "config": dict(config)})

    @staticmethod
    def decode(data: bytes | None, path: str) -> dict[str, str]:
        if not data:
            return {}  # Kafka reads null data as "no overrides" (ConfigEntityZNode).
        obj = json_object(parse_json(data, path), path)
        check_version(obj, path)
        config = json_object(required(obj, "config", path), path, "config")
        for key, value in config.items():
            if not isinstance(value, str):
                raise MalformedZnode(path, f"config value of {show(key)} must be a string, "
                                           f"got {show(value)}")
        return dict(config)


class BrokerConfigZNode:
    """``/config/brokers/<id>`` and ``/config/brokers/<default>`` (KIP-226): a broker's
    dynamic config overrides, or the cluster-wide defaults; the same JSON as a topic's.

    >>> BrokerConfigZNode.path(1), BrokerConfigZNode.path(BrokerConfigZNode.DEFAULT)
    ('/config/brokers/1', '/config/brokers/<default>')
    >>> BrokerConfigZNode.encode({"leader.replication.throttled.rate": "1000"})
    b'{"version":1,"config":{"leader.replication.throttled.rate":"1000"}}'
    >>> BrokerConfigZNode.path("x")
    Traceback (most recent call last):
    ...
    ValueError: broker entity must be a broker id or <default>, got 'x'
    """

    SCHEMA = "broker_config"
    DEFAULT = "<default>"   # Kafka's ConfigEntityName.Default

    @staticmethod
    def entity(name: str | int) -> str:
        text = str(name).strip()
        if text != BrokerConfigZNode.DEFAULT and not (text.isdigit() and text.isascii()):
            raise ValueError(f"broker entity must be a broker id or <default>, got {name!r}")
        return text if text == BrokerConfigZNode.DEFAULT else str(int(text))

    @staticmethod
    def path(name: str | int) -> str:
        return f"{CONFIG_BROKERS_PATH}/{BrokerConfigZNode.entity(name)}"

    encode = TopicConfigZNode.encode
    decode = TopicConfigZNode.decode


class ConfigChangeZNode:
    """``/config/changes/config_change_<seq>``: tells brokers to re-read a config.

    Written in the 0.10.1+ form; decoding returns the topic name, or None for a
    change to another entity type (clients, users, brokers), which we ignore.

    >>> ConfigChangeZNode.encode("t")
    b'{"version":2,"entity_path":"topics/t"}'
    >>> [ConfigChangeZNode.decode(d, ConfigChangeZNode.path(1)) for d in (b'"t"',
    ...     b'{"version":1,"entity_type":"topics","entity_name":"t"}',
    ...     b'{"version":2,"entity_path":"topics/t"}')]
    ['t', 't', 't']
    """

    SCHEMA = "config_change_notification"
    PATH = CONFIG_CHANGES_PATH
    PREFIX = f"{CONFIG_CHANGES_PATH}/config_change_"

    @staticmethod
    def path(sequence: int) -> str:
        return _sequential_path(ConfigChangeZNode.PREFIX, sequence)

    @staticmethod
    def encode(topic: str, entity_type: str = "topics") -> bytes:
        """A change of ``topic``'s config, or with ``entity_type="brokers"`` of a broker's
        (``topic`` then is the broker id or ``<default>``)."""
        if entity_type not in ("topics", "brokers"):
            raise ValueError(f"config change of unsupported entity type {entity_type!r}")
        name = (path_segment(topic, "topic") if entity_type == "topics"
                else BrokerConfigZNode.entity(topic))
        return to_json_bytes({"version": 2, "entity_path": f"{entity_type}/{name}"})

    @staticmethod
    def decode(data: bytes | None, path: str) -> str | None:
        entity_type, name = ConfigChangeZNode.decode_entity(data, path)
        return name if entity_type == "topics" else None

    @staticmethod
    def decode_entity(data: bytes | None, path: str) -> tuple[str, str]:
        """``(entity type, entity name)`` of any of the three forms.

        >>> ConfigChangeZNode.decode_entity(b'{"version":2,"entity_path":"brokers/<default>"}', "/c")
        ('brokers', '<default>')
        """
        value = parse_json(data, path)
        if isinstance(value, str):  # 0.8.2: the topic name as a JSON string
            return "topics", check_str(value, path, "topic")
        obj = json_object(value, path, "data (an object or a topic name)")
        # Dispatch on version as 0.10.1+ brokers do, or on the keys when a
        # tool left it out.
        version = check_version(obj, path) or (2 if "entity_path" in obj else 1)
        if version == 1:
            entity_type = check_str(required(obj, "entity_type", path), path, "entity_type")
            name = check_str(required(obj, "entity_name", path), path, "entity_name")
        elif version == 2:
            entity_path = check_str(required(obj, "entity_path", path), path, "entity_path")
            entity_type, _, name = entity_path.partition("/")
            if not name:
                raise MalformedZnode(path, f"entity_path {show(entity_path)} is not <type>/<name>")
        else:
            raise MalformedZnode(path, f"unsupported config change version {version}")
        return entity_type, name


class IsrChangeNotificationZNode:
    """``/isr_change_notification/isr_change_<seq>``: partitions whose ISR a leader changed.

    >>> IsrChangeNotificationZNode.encode([TopicPartition("t", 0), TopicPartition("t", 0)])
    b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    """

    SCHEMA = "isr_change_notification"
    PATH = ISR_CHANGE_NOTIFICATION_PATH
    PREFIX = f"{ISR_CHANGE_NOTIFICATION_PATH}/isr_change_"

    @staticmethod
    def path(sequence: int) -> str:
        return _sequential_path(IsrChangeNotificationZNode.PREFIX, sequence)

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        # Kafka sends a set: each partition once, and never an empty batch.
        tps = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        if not tps:
            raise ValueError("an ISR change notification needs at least one partition")
        return to_json_bytes({"version": 1, "partitions": [_tp_json(tp) for tp in tps]})

    @staticmethod
    def decode(data: bytes | None, path: str) -> list[TopicPartition]:
        """The partitions, each once (Kafka reads them into a set), in written order."""
        obj = json_object(parse_json(data, path), path)
        check_version(obj, path)
        return list(dict.fromkeys(tp for tp, _ in _tp_entries(obj, path)))


class ConsumerOffsetZNode:
    """``/consumers/<g>/offsets/<t>/<p>``: an old consumer's committed offset, bare decimal.

    >>> ConsumerOffsetZNode.encode(42)
    b'42'
    >>> ConsumerOffsetZNode.decode(b"42", ConsumerOffsetZNode.path("g", "t", 0))
    42
    """

    SCHEMA = "consumer_offset"

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return (f"{CONSUMERS_PATH}/{path_segment(group, 'group')}/offsets/"
                f"{path_segment(topic, 'topic')}/{non_negative(partition, 'partition')}")

    @staticmethod
    def encode(offset: int) -> bytes:
        if type(offset) is not int or offset < -1:
            raise ValueError(f"offset must be an integer >= -1, got {offset!r}")
        return str(offset).encode("ascii")

    @staticmethod
    def decode(data: bytes | None, path: str) -> int:
        # -1 is Kafka's "no offset" sentinel (OffsetAndMetadata.InvalidOffset),
        # which an OffsetCommit v0 can store verbatim.
        return parse_decimal(data, path, minimum=-1)
