"""Lightweight consumer-group members for the group benchmark: one greenlet and one
connection each, speaking JoinGroup, SyncGroup and Heartbeat with the project's own
protocol client, so that a hundred members cost one process.

A member does what a consumer's coordinator client does and nothing else (no fetching):
join, and if it is the leader assign the topic's partitions with the range strategy;
sync; heartbeat every ``heartbeat_interval_s`` until the coordinator says the group
rebalances, then join again.  It records when each generation's SyncGroup answered.
"""
from __future__ import annotations

import struct
import time

import gevent

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection, BrokerConnectionError
from kafka_ha.protocol.errors import ErrorCode

PROTOCOL_TYPE = "consumer"
STRATEGY = "range"


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def subscription(topics: list[str]) -> bytes:
    """The consumer protocol's subscription (v0): version, topics, no user data."""
    return (struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics)
            + struct.pack(">i", -1))


def assignment(tps: dict[str, list[int]]) -> bytes:
    """The consumer protocol's assignment (v0): version, [topic, [partition]], no user data."""
    out = struct.pack(">hi", 0, len(tps))
    for topic, partitions in tps.items():
        out += _string(topic) + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return out + struct.pack(">i", -1)


def range_assign(member_ids: list[str], topic: str, partitions: int) -> dict[str, bytes]:
    """Kafka's range strategy for one topic: members in id order, each a contiguous run,
    the first ``partitions % members`` one partition more.

    >>> from kafka_ha.tools.consumer_group_views import decode_assignment
    >>> {m: decode_assignment(a) for m, a in range_assign(["b", "a"], "t", 3).items()}
    {'a': [('t', 0), ('t', 1)], 'b': [('t', 2)]}
    """
    ordered = sorted(member_ids)
    per, extra = divmod(partitions, len(ordered))
    out, start = {}, 0
    for i, member in enumerate(ordered):
        count = per + (1 if i < extra else 0)
        out[member] = assignment({topic: list(range(start, start + count))} if count else {})
        start += count
    return out


class Member:
    def __init__(self, index: int, coordinator: tuple[str, int], group: str, topic: str,
                 partitions: int, session_timeout_ms: int, rebalance_timeout_ms: int,
                 heartbeat_interval_s: float) -> None:
        self.conn = BrokerConnection(*coordinator, client_id=f"bench-member-{index}",
                                     timeout_s=rebalance_timeout_ms / 1000 + 30)
        self.group, self.topic, self.partitions = group, topic, partitions
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_s
        self.member_id = ""
        self.generation = -1
        self.synced: dict[int, float] = {}       # generation -> when its SyncGroup answered
        self.group_sizes: dict[int, int] = {}    # generation -> members (known to the leader)
        self.last_heartbeat_sent = 0.0           # of a heartbeat the coordinator accepted
        self.heartbeats = 0                      # accepted ones
        self.alive = True
        self.errors: dict[str, int] = {}
        self.task: gevent.Greenlet | None = None

    def start(self) -> "Member":
        self.task = gevent.spawn(self._run)
        return self

    def _run(self) -> None:
        while self.alive:
            try:
                self._join_and_sync()
                self._heartbeat_until_rebalance()
            except BrokerConnectionError as exc:
                if not self.alive:
                    return
                self._count(type(exc).__name__)
                gevent.sleep(0.2)

    def _count(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1

    def _join_and_sync(self) -> None:
        while self.alive:
            joined = self.conn.request(ApiKey.JOIN_GROUP, 1, {
                "group_id": self.group, "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.rebalance_timeout_ms, "member_id": self.member_id,
                "protocol_type": PROTOCOL_TYPE,
                "protocols": [{"name": STRATEGY, "metadata": subscription([self.topic])}]})
            if not self._ok(joined["error_code"]):
                continue
            self.member_id, self.generation = joined["member_id"], joined["generation_id"]
            assignments = []
            if joined["leader"] == self.member_id:
                members = [m["member_id"] for m in joined["members"]]
                self.group_sizes[self.generation] = len(members)
                assignments = [{"member_id": m, "assignment": a} for m, a in
                               range_assign(members, self.topic, self.partitions).items()]
            synced = self.conn.request(ApiKey.SYNC_GROUP, 1, {
                "group_id": self.group, "generation_id": self.generation,
                "member_id": self.member_id, "assignments": assignments})
            if self._ok(synced["error_code"]):
                self.synced[self.generation] = time.monotonic()
                return

    def _ok(self, error: int) -> bool:
        if error == ErrorCode.NONE:
            return True
        self._count(ErrorCode(error).name)
        if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.member_id = "" if error == ErrorCode.UNKNOWN_MEMBER_ID else self.member_id
        elif error != ErrorCode.REBALANCE_IN_PROGRESS:
            gevent.sleep(0.2)   # coordinator moving or loading: ask again shortly
        return False

    def _heartbeat_until_rebalance(self) -> None:
        while self.alive:
            gevent.sleep(self.heartbeat_interval_s)
            if not self.alive:
                return
            sent = time.monotonic()
            answer = self.conn.request(ApiKey.HEARTBEAT, 1, {
                "group_id": self.group, "generation_id": self.generation,
                "member_id": self.member_id})
            if answer["error_code"] == ErrorCode.NONE:
                self.last_heartbeat_sent = sent
                self.heartbeats += 1
                continue
            self._ok(answer["error_code"])
            return

    def kill(self) -> None:
        """Gone without a word, as a consumer killed with -9: the coordinator finds out
        when its session times out."""
        self.alive = False
        self.conn.close()

    def leave(self) -> None:
        self.alive = False
        if self.member_id:
            try:
                self.conn.request(ApiKey.LEAVE_GROUP, 1, {"group_id": self.group,
                                                          "member_id": self.member_id},
                                  timeout_s=5)
            except BrokerConnectionError:
                pass
        self.conn.close()
