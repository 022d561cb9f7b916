"""The partition-state entries of LeaderAndIsr and UpdateMetadata, as model values.

The same eight fields travel in both requests (topic, partition, controller
epoch, leader, leader epoch, ISR, zkVersion, replicas); the
controller writes them with ``to_wire`` and brokers read them with ``from_wire``.
"""
from __future__ import annotations

from typing import Any

from kafka_ha.model import PartitionStateInfo, TopicPartition


def to_wire(s: PartitionStateInfo) -> dict[str, Any]:
    return {"topic": s.tp.topic, "partition": s.tp.partition,
            "controller_epoch": s.controller_epoch, "leader": s.leader,
            "leader_epoch": s.leader_epoch, "isr": list(s.isr), "zk_version": s.zk_version,
            "replicas": list(s.replicas),
            # LeaderAndIsr v1+ / UpdateMetadata v4+ only: a new replica may go to any log
            # dir (one dir here), and brokers here work out offline replicas from the live
            # brokers themselves.
            "is_new": False, "offline_replicas": []}


def from_wire(entry: dict[str, Any]) -> PartitionStateInfo:
    return PartitionStateInfo(TopicPartition(entry["topic"], entry["partition"]),
                              entry["controller_epoch"], entry["leader"], entry["leader_epoch"],
                              tuple(entry["isr"]), entry["zk_version"], tuple(entry["replicas"]))


def grouped_by_topic(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Partition entries (each naming its topic) under their topics, in the order the
    topics first come: the layout of LeaderAndIsr v2+ and UpdateMetadata v5+ (the
    entries keep their ``topic`` key, which those versions do not encode).

    >>> grouped_by_topic([{"topic": "a", "partition": 0}, {"topic": "b", "partition": 0},
    ...                   {"topic": "a", "partition": 1}])   # doctest: +NORMALIZE_WHITESPACE
    [{'topic': 'a', 'partition_states': [{'topic': 'a', 'partition': 0}, {'topic': 'a', 'partition': 1}]},
     {'topic': 'b', 'partition_states': [{'topic': 'b', 'partition': 0}]}]
    """
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        by_topic.setdefault(e["topic"], []).append(e)
    return [{"topic": t, "partition_states": states} for t, states in by_topic.items()]


def ungrouped(body: dict[str, Any]) -> dict[str, Any]:
    """A controller request of any version in the flat layout the broker's handlers take:
    ``partition_states`` (LeaderAndIsr, UpdateMetadata) or ``partitions`` (StopReplica)
    with a topic in each entry, and ``broker_epoch`` (-1 where the version has none).
    Changes ``body`` in place and returns it.

    >>> ungrouped({"topics": [{"topic": "t", "partition_indexes": [0, 2]}], "broker_epoch": 7})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'topics': [{'topic': 't', 'partition_indexes': [0, 2]}], 'broker_epoch': 7,
     'partitions': [{'topic': 't', 'partition': 0}, {'topic': 't', 'partition': 2}]}
    >>> ungrouped({"partition_states": []})["broker_epoch"]
    -1
    """
    if "topic_states" in body:
        flat = body["partition_states"] = []
        for topic in body["topic_states"]:
            name = topic["topic"]
            for e in topic["partition_states"]:
                e["topic"] = name
                flat.append(e)
    elif "topics" in body:
        body["partitions"] = [{"topic": t["topic"], "partition": p}
                              for t in body["topics"] for p in t["partition_indexes"]]
    body.setdefault("broker_epoch", -1)
    return body
