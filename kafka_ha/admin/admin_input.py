"""Reading the admin tools' input: JSON files and broker lists, validated with Kafka's messages.

Pure functions (file reading aside), shared by kafka-reassign-partitions.sh and
kafka-preferred-replica-election.sh.  JSON is parsed tolerantly (key order,
whitespace, a missing "version"), because other tools write these files too.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kafka_ha.admin.assignment import parse_broker_ids
from kafka_ha.model import TopicPartition
from kafka_ha.zk.admin_znodes import duplicates
Replicas = tuple[int, ...]


class ReassignCommandError(Exception):
    """Bad input or state; the message is Kafka's where Kafka has one."""


# ---- input files ----------------------------------------------------------------


def read_file_as_string(path: str) -> str:
    """The whole file, read now (it may be a temporary file gone once we return).

    Errors read like Java's ``FileNotFoundException`` messages, which Kafka prints.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise ReassignCommandError(f"{path} (No such file or directory)") from None
    except IsADirectoryError:
        raise ReassignCommandError(f"{path} (Is a directory)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReassignCommandError(f"{path} ({e})") from None


def json_or_none(text: str) -> Any:
    # Kafka's Json.parseFull: anything unparseable is "no data".
    try:
        return json.loads(text)
    except ValueError:
        return None


def _is_int(value: Any) -> bool:
    return type(value) is int


def parse_reassignment(text: str, source: str = "reassignment data"
                       ) -> list[tuple[TopicPartition, Replicas]]:
    """Entries of a reassignment file, in file order and **with** duplicates.

    Tolerant like Kafka's parser: key order, whitespace, a missing ``version``
    and unknown keys (1.1+'s ``log_dirs``) are all fine.  Not JSON, not an
    object, or no ``partitions`` list gives no entries (Kafka's "is empty").

    >>> parse_reassignment('{"partitions": [{"replicas": [2, 1], "partition": 0, '
    ...                    '"topic": "t", "log_dirs": ["any", "any"]}], "version": 1}')
    [(TopicPartition(topic='t', partition=0), (2, 1))]
    >>> parse_reassignment('not json')
    []
    """
    obj = json_or_none(text)
    if not isinstance(obj, dict) or obj.get("partitions") is None:
        return []
    entries = obj["partitions"]
    if not isinstance(entries, list):
        raise ReassignCommandError(f"Partition reassignment data in {source} is malformed: "
                                   f"partitions must be a list")
    out = []
    for i, entry in enumerate(entries):
        where = f"Partition reassignment data in {source} is malformed: partitions[{i}]"
        if not isinstance(entry, dict):
            raise ReassignCommandError(f"{where} must be an object")
        topic, partition, replicas = (entry.get(k) for k in ("topic", "partition", "replicas"))
        if not isinstance(topic, str) or not topic:
            raise ReassignCommandError(f"{where}.topic must be a topic name")
        if not _is_int(partition) or partition < 0:
            raise ReassignCommandError(f"{where}.partition must be a non-negative integer")
        if not isinstance(replicas, list) or not all(_is_int(r) and r >= 0 for r in replicas):
            raise ReassignCommandError(f"{where}.replicas must be a list of broker ids")
        out.append((TopicPartition(topic, partition), tuple(replicas)))
    return out


def validate_reassignment(entries: Sequence[tuple[TopicPartition, Replicas]], source: str
                          ) -> dict[TopicPartition, Replicas]:
    """Kafka's checks before ``--execute``, with its messages, in its order.

    >>> validate_reassignment([(TopicPartition("t", 0), (1, 2, 1))], "f.json")
    Traceback (most recent call last):
    ...
    kafka_ha.admin.admin_input.ReassignCommandError: Partition replica lists may not \
contain duplicate entries: [t,0] contains multiple entries for 1
    """
    if not entries:
        raise ReassignCommandError(f"Partition reassignment data file {source} is empty")
    if twice := duplicates(tp for tp, _ in entries):
        raise ReassignCommandError("Partition reassignment contains duplicate topic partitions: "
                                   + ",".join(map(str, twice)))
    repeated = [(tp, duplicates(replicas)) for tp, replicas in entries]
    if any(ids for _, ids in repeated):
        raise ReassignCommandError(
            "Partition replica lists may not contain duplicate entries: "
            + ". ".join(f"{tp} contains multiple entries for {','.join(map(str, ids))}"
                        for tp, ids in repeated if ids))
    if any(not replicas for _, replicas in entries):
        raise ReassignCommandError("Partition replica list cannot be empty")
    return dict(entries)


def parse_topics_to_move(text: str, source: str) -> list[str]:
    """``{"topics":[{"topic":"foo"}],"version":1}`` -> ``["foo"]`` (file order, duplicates kept).

    >>> parse_topics_to_move('{"version":1, "topics": [{"topic": "a"}, {"topic": "b"}]}', "f")
    ['a', 'b']
    """
    obj = json_or_none(text)
    topics = obj.get("topics") if isinstance(obj, dict) else None
    if topics is None:
        # Kafka silently generates nothing here; an empty proposal helps nobody.
        raise ReassignCommandError(f"Topics to move data file {source} is empty")
    if not isinstance(topics, list) or not all(
            isinstance(t, dict) and isinstance(t.get("topic"), str) and t["topic"]
            for t in topics):
        raise ReassignCommandError(f"Topics to move data in {source} is malformed: expected "
                                   f'{{"topics":[{{"topic":"foo"}},...],"version":1}}')
    return [t["topic"] for t in topics]


def parse_broker_list(text: str) -> list[int]:
    """``--broker-list "1,2,3"`` with Kafka's duplicate check.

    >>> parse_broker_list("3, 1,2")
    [3, 1, 2]
    >>> parse_broker_list("1,2,1")
    Traceback (most recent call last):
    ...
    kafka_ha.admin.admin_input.ReassignCommandError: Broker list contains duplicate entries: 1
    """
    try:
        brokers = list(parse_broker_ids(text, ","))
    except ValueError as e:
        raise ReassignCommandError(f'Invalid broker list "{text}": {e}') from None
    if twice := duplicates(brokers):
        raise ReassignCommandError("Broker list contains duplicate entries: "
                                   + ",".join(map(str, twice)))
    return brokers


# ---- output ---------------------------------------------------------------------


def config_pairs(pairs: Sequence[str], error: type[Exception]) -> dict[str, str]:
    """``--config key=value`` arguments as a dict, as kafka-topics.sh reads them (both its
    ZooKeeper and its Admin API path); ``error`` (with Kafka's message) for a pair without
    ``=`` or key.

    >>> config_pairs(["retention.ms = 1000", "cleanup.policy=compact"], ValueError)
    {'retention.ms': '1000', 'cleanup.policy': 'compact'}
    """
    configs = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise error(f"Invalid topic config: all configs to be added must be in "
                        f"the format \"key=val\": {pair}")
        configs[key.strip()] = value.strip()
    return configs
