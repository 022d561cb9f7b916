"""The gate in front of a broker's controller APIs: LeaderAndIsr, UpdateMetadata, StopReplica.

These three requests reshape a broker (which logs it holds, whom it follows,
whom it names as controller), and the port that takes them is the one every
client reaches.  Two checks run before any of a request applies:

- **The whole request is well formed.**  Topic names that would escape the log
  directory (``../x``), negative partitions or epochs, empty or duplicated
  replica lists, impossible broker addresses: one such entry refuses the whole
  request with INVALID_REQUEST, so a request never half-applies and then fails.
- **A higher controller epoch is confirmed in ZooKeeper** before the broker
  adopts it: ``/controller`` must name the request's controller id and
  ``/controller_epoch`` must hold its epoch.  A real new controller passes at
  the cost of one read per epoch change; a forged epoch gets
  STALE_CONTROLLER_EPOCH and is never adopted, so it cannot lock the real
  controller out either.  A request at the confirmed epoch must come from the
  confirmed controller id.  Lower epochs go on to the handlers, whose own
  stale-epoch check refuses them with Kafka's log line.

Without authentication a client can still copy the current epoch and id; that
is for ClusterAction authorization, which needs security first.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.state_change_log import LOGGER_NAME

state_change = logging.getLogger(LOGGER_NAME)
log = logging.getLogger(__name__)

CONTROLLER_APIS = (ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA)
# Leader ids a controller sends besides broker ids: -1 (none) and -2 (topic being deleted).
MIN_LEADER = -2
MAX_TOPIC_CHARS = 249   # a topic's log directory is <topic>-<partition>; Kafka's limit

#: ``() -> (controller id or None, controller epoch)`` as ZooKeeper has them now.
ReadController = Callable[[], tuple[int | None, int]]


def _topic_problem(topic: Any) -> str | None:
    if not isinstance(topic, str) or not topic or topic in (".", ".."):
        return f"topic {topic!r} is not a usable name"
    if len(topic) > MAX_TOPIC_CHARS or "/" in topic or "\\" in topic or "\x00" in topic:
        return f"topic {topic[:60]!r} is not a usable name"
    return None


def _ids_problem(what: str, ids: list[int], allow_empty: bool) -> str | None:
    if not ids and not allow_empty:
        return f"{what} is empty"
    if len(set(ids)) != len(ids):
        return f"{what} {ids[:20]} names a broker twice"
    if any(b < 0 for b in ids):
        return f"{what} {ids[:20]} has a negative broker id"
    return None


def _state_problem(entry: dict[str, Any]) -> str | None:
    where = f"partition state {entry['topic'][:60]!r}-{entry['partition']}"
    problem = _topic_problem(entry["topic"])
    if problem:
        return problem
    if entry["partition"] < 0:
        return f"{where}: partition is negative"
    if entry["leader"] < MIN_LEADER:
        return f"{where}: leader {entry['leader']} is not a broker id"
    if entry["leader_epoch"] < -1 or entry["controller_epoch"] < 0:
        return f"{where}: negative leader_epoch {entry['leader_epoch']} or controller epoch"
    return (_ids_problem(f"{where}: replicas", entry["replicas"], allow_empty=False)
            or _ids_problem(f"{where}: isr", entry["isr"], allow_empty=True))


def _broker_problem(broker: dict[str, Any]) -> str | None:
    addresses = broker["endpoints"] if "endpoints" in broker else [broker]   # v1+ : v0
    if broker["id"] < 0:
        return f"broker id {broker['id']} is negative"
    if not addresses:
        return f"broker {broker['id']} has no endpoint"
    for a in addresses:
        if not 0 <= a["port"] <= 65535:
            return f"broker {broker['id']}: port {a['port']} is out of range"
        if not a["host"]:
            return f"broker {broker['id']}: empty host"
    return None


def request_problem(api_key: int, version: int, request: dict[str, Any]) -> str | None:
    """Why this controller request cannot be applied at all, or None.

    >>> request_problem(ApiKey.STOP_REPLICA, 0, {"controller_id": 1, "controller_epoch": 1,
    ...     "delete_partitions": True, "partitions": [{"topic": "..", "partition": 0}]})
    "topic '..' is not a usable name"
    """
    if request["controller_id"] < 0 or request["controller_epoch"] < 0:
        return "negative controller id or epoch"
    if api_key == ApiKey.STOP_REPLICA:
        entries = request["partitions"]
        problems = (_topic_problem(e["topic"]) or (e["partition"] < 0 and "negative partition")
                    for e in entries)
    else:
        entries = request["partition_states"]
        problems = (_state_problem(e) for e in entries)
        brokers = request["live_leaders" if api_key == ApiKey.LEADER_AND_ISR else "live_brokers"]
        problems = (p for group in (problems, (_broker_problem(b) for b in brokers)) for p in group)
    problem = next((p for p in problems if p), None)
    if problem:
        return problem
    keys = [(e["topic"], e["partition"]) for e in entries]
    if len(set(keys)) != len(keys):
        return "a partition appears twice"
    return None


#: ``(timeout_s) -> this broker's epoch`` (its registration's czxid), waiting up to the
#: timeout while it registers; None if it has not registered by then.
OwnEpoch = Callable[[float], "int | None"]
# How long a controller request naming a broker epoch waits for this broker to register
# (the controller learns the epoch from the registration, so a request that names one
# while we are still registering can only be meant for a previous process of ours).
OWN_EPOCH_WAIT_S = 10.0


def stale_broker_epoch(request_epoch: int, own_epoch: int | None) -> bool:
    """KIP-380: a request addressed to an older registration of this broker id (a process
    of ours that died, whose controller connection was reopened to us) is not ours to
    apply.  -1 means the request's version carries no epoch (before v2/v5/v1).

    >>> [stale_broker_epoch(*a) for a in ((-1, 9), (9, 9), (8, 9), (10, 9), (8, None))]
    [False, False, True, False, True]
    """
    return request_epoch >= 0 and (own_epoch is None or request_epoch < own_epoch)


class ControllerRequestGuard:
    def __init__(self, broker_id: int, read_controller: ReadController,
                 own_epoch: OwnEpoch | None = None) -> None:
        self.broker_id = broker_id
        self._read_controller = read_controller
        self.own_epoch = own_epoch    # set once the broker's registration exists
        self.verified: tuple[int, int] | None = None   # (controller id, epoch) ZooKeeper confirmed

    def admit(self, api_key: int, request: dict[str, Any], correlation_id: int,
              version: int = 0) -> int:
        """NONE to pass the request on to its handler, else the error to answer with."""
        kind = ApiKey(api_key).name
        controller, epoch = request["controller_id"], request["controller_epoch"]
        problem = request_problem(api_key, version, request)
        if problem:
            log.warning("Broker %d refusing %s request correlation id %d claiming controller %d "
                        "epoch %d: %s", self.broker_id, kind, correlation_id, controller, epoch, problem)
            return ErrorCode.INVALID_REQUEST
        request_epoch = request.get("broker_epoch", -1)
        if request_epoch >= 0 and self.own_epoch is not None:
            ours = self.own_epoch(OWN_EPOCH_WAIT_S)
            if stale_broker_epoch(request_epoch, ours):
                state_change.info(
                    "Broker %d ignoring %s request correlation id %d from controller %d epoch %d "
                    "with broker epoch %d, older than the current broker epoch %s: it was meant "
                    "for a previous process of this broker", self.broker_id, kind, correlation_id,
                    controller, epoch, request_epoch, ours)
                return ErrorCode.STALE_BROKER_EPOCH
        if self.verified is not None and epoch < self.verified[1]:
            return ErrorCode.NONE     # stale: the handler refuses it with Kafka's log line
        if self.verified == (controller, epoch):
            return ErrorCode.NONE
        known = self.verified
        if known is None or epoch > known[1]:
            try:
                known = self._read_controller()
            except Exception as e:   # ZooKeeper unreachable: adopt nothing we cannot confirm
                log.warning("Broker %d cannot confirm controller %d epoch %d in ZooKeeper (%s); "
                            "refusing %s correlation id %d", self.broker_id, controller, epoch, e,
                            kind, correlation_id)
                return ErrorCode.STALE_CONTROLLER_EPOCH
            if known == (controller, epoch):
                self.verified = known
                return ErrorCode.NONE
        state_change.warning(
            "Broker %d refusing %s request correlation id %d from controller %d with epoch %d: "
            "ZooKeeper names controller %s at epoch %s", self.broker_id, kind, correlation_id,
            controller, epoch, *known)
        return ErrorCode.STALE_CONTROLLER_EPOCH
