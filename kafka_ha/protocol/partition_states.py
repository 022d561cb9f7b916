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
            "replicas": list(s.replicas)}


def from_wire(entry: dict[str, Any]) -> PartitionStateInfo:
    return PartitionStateInfo(TopicPartition(entry["topic"], entry["partition"]),
                              entry["controller_epoch"], entry["leader"], entry["leader_epoch"],
                              tuple(entry["isr"]), entry["zk_version"], tuple(entry["replicas"]))
