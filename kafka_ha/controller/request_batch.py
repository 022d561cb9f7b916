"""Collects the requests one controller event produces, then sends one per broker.

Kafka's ``newBatch() / add...() / sendRequestsToBrokers(epoch)``: however many
partitions an event touches, each broker gets at most one LeaderAndIsr, one
UpdateMetadata and one StopReplica request per kind of StopReplica.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Callable, Iterable

import gevent
from gevent.event import AsyncResult

from kafka_ha.controller.channel import ControllerChannel
from kafka_ha.model import BrokerInfo, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.partition_states import to_wire

state_change = logging.getLogger("state.change")

UPDATE_METADATA_VERSION = 0



class RequestBatch:
    def __init__(self, controller_id: int, epoch: int, live_brokers: dict[int, BrokerInfo]) -> None:
        self.controller_id = controller_id
        self.epoch = epoch
        self.live_brokers = live_brokers
        self.leader_and_isr: dict[int, dict[TopicPartition, PartitionStateInfo]] = defaultdict(dict)
        self.update_metadata: dict[int, dict[TopicPartition, PartitionStateInfo]] = defaultdict(dict)
        self.stop_replica: dict[tuple[int, bool], list[TopicPartition]] = defaultdict(list)

    def add_leader_and_isr(self, broker_ids: Iterable[int], state: PartitionStateInfo,
                           with_metadata: bool = True) -> None:
        """Queue LeaderAndIsr for these replicas and, as Kafka does, UpdateMetadata for everyone."""
        for b in broker_ids:
            if b in self.live_brokers:
                self.leader_and_isr[b][state.tp] = state
        if with_metadata:
            self.add_update_metadata(self.live_brokers, [state])

    def add_update_metadata(self, broker_ids: Iterable[int], states: Iterable[PartitionStateInfo]) -> None:
        states = list(states)
        for b in broker_ids:
            if b in self.live_brokers:
                target = self.update_metadata[b]
                for s in states:
                    target[s.tp] = s

    def add_stop_replica(self, broker_ids: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        for b in broker_ids:
            if b in self.live_brokers:
                self.stop_replica[(b, delete)].append(tp)

    @property
    def empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata or self.stop_replica)

    def send(self, channel: ControllerChannel, on_acked: Callable[[float], None] | None = None) -> None:
        """Send everything; ``on_acked(ms)`` runs once every LeaderAndIsr is answered."""
        started = time.monotonic()
        acks: list[AsyncResult] = []
        brokers_payload = [{"id": b.broker_id, "host": b.host, "port": b.port}
                           for b in self.live_brokers.values()]
        for broker_id, states in self.update_metadata.items():
            body = {"controller_id": self.controller_id, "controller_epoch": self.epoch,
                    "partition_states": [to_wire(s) for s in states.values()],
                    "live_brokers": brokers_payload}
            channel.send(broker_id, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, body)
        for broker_id, states in self.leader_and_isr.items():
            leaders = {s.leader for s in states.values()}
            live_leaders = [{"id": b.broker_id, "host": b.host, "port": b.port}
                            for b in self.live_brokers.values() if b.broker_id in leaders]
            for s in states.values():
                kind = "become-leader" if s.leader == broker_id else "become-follower"
                state_change.info("Controller %d epoch %d requested %s LeaderAndIsr %s for "
                                  "partition %s from broker %d", self.controller_id, self.epoch,
                                  kind, s.describe(), s.tp, broker_id)
            body = {"controller_id": self.controller_id, "controller_epoch": self.epoch,
                    "partition_states": [to_wire(s) for s in states.values()],
                    "live_leaders": live_leaders}
            ack = AsyncResult()
            acks.append(ack)
            if not channel.send(broker_id, ApiKey.LEADER_AND_ISR, 0, body,
                                lambda _b, resp, ack=ack: ack.set(resp)):
                ack.set(None)
        for (broker_id, delete), tps in self.stop_replica.items():
            for tp in tps:
                state_change.info("Controller %d epoch %d requested StopReplica (delete=%s) for "
                                  "partition %s from broker %d", self.controller_id, self.epoch,
                                  str(delete).lower(), tp, broker_id)
            body = {"controller_id": self.controller_id, "controller_epoch": self.epoch,
                    "delete_partitions": delete,
                    "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in tps]}
            channel.send(broker_id, ApiKey.STOP_REPLICA, 0, body)
        if on_acked is not None:
            def wait_for_acks() -> None:
                for ack in acks:
                    ack.get()
                on_acked((time.monotonic() - started) * 1000)
            gevent.spawn(wait_for_acks)
