"""ElectLeaders (preferred) and the KIP-455 reassignment APIs, served by the controller.

Only the broker that is the active controller answers (NOT_CONTROLLER elsewhere,
so clients look the controller up again).  Each request goes through the same
znode the ZooKeeper admin scripts write, so the controller handles it exactly
as it handles theirs:

- ElectLeaders writes ``/admin/preferred_replica_election`` (as
  kafka-preferred-replica-election.sh does) for the partitions that need an
  election, then waits, up to the request's timeout, until their preferred
  replicas lead.  Unclean elections (election_type 1) are refused with
  INVALID_REQUEST: the controller has no forced-unclean election to run.
- AlterPartitionReassignments merges its targets into
  ``/admin/reassign_partitions``.  Cancelling (null replicas, KIP-455) writes the
  partition's replicas from before the move as its new target, which the
  controller takes as a cancel (controller/reassignment.py): the added replicas are
  stopped and deleted, and the partition is back where it was
  (NO_REASSIGNMENT_IN_PROGRESS when nothing moves).
- ListPartitionReassignments reports the controller's reassignments plus those
  still waiting in the znode, with Kafka's replicas/adding/removing lists.

The decisions are pure functions of the controller's context (``ctx``), kept
apart from the ZooKeeper writes and the waiting.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any, Callable, Iterable

import gevent

from kafka_ha.controller.context import ControllerContext
from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk.admin_store import AdminStore
from kafka_ha.zk.errors import ZkError, ZkNodeExists

log = logging.getLogger(__name__)

PREFERRED, UNCLEAN = 0, 1
_POLL_S = 0.1
_MAX_WAIT_MS = 60_000   # a client's timeout_ms, capped: the connection waits meanwhile
Outcome = tuple[ErrorCode, str | None]


# -- pure decisions -----------------------------------------------------------

def preferred_election_outcome(ctx: ControllerContext, states: dict[TopicPartition, LeaderAndIsr],
                               tp: TopicPartition) -> Outcome | None:
    """Why ``tp`` gets no preferred election, or None when it needs one.  ``states``
    are read from ZooKeeper: the controller learns of ISR growth only from the
    leaders' (batched) notifications, so its own copy may lag."""
    if tp not in ctx.assignments or tp.topic in ctx.deleting_topics or tp not in states:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp.topic}-{tp.partition} does not exist"
    preferred = ctx.assignments[tp][0]
    state = states[tp]
    if state.leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica already leads"
    if not ctx.is_live(preferred) or preferred not in state.isr:
        return (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                f"preferred replica {preferred} is not alive or not in the ISR {list(state.isr)}")
    return None


def reassignment_outcome(ctx: ControllerContext, pending: dict[TopicPartition, tuple[int, ...]],
                         tp: TopicPartition, replicas: list[int] | None) -> Outcome | None:
    """The answer for one partition of an AlterPartitionReassignments, or None when
    ``replicas`` should be written to ``/admin/reassign_partitions``."""
    if tp not in ctx.assignments or tp.topic in ctx.deleting_topics:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp.topic}-{tp.partition} does not exist"
    moving_to = ctx.reassignments.get(tp) or pending.get(tp)
    if replicas is None:
        if moving_to is None:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment of this partition to cancel"
        return None   # a cancel: cancel_target says what to write
    target = tuple(replicas)
    if not target or len(set(target)) != len(target) or min(target) < 0:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the replica list is empty, repeats a broker or has a negative id"
    unknown = sorted(set(target) - ctx.live_broker_ids)
    if unknown:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"brokers {unknown} are not alive"
    if moving_to is not None:
        if tuple(moving_to) == target:
            return ErrorCode.NONE, None
        return (ErrorCode.REASSIGNMENT_IN_PROGRESS,
                f"already moving to {list(moving_to)}; a new target must wait until it completes")
    if target == ctx.assignments[tp]:
        return ErrorCode.NONE, None   # nothing to move: done at once, as in Kafka
    return None


def cancel_target(ctx: ControllerContext, tp: TopicPartition) -> tuple[int, ...]:
    """What a cancel writes as the partition's target: its replicas from when the controller
    took the reassignment up; a request still waiting in the znode moved nothing yet."""
    if tp in ctx.reassignments:
        return ctx.reassignment_origins.get(tp, ctx.assignments[tp])
    return ctx.assignments[tp]


def listed_reassignment(ctx: ControllerContext, tp: TopicPartition,
                        target: tuple[int, ...]) -> dict[str, Any]:
    """Kafka's view of a reassignment: the full replica set (target first), the
    replicas being added and those being removed, relative to where it started."""
    origin = ctx.reassignment_origins.get(tp, ctx.assignments.get(tp, ()))
    return {"partition_index": tp.partition,
            "replicas": list(dict.fromkeys((*target, *origin))),
            "adding_replicas": [r for r in target if r not in origin],
            "removing_replicas": [r for r in origin if r not in target]}


def by_topic(entries: Iterable[tuple[TopicPartition, dict[str, Any]]], partitions_key: str,
             topic_key: str = "name") -> list[dict[str, Any]]:
    """Per-partition entries grouped into the responses' per-topic arrays."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for tp, entry in entries:
        grouped[tp.topic].append(entry)
    return [{topic_key: topic, partitions_key: items} for topic, items in grouped.items()]


def requested_partitions(topics: list[dict[str, Any]] | None, partitions_field: str,
                         topic_field: str = "name") -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t[topic_field], p) for t in topics for p in t[partitions_field]]


# -- the handlers ---------------------------------------------------------------

class AdminElectionApis:
    def __init__(self, controller_context: Callable[[], ControllerContext | None],
                 store: AdminStore) -> None:
        """``controller_context()`` is the active controller's context, None on
        other brokers; ``store`` writes the admin znodes."""
        self._context = controller_context
        self._store = store

    def handlers(self) -> dict[ApiKey, Callable[[dict[str, Any], int], dict[str, Any]]]:
        return {ApiKey.ELECT_LEADERS: self.elect_leaders,
                ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.alter_reassignments,
                ApiKey.LIST_PARTITION_REASSIGNMENTS: self.list_reassignments}

    # ---- ElectLeaders ------------------------------------------------------------

    def elect_leaders(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        requested = requested_partitions(body["topic_partitions"], "partitions", "topic")
        ctx = self._context()
        if ctx is None or body.get("election_type", PREFERRED) != PREFERRED:
            error = ErrorCode.NOT_CONTROLLER if ctx is None else ErrorCode.INVALID_REQUEST
            message = ("this broker is not the controller" if ctx is None else
                       "only preferred elections are supported (election_type 0)")
            # v0 has no top-level error: each partition carries it.
            results = [(tp, error, message) for tp in requested or ()] if version == 0 else []
            return self._elect_response(version, error, results)
        if requested is None:
            requested = sorted(ctx.assignments)
        requested = list(dict.fromkeys(requested))
        try:
            states = self._store.partition_states([tp for tp in requested if tp in ctx.assignments])
        except ZkError as e:
            results = [(tp, ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) for tp in requested]
            return self._elect_response(version, ErrorCode.NONE, results)
        outcomes = {tp: preferred_election_outcome(ctx, states, tp) for tp in requested}
        to_elect = [tp for tp, outcome in outcomes.items() if outcome is None]
        if to_elect:
            deadline = time.monotonic() + min(max(body["timeout_ms"], 0), _MAX_WAIT_MS) / 1000
            outcomes.update(self._elect_preferred(ctx, to_elect, deadline))
        results = [(tp, *outcome) for tp, outcome in outcomes.items()]
        return self._elect_response(version, ErrorCode.NONE, results)

    def _elect_preferred(self, ctx: ControllerContext, partitions: list[TopicPartition],
                         deadline: float) -> dict[TopicPartition, Outcome]:
        """Write the election request (waiting for one in progress to finish), then
        wait for each preferred replica to lead."""
        while True:
            try:
                self._store.create_preferred_election(partitions)
                break
            except ZkNodeExists:
                if time.monotonic() >= deadline:
                    message = "another preferred replica election is still in progress"
                    return {tp: (ErrorCode.REQUEST_TIMED_OUT, message) for tp in partitions}
                gevent.sleep(_POLL_S)
            except ZkError as e:
                return {tp: (ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) for tp in partitions}
        log.info("ElectLeaders: preferred replica election requested for %d partitions", len(partitions))
        waiting = set(partitions)
        outcomes: dict[TopicPartition, Outcome] = {}
        while True:
            try:
                states = self._store.partition_states(waiting)
            except ZkError:
                states = {}   # ZooKeeper is briefly away: try again until the deadline
            for tp, state in states.items():
                if tp in ctx.assignments and state.leader == ctx.assignments[tp][0]:
                    outcomes[tp] = (ErrorCode.NONE, None)
                    waiting.discard(tp)
            if not waiting or time.monotonic() >= deadline or self._context() is not ctx:
                break
            gevent.sleep(_POLL_S)
        resigned = self._context() is not ctx
        for tp in waiting:
            # A controller that resigned meanwhile cannot say how the election ends.
            outcomes[tp] = ((ErrorCode.NOT_CONTROLLER, "this broker stopped being the controller")
                            if resigned else (ErrorCode.REQUEST_TIMED_OUT,
                                              "the preferred replica did not become leader within the timeout"))
        return outcomes

    @staticmethod
    def _elect_response(version: int, error: ErrorCode,
                        results: list[tuple[TopicPartition, ErrorCode, str | None]]) -> dict[str, Any]:
        entries = ((tp, {"partition_id": tp.partition, "error_code": code, "error_message": message})
                   for tp, code, message in results)
        response = {"throttle_time_ms": 0, "replica_election_results": by_topic(entries, "partition_result", "topic")}
        if version >= 1:
            response["error_code"] = error
        return response

    # ---- Alter/ListPartitionReassignments ------------------------------------------

    def alter_reassignments(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        ctx = self._context()
        if ctx is None:
            return self._refused("responses")
        pending = self._pending()
        outcomes: dict[TopicPartition, Outcome] = {}
        to_write: dict[TopicPartition, tuple[int, ...]] = {}
        for topic in body["topics"]:
            for partition in topic["partitions"]:
                tp = TopicPartition(topic["name"], partition["partition_index"])
                replicas = partition["replicas"]
                outcome = reassignment_outcome(ctx, pending, tp, replicas)
                if outcome is None:
                    to_write[tp] = tuple(replicas) if replicas is not None else cancel_target(ctx, tp)
                    outcome = (ErrorCode.NONE, None)
                outcomes[tp] = outcome
        if to_write:
            try:
                self._store.add_to_reassignment(to_write)
                log.info("AlterPartitionReassignments: requested %s",
                         {str(tp): list(r) for tp, r in to_write.items()})
            except (ZkError, ValueError) as e:   # ValueError: a malformed node in the way
                outcomes.update({tp: (ErrorCode.UNKNOWN_SERVER_ERROR, f"could not write the "
                                      f"reassignment: {e}") for tp in to_write})
        entries = ((tp, {"partition_index": tp.partition, "error_code": code, "error_message": msg})
                   for tp, (code, msg) in outcomes.items())
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "responses": by_topic(entries, "partitions")}

    def list_reassignments(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        ctx = self._context()
        if ctx is None:
            return self._refused("topics")
        # Requests still waiting in the znode, then what the controller has taken up.
        moving = {**self._pending(), **ctx.reassignments}
        wanted = requested_partitions(body["topics"], "partition_indexes")
        chosen = sorted(moving) if wanted is None else [tp for tp in dict.fromkeys(wanted) if tp in moving]
        entries = ((tp, listed_reassignment(ctx, tp, tuple(moving[tp])))
                   for tp in chosen if tp in ctx.assignments)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "topics": by_topic(entries, "partitions")}

    def _pending(self) -> dict[TopicPartition, tuple[int, ...]]:
        try:
            return self._store.reassignment() or {}
        except (ZkError, ValueError):
            return {}   # unreadable: the controller reports and removes it

    @staticmethod
    def _refused(results_key: str) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": "this broker is not the controller", results_key: []}
