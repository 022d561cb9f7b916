"""The broker's side of LeaderAndIsr and StopReplica: which partitions it leads or follows.

Fencing (controller.md §16): a request from a lower controller epoch than the
highest seen is refused whole with STALE_CONTROLLER_EPOCH; a partition entry
is applied only if its leader epoch is newer than the one this broker holds.
Every transition is written to the state-change log as requested (by the
controller), received and completed (here), the lifecycle of seed 002.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol.partition_states import from_wire
from kafka_ha.state_change_log import LOGGER_NAME, StateChangeBatch
from kafka_ha.protocol.errors import ErrorCode

state_change = logging.getLogger(LOGGER_NAME)


@dataclass(frozen=True, slots=True)
class PartitionRole:
    """What the controller last told this broker about one partition."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    controller_epoch: int
    replicas: tuple[int, ...]



class ReplicaManager:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.controller_epoch = 0
        self.partitions: dict[TopicPartition, PartitionRole] = {}

    def _stale(self, kind: str, controller_id: int, epoch: int, correlation_id: int) -> bool:
        if epoch < self.controller_epoch:
            state_change.warning(
                "Broker %d ignoring %s request correlation id %d from controller %d with epoch %d "
                "since its controller epoch %d is old. Latest known controller epoch is %d",
                self.broker_id, kind, correlation_id, controller_id, epoch, epoch,
                self.controller_epoch)
            return True
        self.controller_epoch = epoch
        return False

    def leader_and_isr(self, request: dict[str, Any], correlation_id: int) -> dict[str, Any]:
        controller, epoch = request["controller_id"], request["controller_epoch"]
        if self._stale("LeaderAndIsr", controller, epoch, correlation_id):
            return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": []}
        errors = []
        lines = StateChangeBatch()
        source = f"correlation id {correlation_id} from controller {controller} epoch {epoch}"
        for entry in request["partition_states"]:
            s = from_wire(entry)
            lines.info(f"Broker {self.broker_id} received LeaderAndIsr request {s.describe()} "
                       f"{source} for partition {s.tp}")
            errors.append({"topic": s.tp.topic, "partition": s.tp.partition,
                           "error_code": self._apply(s, source, lines)})
        lines.emit()
        return {"error_code": ErrorCode.NONE, "partition_errors": errors}

    def _apply(self, s: PartitionStateInfo, source: str, lines: StateChangeBatch) -> int:
        if self.broker_id not in s.replicas:
            lines.warning(f"Broker {self.broker_id} ignoring LeaderAndIsr request {source} for "
                          f"partition {s.tp} as itself is not in assigned replica list "
                          f"{list(s.replicas)}")
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        current = self.partitions.get(s.tp)
        if current is not None and s.leader_epoch <= current.leader_epoch:
            # Not a warning: every controller failover re-sends current states.
            lines.info(f"Broker {self.broker_id} ignoring LeaderAndIsr request {source} for "
                       f"partition {s.tp} since its associated leader epoch {s.leader_epoch} is "
                       f"not higher than the current leader epoch {current.leader_epoch}")
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.partitions[s.tp] = PartitionRole(s.leader, s.leader_epoch, s.isr, s.zk_version,
                                              s.controller_epoch, s.replicas)
        transition = "become-leader" if s.leader == self.broker_id else "become-follower"
        lines.info(f"Broker {self.broker_id} completed LeaderAndIsr request {source} for the "
                   f"{transition} transition for partition {s.tp}")
        return ErrorCode.NONE

    def stop_replica(self, request: dict[str, Any], correlation_id: int) -> dict[str, Any]:
        controller, epoch = request["controller_id"], request["controller_epoch"]
        if self._stale("StopReplica", controller, epoch, correlation_id):
            return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH, "partition_errors": []}
        delete = str(request["delete_partitions"]).lower()
        source = f"correlation id {correlation_id} from controller {controller} epoch {epoch}"
        errors = []
        lines = StateChangeBatch()
        for entry in request["partitions"]:
            tp = TopicPartition(entry["topic"], entry["partition"])
            lines.info(f"Broker {self.broker_id} received StopReplica (delete={delete}) {source} "
                       f"for partition {tp}")
            self.partitions.pop(tp, None)
            lines.info(f"Broker {self.broker_id} completed StopReplica (delete={delete}) {source} "
                       f"for partition {tp}")
            errors.append({"topic": tp.topic, "partition": tp.partition,
                           "error_code": ErrorCode.NONE})
        lines.emit()
        return {"error_code": ErrorCode.NONE, "partition_errors": errors}

    def led_partitions(self) -> list[TopicPartition]:
        return [tp for tp, r in self.partitions.items() if r.leader == self.broker_id]
