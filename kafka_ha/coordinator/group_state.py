"""One consumer group's membership state machine (Kafka's GroupMetadata and the
decisions of its GroupCoordinator), pure: no IO, no clock of its own.

Each request method takes ``now`` (ms) and returns an ``Outcome``: the answer to
the request itself (``reply``, or None when the member must wait), answers for
members that were waiting (``deliver``, keyed ``("join"|"sync", member_id)``),
and whether the group's metadata must now be written to the log (``persist``).
``tick(now)`` does what timers do: expire members whose session ran out, and end
a join phase whose rebalance timeout passed.

States, as Kafka names them::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable / CompletingRebalance --join with new metadata, leave, expiry--> PreparingRebalance
    PreparingRebalance --nobody rejoined--> Empty;   any --partition unloaded--> Dead
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Any

from kafka_ha.protocol.errors import ErrorCode


class GroupState(str, enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    last_heartbeat_ms: int
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")


@dataclass
class Outcome:
    reply: dict[str, Any] | None = None
    deliver: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    persist: bool = False
    member_id: str = ""     # whom ``reply`` is for (JoinGroup names a new member)


def _error(code: int) -> Outcome:
    return Outcome(reply={"error_code": code})


class Group:
    def __init__(self, group_id: str, initial_rebalance_delay_ms: int = 0) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.rebalance_deadline_ms = 0
        self.join_not_before_ms = 0
        self.state_timestamp_ms = -1

    # ---- JoinGroup ---------------------------------------------------------

    def join(self, member_id: str, client_id: str, client_host: str, session_timeout_ms: int,
             rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], now: int) -> Outcome:
        """A JoinGroup; ``outcome.member_id`` is the member's id (new if it had none)."""
        outcome = self._join(member_id, client_id, client_host, session_timeout_ms,
                             rebalance_timeout_ms, protocol_type, protocols, now)
        if not outcome.member_id:
            outcome.member_id = member_id
        if outcome.reply is not None and "generation_id" not in outcome.reply:
            outcome.reply = {"generation_id": -1, "protocol_name": "", "leader": "",
                             "member_id": member_id, "members": [], **outcome.reply}
        return outcome

    def _join(self, member_id: str, client_id: str, client_host: str, session_timeout_ms: int,
              rebalance_timeout_ms: int, protocol_type: str,
              protocols: list[tuple[str, bytes]], now: int) -> Outcome:
        if self.state == GroupState.DEAD:
            # The partition was unloaded under us: the client looks up the coordinator again.
            return _error(ErrorCode.NOT_COORDINATOR)
        if not protocols or not self._supports(protocol_type, {name for name, _ in protocols}):
            return _error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if member_id and member_id not in self.members:
            return _error(ErrorCode.UNKNOWN_MEMBER_ID)
        if not member_id:
            member_id = f"{client_id}-{uuid.uuid4()}"
            self.members[member_id] = Member(member_id, client_id, client_host,
                                             session_timeout_ms, rebalance_timeout_ms,
                                             list(protocols), now, awaiting_join=True)
            if self.leader_id is None:
                self.leader_id = member_id
            self.protocol_type = protocol_type
            outcome = self._rebalance_for_join(now)
            outcome.member_id = member_id
            return outcome
        member = self.members[member_id]
        changed = member.protocols != list(protocols)
        member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        member.protocols = list(protocols)
        member.last_heartbeat_ms = now
        if self.state == GroupState.PREPARING_REBALANCE:
            member.awaiting_join = True
            return self._rebalance_for_join(now)
        if not changed and self.state == GroupState.COMPLETING_REBALANCE or \
                not changed and self.state == GroupState.STABLE and member_id != self.leader_id:
            # A repeated join (say its response was lost): the current generation again.
            return Outcome(reply=self._join_response(member_id))
        member.awaiting_join = True
        return self._rebalance_for_join(now)

    def _supports(self, protocol_type: str, names: set[str]) -> bool:
        if not self.members:
            return bool(protocol_type)
        if protocol_type != self.protocol_type:
            return False
        return bool(names & self._candidate_protocols())

    def _candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def _rebalance_for_join(self, now: int) -> Outcome:
        outcome = Outcome()
        if self.state != GroupState.PREPARING_REBALANCE:
            outcome = self._prepare_rebalance(now)
        return self._merge(outcome, self._maybe_complete_join(now))

    def _prepare_rebalance(self, now: int) -> Outcome:
        outcome = Outcome()
        if self.state == GroupState.COMPLETING_REBALANCE:
            # Members waiting on SyncGroup learn that this generation is over.
            for m in self.members.values():
                if m.awaiting_sync:
                    outcome.deliver[("sync", m.member_id)] = {
                        "error_code": ErrorCode.REBALANCE_IN_PROGRESS, "assignment": b""}
                    m.awaiting_sync = False
        for m in self.members.values():
            m.assignment = b""
        self.join_not_before_ms = now
        if self.state == GroupState.EMPTY:
            # group.initial.rebalance.delay.ms: a new group's first members arrive
            # together; waiting a moment saves a rebalance per member.
            self.join_not_before_ms = now + self.initial_rebalance_delay_ms
        self.rebalance_deadline_ms = now + max(
            (m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self._transition(GroupState.PREPARING_REBALANCE, now)
        return outcome

    def _maybe_complete_join(self, now: int) -> Outcome:
        if self.state != GroupState.PREPARING_REBALANCE:
            return Outcome()
        all_joined = all(m.awaiting_join for m in self.members.values())
        if (all_joined and now >= self.join_not_before_ms) or now >= self.rebalance_deadline_ms:
            return self._complete_join(now)
        return Outcome()

    def _complete_join(self, now: int) -> Outcome:
        # Members that did not rejoin within the rebalance timeout are out.
        for m in [m for m in self.members.values() if not m.awaiting_join]:
            del self.members[m.member_id]
        self.generation += 1
        if not self.members:
            self.protocol = self.leader_id = None
            self._transition(GroupState.EMPTY, now)
            return Outcome(persist=True)
        self.protocol = self._choose_protocol()
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self._transition(GroupState.COMPLETING_REBALANCE, now)
        outcome = Outcome()
        for m in self.members.values():
            m.awaiting_join = False
            m.last_heartbeat_ms = now
            outcome.deliver[("join", m.member_id)] = self._join_response(m.member_id)
        return outcome

    def _choose_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all support."""
        candidates = self._candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(name for name, _ in m.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name])

    def _join_response(self, member_id: str) -> dict[str, Any]:
        is_leader = member_id == self.leader_id
        members = [{"member_id": m.member_id, "metadata": m.metadata_for(self.protocol)}
                   for m in self.members.values()] if is_leader else []
        return {"error_code": ErrorCode.NONE, "generation_id": self.generation,
                "protocol_name": self.protocol or "", "leader": self.leader_id or "",
                "member_id": member_id, "members": members}

    # ---- SyncGroup, Heartbeat, LeaveGroup ----------------------------------

    def _member_error(self, member_id: str, generation: int) -> int:
        if self.state == GroupState.DEAD:
            return ErrorCode.NOT_COORDINATOR
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes],
             now: int) -> Outcome:
        error = self._member_error(member_id, generation)
        if error == ErrorCode.NONE and self.state == GroupState.PREPARING_REBALANCE:
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error != ErrorCode.NONE:
            return Outcome(reply={"error_code": error, "assignment": b""})
        member = self.members[member_id]
        member.last_heartbeat_ms = now
        if self.state == GroupState.STABLE:
            return Outcome(reply={"error_code": ErrorCode.NONE, "assignment": member.assignment})
        member.awaiting_sync = True
        if member_id != self.leader_id:
            return Outcome(member_id=member_id)
        for m in self.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        self._transition(GroupState.STABLE, now)
        outcome = Outcome(persist=True, member_id=member_id)
        for m in self.members.values():
            if m.awaiting_sync:
                outcome.deliver[("sync", m.member_id)] = {"error_code": ErrorCode.NONE,
                                                          "assignment": m.assignment}
                m.awaiting_sync = False
        return outcome

    def store_failed(self, generation: int, error: int, now: int) -> Outcome:
        """The write of this generation's assignment failed: members rejoin (Kafka
        answers the pending SyncGroups with the error and starts over)."""
        if self.generation != generation or self.state != GroupState.STABLE:
            return Outcome()
        for m in self.members.values():
            m.assignment = b""
        return self._prepare_rebalance(now)

    def heartbeat(self, member_id: str, generation: int, now: int) -> Outcome:
        error = self._member_error(member_id, generation)
        if error == ErrorCode.NONE:
            self.members[member_id].last_heartbeat_ms = now
            if self.state != GroupState.STABLE:
                error = ErrorCode.REBALANCE_IN_PROGRESS
        return _error(error)

    def leave(self, member_id: str, now: int) -> Outcome:
        if self.state == GroupState.DEAD:
            return _error(ErrorCode.NOT_COORDINATOR)
        if member_id not in self.members:
            return _error(ErrorCode.UNKNOWN_MEMBER_ID)
        outcome = self._remove(member_id, now)
        outcome.reply = {"error_code": ErrorCode.NONE}
        return outcome

    def _remove(self, member_id: str, now: int) -> Outcome:
        member = self.members.pop(member_id)
        outcome = Outcome()
        if member.awaiting_join:
            outcome.deliver[("join", member_id)] = {
                "error_code": ErrorCode.UNKNOWN_MEMBER_ID, "generation_id": -1,
                "protocol_name": "", "leader": "", "member_id": member_id, "members": []}
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            outcome = self._merge(outcome, self._prepare_rebalance(now))
        return self._merge(outcome, self._maybe_complete_join(now))

    # ---- timers --------------------------------------------------------------

    def tick(self, now: int) -> Outcome:
        """Expire members whose session timed out; finish a join phase that is due."""
        outcome = Outcome()
        for m in list(self.members.values()):
            if m.awaiting_join or m.member_id not in self.members:
                continue   # a member waiting in JoinGroup is alive (Kafka keeps it so)
            if now - m.last_heartbeat_ms > m.session_timeout_ms:
                outcome = self._merge(outcome, self._remove(m.member_id, now))
        return self._merge(outcome, self._maybe_complete_join(now))

    # ---- offsets and the outside world ---------------------------------------

    def commit_error(self, member_id: str, generation: int, now: int) -> int:
        """Whether an OffsetCommit v1+ may write (Kafka 2.0's rules): a group with
        no members takes simple commits (generation -1); a member commits for its
        current generation, even while a rebalance is being prepared."""
        if self.state == GroupState.DEAD:
            return ErrorCode.NOT_COORDINATOR
        if generation < 0 and self.state == GroupState.EMPTY:
            return ErrorCode.NONE
        if self.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        error = self._member_error(member_id, generation)
        if error == ErrorCode.NONE:
            self.members[member_id].last_heartbeat_ms = now
        return error

    def delete(self) -> int:
        """DeleteGroups (Kafka 1.1+): only a group without members may go; it turns
        Dead at once, so that no join or commit lands while its tombstones are written."""
        if self.state == GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if self.state != GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        self.state = GroupState.DEAD
        return ErrorCode.NONE

    def undo_delete(self) -> None:
        """The tombstones were not written: the group is still in the log, so it lives on."""
        if self.state == GroupState.DEAD and not self.members:
            self.state = GroupState.EMPTY

    def unload(self) -> Outcome:
        """The offsets partition left this broker: waiting members look elsewhere."""
        outcome = Outcome()
        for m in self.members.values():
            if m.awaiting_join:
                outcome.deliver[("join", m.member_id)] = {
                    "error_code": ErrorCode.NOT_COORDINATOR, "generation_id": -1,
                    "protocol_name": "", "leader": "", "member_id": m.member_id, "members": []}
            if m.awaiting_sync:
                outcome.deliver[("sync", m.member_id)] = {"error_code": ErrorCode.NOT_COORDINATOR,
                                                          "assignment": b""}
        self.state = GroupState.DEAD
        return outcome

    def _transition(self, state: GroupState, now: int) -> None:
        self.state = state
        self.state_timestamp_ms = now

    @staticmethod
    def _merge(first: Outcome, second: Outcome) -> Outcome:
        first.deliver.update(second.deliver)
        first.persist = first.persist or second.persist
        first.reply = first.reply if first.reply is not None else second.reply
        return first

    def to_record(self) -> dict[str, Any]:
        """The group metadata value (v2 fields) for the offsets topic."""
        return {"protocol_type": self.protocol_type or "", "generation": self.generation,
                "protocol": self.protocol, "leader": self.leader_id,
                "current_state_timestamp": self.state_timestamp_ms,
                "members": [{"member_id": m.member_id, "client_id": m.client_id,
                             "client_host": m.client_host,
                             "rebalance_timeout": m.rebalance_timeout_ms,
                             "session_timeout": m.session_timeout_ms,
                             "subscription": m.metadata_for(self.protocol),
                             "assignment": m.assignment} for m in self.members.values()]}

    @classmethod
    def from_record(cls, group_id: str, value: dict[str, Any], now: int,
                    initial_rebalance_delay_ms: int = 0) -> "Group":
        """A group as loaded from the log: Stable with its members (whose sessions
        start now), or Empty."""
        group = cls(group_id, initial_rebalance_delay_ms)
        group.generation = value["generation"]
        group.protocol_type = value["protocol_type"] or None
        group.protocol = value["protocol"]
        group.leader_id = value["leader"]
        for m in value["members"]:
            group.members[m["member_id"]] = Member(
                m["member_id"], m["client_id"], m["client_host"], m["session_timeout"],
                m["rebalance_timeout"], [(group.protocol or "", m["subscription"])], now,
                assignment=m["assignment"])
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.state_timestamp_ms = value.get("current_state_timestamp", -1)
        return group

    def describe(self) -> dict[str, Any]:
        return {"error_code": ErrorCode.NONE, "group_id": self.group_id,
                "group_state": self.state.value, "protocol_type": self.protocol_type or "",
                "protocol_data": self.protocol or "",
                "members": [{"member_id": m.member_id, "client_id": m.client_id,
                             "client_host": m.client_host,
                             "member_metadata": m.metadata_for(self.protocol),
                             "member_assignment": m.assignment}
                            for m in self.members.values()]}


def expired_offsets(group: Group | None, offsets: dict[tuple[str, int], Any],
                    now_wall_ms: int, retention_ms: int) -> list[tuple[str, int]]:
    """The committed offsets to delete now: those past their expire timestamp, of a group
    without members.  (Kafka 2.0 expired them in active groups too, and a member's
    idle partition lost its offset; 2.1, KIP-211, waits until the group is empty.)
    A value stored without an expire timestamp expires ``retention_ms`` after its commit.

    >>> from kafka_ha.coordinator.offsets_records import OffsetValue
    >>> offsets = {("t", 0): OffsetValue(1, "", 100, 150), ("t", 1): OffsetValue(1, "", 100, -1, 3)}
    >>> expired_offsets(None, offsets, 149, 60), expired_offsets(None, offsets, 160, 60)
    ([], [('t', 0), ('t', 1)])
    """
    if group is not None and group.members:
        return []
    return sorted(tp for tp, value in offsets.items()
                  if (value.expire_timestamp if value.expire_timestamp >= 0
                      else value.commit_timestamp + retention_ms) <= now_wall_ms)

