"""The group coordinator's request handlers: FindCoordinator, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, ListGroups, DescribeGroups, DeleteGroups.

Each handler checks that this broker coordinates the group (``GroupCatalog``),
asks the group's pure state machine (``group_state.Group``) what to do, and
carries out its ``Outcome``: answers waiting members, writes the group's
metadata to ``__consumer_offsets``.  A JoinGroup or SyncGroup that must wait for
the other members holds its connection's greenlet on an ``AsyncResult`` (Kafka
parks it in a purgatory; requests of one connection are answered in order in
both).  A timer greenlet expires sessions and ends join phases.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import gevent
from gevent.event import AsyncResult

from kafka_ha.clock import monotonic_ms, now_ms
from kafka_ha.coordinator.catalog import GroupCatalog
from kafka_ha.coordinator.group_state import Group, GroupState, Outcome, expired_offsets
from kafka_ha.coordinator.offsets_records import group_key, group_value, offset_key
from kafka_ha.coordinator.placement import OFFSETS_TOPIC
from kafka_ha.model import BrokerEndpoint
from kafka_ha.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TICK_S = 0.1
GROUP_KEY_TYPE = 0
# A waiting JoinGroup/SyncGroup is answered by the state machine before its
# rebalance timeout ends; this margin only guards against a lost wake-up.
WAIT_MARGIN_S = 10.0
_JOIN_ERROR = {"generation_id": -1, "protocol_name": "", "leader": "", "member_id": "",
               "members": []}


def _snapshot(group: Group) -> tuple:
    return group.state, group.generation, set(group.members)


def _now() -> int:
    # Sessions and rebalances are durations: a monotonic clock, immune to clock steps.
    return monotonic_ms()


class GroupCoordinator:
    def __init__(self, config, catalog: GroupCatalog,
                 locate: Callable[[int], tuple[int, BrokerEndpoint | None]]) -> None:
        """``locate(partition)``: the offsets topic is ensured (created if missing) and
        the partition's leader found: (error, leader endpoint)."""
        self.config = config
        self.catalog = catalog
        self._locate = locate
        self._waiters: dict[tuple[str, str, str], AsyncResult] = {}
        self._ticker: gevent.Greenlet | None = None
        self._expirer: gevent.Greenlet | None = None

    def start(self) -> None:
        self._ticker = gevent.spawn(self._tick_forever)
        self._expirer = gevent.spawn(self._expire_forever)

    def stop(self) -> None:
        for task in (self._ticker, self._expirer):
            if task is not None:
                task.kill(block=False)

    def leadership_changed(self) -> None:
        """After a LeaderAndIsr or StopReplica: load newly led offsets partitions, drop lost ones."""
        self.catalog.refresh()

    # ---- FindCoordinator -----------------------------------------------------

    def find_coordinator(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        response = {"throttle_time_ms": 0, "error_message": None, "node_id": -1, "host": "",
                    "port": -1}
        if request.get("key_type", GROUP_KEY_TYPE) != GROUP_KEY_TYPE:
            return {**response, "error_code": ErrorCode.INVALID_REQUEST,
                    "error_message": "only group coordinators are served (no transactions)"}
        error, leader = self._locate(self.catalog.partition_of(request["key"]))
        if leader is None:
            return {**response, "error_code": error or ErrorCode.COORDINATOR_NOT_AVAILABLE}
        return {**response, "error_code": ErrorCode.NONE, "node_id": leader.broker_id,
                "host": leader.host, "port": leader.port}

    # ---- membership ----------------------------------------------------------

    def _check(self, group_id: str) -> int:
        """Group management needs a group id; the offset APIs and DescribeGroups take the
        empty one too (Kafka keeps it for old clients' commits)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        return self.catalog.status(group_id)

    def join_group(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        group_id, member_id = request["group_id"], request["member_id"]
        session = request["session_timeout_ms"]
        rebalance = request.get("rebalance_timeout_ms", session)   # v0: one timeout for both
        error = self._check(group_id)
        if error == ErrorCode.NONE and not (self.config["group.min.session.timeout.ms"] <= session
                                            <= self.config["group.max.session.timeout.ms"]):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        if error != ErrorCode.NONE:
            return self._join_reply({**_JOIN_ERROR, "error_code": error, "member_id": member_id})
        group = self.catalog.group(group_id, create=not member_id)
        if group is None:
            return self._join_reply({**_JOIN_ERROR, "error_code": ErrorCode.UNKNOWN_MEMBER_ID,
                                     "member_id": member_id})
        protocols = [(p["name"], p["metadata"]) for p in request["protocols"]]
        before = _snapshot(group)
        outcome = group.join(member_id, request.get("_client_id", ""),
                             request.get("_client_host", ""), session, rebalance,
                             request["protocol_type"], protocols, _now())
        self._log_changes(group, before, "member joined" if not member_id else "member rejoined")
        reply = self._wait_for(group, outcome, "join", rebalance / 1000)
        return self._join_reply(reply or {**_JOIN_ERROR, "error_code": ErrorCode.REBALANCE_IN_PROGRESS,
                                          "member_id": member_id})

    @staticmethod
    def _join_reply(reply: dict[str, Any]) -> dict[str, Any]:
        return {"throttle_time_ms": 0, **reply}

    def sync_group(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        group_id, member_id = request["group_id"], request["member_id"]
        error = self._check(group_id)
        group = self.catalog.group(group_id) if error == ErrorCode.NONE else None
        if group is None:
            return {"throttle_time_ms": 0, "assignment": b"",
                    "error_code": error or ErrorCode.UNKNOWN_MEMBER_ID}
        assignments = {a["member_id"]: a["assignment"] for a in request["assignments"]}
        before = _snapshot(group)
        outcome = group.sync(member_id, request["generation_id"], assignments, _now())
        self._log_changes(group, before, "")
        member = group.members.get(member_id)
        timeout_s = (member.rebalance_timeout_ms if member else 0) / 1000
        reply = self._wait_for(group, outcome, "sync", timeout_s)
        return {"throttle_time_ms": 0,
                **(reply or {"error_code": ErrorCode.REBALANCE_IN_PROGRESS, "assignment": b""})}

    def heartbeat(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        return self._simple(request, lambda g: g.heartbeat(request["member_id"],
                                                           request["generation_id"], _now()))

    def leave_group(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        return self._simple(request, lambda g: g.leave(request["member_id"], _now()))

    def _simple(self, request: dict[str, Any], act: Callable[[Group], Outcome]) -> dict[str, Any]:
        group_id = request["group_id"]
        error = self._check(group_id)
        group = self.catalog.group(group_id) if error == ErrorCode.NONE else None
        if group is None:
            return {"throttle_time_ms": 0, "error_code": error or ErrorCode.UNKNOWN_MEMBER_ID}
        before = _snapshot(group)
        outcome = act(group)
        self._log_changes(group, before, "removing member on LeaveGroup")
        self._carry_out(group, outcome)
        return {"throttle_time_ms": 0, **outcome.reply}

    def list_groups(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        self.catalog.refresh()
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.catalog.loading else ErrorCode.NONE
        groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or ""}
                  for g in self.catalog.groups.values()]
        return {"throttle_time_ms": 0, "error_code": error, "groups": groups}

    def describe_groups(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        described = []
        for group_id in request["groups"]:
            error = self.catalog.status(group_id)
            group = self.catalog.group(group_id) if error == ErrorCode.NONE else None
            if group is not None:
                described.append(group.describe())
                continue
            state = "Dead" if error == ErrorCode.NONE else ""
            described.append({"error_code": error, "group_id": group_id, "group_state": state,
                              "protocol_type": "", "protocol_data": "", "members": []})
        return {"throttle_time_ms": 0, "groups": described}

    def delete_groups(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        results = [{"group_id": g, "error_code": self._delete_group(g)}
                   for g in request["groups_names"]]
        return {"throttle_time_ms": 0, "results": results}

    def _delete_group(self, group_id: str) -> int:
        """Tombstones for the group's offsets and its metadata (acks=-1), then it is
        forgotten here; Kafka's codes for a group with members or an unknown one."""
        error = self._check(group_id)
        if error != ErrorCode.NONE:
            return error
        group = self.catalog.group(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        error = group.delete()
        if error != ErrorCode.NONE:
            return error
        offsets = self.catalog.offsets.get(group_id, {})
        records = [(offset_key(group_id, *tp), None) for tp in sorted(offsets)]
        records.append((group_key(group_id), None))
        error = self.catalog.write(group_id, records,
                                   self.config["offsets.commit.timeout.ms"] / 1000)
        if error != ErrorCode.NONE:
            group.undo_delete()
            return error
        if self.catalog.groups.get(group_id) is group:
            del self.catalog.groups[group_id]
            self.catalog.offsets.pop(group_id, None)
        log.info("Group %s removed: %d offsets and its metadata deleted with tombstones (%s-%d)",
                 group_id, len(offsets), OFFSETS_TOPIC, self.catalog.partition_of(group_id))
        return ErrorCode.NONE

    # ---- carrying out decisions ----------------------------------------------

    def _wait_for(self, group: Group, outcome: Outcome, kind: str,
                  timeout_s: float) -> dict[str, Any] | None:
        """The member's answer: now, or once the group decides it."""
        if outcome.reply is not None:
            self._carry_out(group, outcome)
            return outcome.reply
        # Wait like everyone else, even when the answer is already decided: it may
        # depend on a write still to be done (the leader's SyncGroup).
        key = (group.group_id, kind, outcome.member_id)
        waiter = AsyncResult()
        previous = self._waiters.get(key)
        if previous is not None:   # the member asked again (a new connection)
            previous.set(None)
        self._waiters[key] = waiter
        self._carry_out(group, outcome)
        try:
            return waiter.get(timeout=timeout_s + WAIT_MARGIN_S)
        except gevent.Timeout:
            return None
        finally:
            if self._waiters.get(key) is waiter:
                del self._waiters[key]

    def _carry_out(self, group: Group, outcome: Outcome) -> None:
        if outcome.persist:
            self._persist(group, outcome)
        else:
            self._deliver(group.group_id, outcome.deliver)

    def _deliver(self, group_id: str, replies: dict[tuple[str, str], dict[str, Any]]) -> None:
        for (kind, member_id), reply in replies.items():
            waiter = self._waiters.pop((group_id, kind, member_id), None)
            if waiter is not None:
                waiter.set(reply)

    def _persist(self, group: Group, outcome: Outcome) -> None:
        """Write the group's metadata (acks=-1), then answer; on failure, the
        members waiting on SyncGroup get the error and the group rebalances."""
        generation = group.generation
        record = [(group_key(group.group_id), group_value(group.to_record()))]
        error = self.catalog.write(group.group_id, record,
                                   self.config["offsets.commit.timeout.ms"] / 1000)
        if error == ErrorCode.NONE:
            self._deliver(group.group_id, outcome.deliver)
            return
        log.warning("Writing the metadata of group %s generation %d failed: %s",
                    group.group_id, generation, ErrorCode(error).name)
        failed = {key: ({"error_code": error, "assignment": b""} if key[0] == "sync" else reply)
                  for key, reply in outcome.deliver.items()}
        self._deliver(group.group_id, failed)
        self._carry_out(group, group.store_failed(generation, error, _now()))

    def _log_changes(self, group: Group, before: tuple, reason: str) -> None:
        """Kafka's GroupCoordinator lines for what a decision changed."""
        state, generation, members = before
        where = f"{OFFSETS_TOPIC}-{self.catalog.partition_of(group.group_id)}"
        if reason == "member expired":
            for member_id in sorted(members - set(group.members)):
                log.info("Member %s in group %s has failed, removing it from the group",
                         member_id, group.group_id)
        if group.state == state and group.generation == generation:
            return
        if group.state == GroupState.PREPARING_REBALANCE:
            log.info("Preparing to rebalance group %s in state PreparingRebalance with old "
                     "generation %d (%s) (reason: %s)", group.group_id, generation, where, reason)
        elif group.state == GroupState.COMPLETING_REBALANCE:
            log.info("Stabilized group %s generation %d (%s)", group.group_id, group.generation,
                     where)
        elif group.state == GroupState.STABLE:
            log.info("Assignment received from leader for group %s for generation %d",
                     group.group_id, group.generation)
        elif group.state == GroupState.EMPTY:
            log.info("Group %s with generation %d is now empty (%s)", group.group_id,
                     group.generation, where)

    def on_unload(self, group: Group, outcome: Outcome) -> None:
        self._deliver(group.group_id, outcome.deliver)

    def _tick_forever(self) -> None:
        while True:
            gevent.sleep(TICK_S)
            try:
                self.tick()
            except Exception:   # the timer must outlive a bug in one group
                log.exception("Group coordinator timer failed")

    def expire_offsets(self, now_wall_ms: int) -> int:
        """Delete expired offsets (tombstones, acks=-1), and the record of a group left
        with neither members nor offsets; the number of offsets removed."""
        started, removed = _now(), 0
        for group_id in list(self.catalog.offsets):
            group = self.catalog.group(group_id)
            offsets = self.catalog.offsets.get(group_id, {})
            gone = expired_offsets(group, offsets, now_wall_ms,
                                   self.config["offsets.retention.minutes"] * 60000)
            if not gone:
                continue
            records = [(offset_key(group_id, *tp), None) for tp in gone]
            emptied = len(gone) == len(offsets) and (group is None or not group.members)
            if emptied:
                records.append((group_key(group_id), None))
            error = self.catalog.write(group_id, records,
                                       self.config["offsets.commit.timeout.ms"] / 1000)
            if error != ErrorCode.NONE or self.catalog.status(group_id) != ErrorCode.NONE:
                continue   # not written, or no longer ours: the next run (or owner) retries
            for tp in gone:
                offsets.pop(tp, None)
            removed += len(gone)
            if emptied and not self.catalog.offsets.get(group_id):
                self.catalog.offsets.pop(group_id, None)
                current = self.catalog.groups.get(group_id)
                if current is not None and not current.members:
                    del self.catalog.groups[group_id]
        if removed:
            log.info("Removed %d expired offsets in %d milliseconds.", removed, _now() - started)
        return removed

    def _expire_forever(self) -> None:
        while True:
            gevent.sleep(self.config["offsets.retention.check.interval.ms"] / 1000)
            try:
                self.expire_offsets(now_ms())
            except Exception:   # the next run tries again
                log.exception("Expiring offsets failed")

    def tick(self) -> None:
        self.catalog.refresh()
        now = _now()
        for group in list(self.catalog.groups.values()):
            before = _snapshot(group)
            outcome = group.tick(now)
            self._log_changes(group, before, "member expired")
            if outcome.deliver or outcome.persist:
                if outcome.persist:
                    gevent.spawn(self._carry_out, group, outcome)
                else:
                    self._deliver(group.group_id, outcome.deliver)
