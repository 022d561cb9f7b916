"""Collects the requests one controller event produces, then sends one per broker.

Kafka's ``newBatch() / add...() / sendRequestsToBrokers(epoch)``: however many
partitions an event touches, each broker gets at most one LeaderAndIsr, one
UpdateMetadata and one StopReplica request per kind of StopReplica.
"""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Callable, Iterable

import gevent
from gevent.event import AsyncResult

from kafka_ha.controller.channel import ControllerChannel
from kafka_ha.cooperative import controller_slices
from kafka_ha.model import BrokerInfo, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.framing import EncodedOnce, EncodedOnceFor
from kafka_ha.protocol.partition_states import grouped_by_topic, to_wire
from kafka_ha.state_change_log import StateChangeBatch


# The first versions that name the broker epoch (KIP-380, Kafka 2.2): a broker refuses a
# request meant for a previous process of its id (one restarted before the controller
# noticed) instead of taking that process's leaderships.  UpdateMetadata v5 carries racks.
LEADER_AND_ISR_VERSION, UPDATE_METADATA_VERSION, STOP_REPLICA_VERSION = 2, 5, 1



class RequestBatch:
    def __init__(self, controller_id: int, epoch: int, live_brokers: dict[int, BrokerInfo]) -> None:
        self.controller_id = controller_id
        self.epoch = epoch
        self.live_brokers = live_brokers
        self.leader_and_isr: dict[int, dict[TopicPartition, PartitionStateInfo]] = defaultdict(dict)
        self.update_metadata: dict[int, dict[TopicPartition, PartitionStateInfo]] = defaultdict(dict)
        # states every live broker gets; kept once rather than once per broker
        # because a failover adds thousands of them
        self.metadata_for_all: dict[TopicPartition, PartitionStateInfo] = {}
        self.stop_replica: dict[tuple[int, bool], list[TopicPartition]] = defaultdict(list)

    def add_leader_and_isr(self, broker_ids: Iterable[int], state: PartitionStateInfo,
                           with_metadata: bool = True) -> None:
        """Queue LeaderAndIsr for these replicas and, as Kafka does, UpdateMetadata for everyone."""
        for b in broker_ids:
            if b in self.live_brokers:
                self.leader_and_isr[b][state.tp] = state
        if with_metadata:
            self.metadata_for_all[state.tp] = state

    def add_update_metadata(self, broker_ids: Iterable[int], states: Iterable[PartitionStateInfo]) -> None:
        states = list(states)
        for b in broker_ids:
            if b in self.live_brokers:
                target = self.update_metadata[b]
                for s in states:
                    target[s.tp] = s

    def keep_leader_and_isr(self, broker_id: int, tps: set[TopicPartition]) -> None:
        """Drop the LeaderAndIsr states queued for ``broker_id`` other than those of ``tps``."""
        queued = self.leader_and_isr.get(broker_id)
        if queued is None:
            return
        kept = {tp: s for tp, s in queued.items() if tp in tps}
        if kept:
            self.leader_and_isr[broker_id] = kept
        else:
            del self.leader_and_isr[broker_id]

    def add_stop_replica(self, broker_ids: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        for b in broker_ids:
            if b in self.live_brokers:
                self.stop_replica[(b, delete)].append(tp)

    @property
    def empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata or self.metadata_for_all
                    or self.stop_replica)

    def _metadata_by_broker(self) -> dict[int, dict[TopicPartition, PartitionStateInfo]]:
        targets = set(self.update_metadata)
        if self.metadata_for_all:
            targets |= set(self.live_brokers)
        merged = {}
        for b in targets:
            # states from writes in this batch are the newest: they win
            merged[b] = {**self.update_metadata.get(b, {}), **self.metadata_for_all}
        return merged

    def _broker_epoch(self, broker_id: int) -> int:
        info = self.live_brokers.get(broker_id)
        return info.epoch if info is not None else -1

    def _metadata_body(self, entries: list[dict], brokers_payload: list[dict]) -> EncodedOnce:
        """UpdateMetadata v5, encoded once for every broker it goes to (EncodedOnceFor
        writes each one's broker epoch in); the flat list rides along as for LeaderAndIsr."""
        return EncodedOnce(controller_id=self.controller_id, controller_epoch=self.epoch,
                           broker_epoch=-1, partition_states=entries,
                           topic_states=grouped_by_topic(entries), live_brokers=brokers_payload)

    def send(self, channel: ControllerChannel, on_acked: Callable[[float], None] | None = None,
             on_stop_replica: Callable[[int, dict], None] | None = None) -> None:
        """Send everything; ``on_acked(ms)`` runs once every LeaderAndIsr is answered,
        ``on_stop_replica(broker, response)`` for each StopReplica answer."""
        started = time.monotonic()
        lines = StateChangeBatch()
        acks: list[AsyncResult] = []
        brokers_payload = [{"id": b.broker_id, "rack": b.rack, "endpoints": [
                               {"port": b.port, "host": b.host, "listener": "PLAINTEXT",
                                              "security_protocol": 0}]}
                           for b in self.live_brokers.values()]
        # A state goes to every broker, in UpdateMetadata and LeaderAndIsr: built once,
        # and a body that every broker gets alike is encoded once (10k states: ~30 ms each).
        wire: dict[int, dict] = {}

        def wired(s: PartitionStateInfo) -> dict:
            entry = wire.get(id(s))
            if entry is None:
                entry = wire[id(s)] = to_wire(s)
            return entry
        shared: EncodedOnce | None = None
        for broker_id, states in self._metadata_by_broker().items():
            own = bool(self.update_metadata.get(broker_id))
            body = shared if shared is not None and not own else self._metadata_body(
                [wired(s) for s in controller_slices(states.values())], brokers_payload)
            if not own:
                shared = body
            channel.send(broker_id, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION,
                         EncodedOnceFor(body, self._broker_epoch(broker_id)))
        for broker_id, states in self.leader_and_isr.items():
            leaders = {s.leader for s in states.values()}
            live_leaders = [{"id": b.broker_id, "host": b.host, "port": b.port}
                            for b in self.live_brokers.values() if b.broker_id in leaders]
            prefix = f"Controller {self.controller_id} epoch {self.epoch} requested"
            for s in controller_slices(states.values()):
                kind = "become-leader" if s.leader == broker_id else "become-follower"
                lines.info(f"{prefix} {kind} LeaderAndIsr {s.describe()} for partition {s.tp} "
                           f"from broker {broker_id}")
            entries = [wired(s) for s in controller_slices(states.values())]
            # (the flat list rides along unencoded: the fake channel of the tests reads it)
            body = {"controller_id": self.controller_id, "controller_epoch": self.epoch,
                    "broker_epoch": self._broker_epoch(broker_id), "partition_states": entries,
                    "topic_states": grouped_by_topic(entries), "live_leaders": live_leaders}
            ack = AsyncResult()
            acks.append(ack)
            if not channel.send(broker_id, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, body,
                                lambda _b, resp, ack=ack: ack.set(resp)):
                ack.set(None)
        for (broker_id, delete), tps in self.stop_replica.items():
            for tp in controller_slices(tps):
                lines.info(f"Controller {self.controller_id} epoch {self.epoch} requested "
                           f"StopReplica (delete={str(delete).lower()}) for partition {tp} "
                           f"from broker {broker_id}")
            partitions = [{"topic": tp.topic, "partition": tp.partition} for tp in tps]
            body = {"controller_id": self.controller_id, "controller_epoch": self.epoch,
                    "broker_epoch": self._broker_epoch(broker_id), "delete_partitions": delete,
                    "partitions": partitions,
                    "topics": [{"topic": g["topic"],
                                "partition_indexes": [e["partition"] for e in g["partition_states"]]}
                               for g in grouped_by_topic(partitions)]}
            channel.send(broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, body, on_stop_replica)
        lines.emit()
        if on_acked is not None:
            def wait_for_acks() -> None:
                for ack in acks:
                    ack.get()
                on_acked((time.monotonic() - started) * 1000)
            gevent.spawn(wait_for_acks)
