"""ElectLeaders and Alter/ListPartitionReassignments in the request layer: the pure
decisions on a real ControllerContext, and the handlers over an in-memory admin store
(the ZooKeeper side is covered by tests/system/test_election_reassignment_apis.py)."""
from __future__ import annotations

import pytest

from kafka_ha.broker.admin_election_apis import (
    AdminElectionApis, listed_reassignment, cancel_target, preferred_election_outcome, reassignment_outcome)
from kafka_ha.controller.context import ControllerContext
from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicPartition as TP
from kafka_ha.protocol.errors import ErrorCode as E
from kafka_ha.admin import leader_election_command as lec

T0, T1, T2 = TP("t", 0), TP("t", 1), TP("t", 2)


def context() -> ControllerContext:
    ctx = ControllerContext()
    ctx.live_brokers = {b: BrokerInfo(b, "h", 9000 + b) for b in (1, 2, 3)}
    for tp, replicas, leader, isr in ((T0, (1, 2), 1, (1, 2)), (T1, (2, 1), 1, (1, 2)),
                                      (T2, (3, 1), 1, (1,))):
        ctx.set_assignment(tp, replicas)
        ctx.states[tp] = LeaderAndIsr(leader, 4, isr, 1)
    return ctx


class MemoryAdminStore:
    """The three AdminStore calls the handlers make, on dicts."""

    def __init__(self, ctx: ControllerContext, elect_into=None) -> None:
        self.ctx = ctx
        self.pending: dict | None = None
        self.elections: list = []
        self.elect_into = elect_into   # the controller's part: who leads after an election

    def partition_states(self, partitions):
        return {tp: self.ctx.states[tp] for tp in partitions if tp in self.ctx.states}

    def create_preferred_election(self, partitions):
        self.elections.append(list(partitions))
        for tp in partitions:
            if self.elect_into is not None:
                old = self.ctx.states[tp]
                self.ctx.states[tp] = LeaderAndIsr(self.elect_into, old.leader_epoch + 1, old.isr, 1)

    def reassignment(self):
        return self.pending

    def add_to_reassignment(self, additions):
        self.pending = {**(self.pending or {}), **additions}


# -- pure decisions ----------------------------------------------------------------------

def test_preferred_election_outcomes():
    ctx = context()
    states = dict(ctx.states)
    assert preferred_election_outcome(ctx, states, T0)[0] == E.ELECTION_NOT_NEEDED
    assert preferred_election_outcome(ctx, states, T1) is None         # 2 is in the ISR: elect
    assert preferred_election_outcome(ctx, states, T2)[0] == E.PREFERRED_LEADER_NOT_AVAILABLE
    assert preferred_election_outcome(ctx, states, TP("t", 9))[0] == E.UNKNOWN_TOPIC_OR_PARTITION
    ctx.shutting_down.add(2)
    assert preferred_election_outcome(ctx, states, T1)[0] == E.PREFERRED_LEADER_NOT_AVAILABLE
    ctx.deleting_topics.add("t")
    assert preferred_election_outcome(ctx, states, T0)[0] == E.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("tp, replicas, pending, code", [
    (T0, [2, 3], {}, None),                                    # a move: written
    (T0, [1, 2], {}, E.NONE),                                  # already there: nothing to do
    (T0, None, {}, E.NO_REASSIGNMENT_IN_PROGRESS),
    (T0, None, {T0: (2, 3)}, None),                            # a cancel: its origin is written
    (T0, [2, 3], {T0: (2, 3)}, E.NONE),                        # the same target again
    (T0, [3, 2], {T0: (2, 3)}, E.REASSIGNMENT_IN_PROGRESS),    # another target meanwhile
    (T0, [], {}, E.INVALID_REPLICA_ASSIGNMENT),
    (T0, [2, 2], {}, E.INVALID_REPLICA_ASSIGNMENT),
    (T0, [2, -1], {}, E.INVALID_REPLICA_ASSIGNMENT),
    (T0, [2, 7], {}, E.INVALID_REPLICA_ASSIGNMENT),            # broker 7 is not alive
    (TP("u", 0), [1], {}, E.UNKNOWN_TOPIC_OR_PARTITION),
])
def test_reassignment_outcomes(tp, replicas, pending, code):
    outcome = reassignment_outcome(context(), pending, tp, replicas)
    assert (outcome if outcome is None else outcome[0]) == code


def test_a_cancel_writes_the_replicas_from_before_the_move():
    ctx = context()
    assert cancel_target(ctx, T0) == (1, 2), "still waiting in the znode: nothing moved yet"
    ctx.reassignments[T0] = (2, 3)
    ctx.reassignment_origins[T0] = (1, 2)
    ctx.set_assignment(T0, (1, 2, 3))          # started: AR is old + new
    assert reassignment_outcome(ctx, {}, T0, None) is None
    assert cancel_target(ctx, T0) == (1, 2)


def test_listed_reassignment_relative_to_where_it_started():
    ctx = context()
    # Not taken up yet: the current replicas are the origin.
    assert listed_reassignment(ctx, T0, (2, 3)) == {
        "partition_index": 0, "replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}
    # Started: the assignment is the union now; the recorded origin still tells them apart.
    ctx.reassignment_origins[T0] = (1, 2)
    ctx.set_assignment(T0, (1, 2, 3))
    assert listed_reassignment(ctx, T0, (2, 3)) == {
        "partition_index": 0, "replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}


# -- the handlers --------------------------------------------------------------------------

def elect_body(version, partitions, election_type=0):
    body = {"topic_partitions": partitions, "timeout_ms": 1000}
    if version >= 1:
        body["election_type"] = election_type
    return body


def codes(response):
    return {(t["topic"], p["partition_id"]): p["error_code"]
            for t in response["replica_election_results"] for p in t["partition_result"]}


def test_elect_leaders_on_a_non_controller():
    apis = AdminElectionApis(lambda: None, MemoryAdminStore(context()))
    v1 = apis.elect_leaders(elect_body(1, [{"topic": "t", "partitions": [0]}]), 1)
    assert v1["error_code"] == E.NOT_CONTROLLER and v1["replica_election_results"] == []
    # v0 has no top-level error: every partition carries it.
    v0 = apis.elect_leaders(elect_body(0, [{"topic": "t", "partitions": [0, 1]}]), 0)
    assert "error_code" not in v0 and codes(v0) == {("t", 0): E.NOT_CONTROLLER, ("t", 1): E.NOT_CONTROLLER}


def test_elect_leaders_elects_what_needs_it_and_waits_for_the_controller():
    ctx = context()
    store = MemoryAdminStore(ctx, elect_into=2)
    apis = AdminElectionApis(lambda: ctx, store)
    answer = apis.elect_leaders(elect_body(2, [{"topic": "t", "partitions": [0, 1, 2, 5]}]), 2)
    assert answer["error_code"] == E.NONE
    assert codes(answer) == {("t", 0): E.ELECTION_NOT_NEEDED, ("t", 1): E.NONE,
                             ("t", 2): E.PREFERRED_LEADER_NOT_AVAILABLE,
                             ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert store.elections == [[T1]]
    # null partitions: all of them; nothing is left to elect now
    answer = apis.elect_leaders(elect_body(1, None), 1)
    assert set(codes(answer).values()) == {E.ELECTION_NOT_NEEDED, E.PREFERRED_LEADER_NOT_AVAILABLE}


def test_elect_leaders_times_out_when_the_leader_does_not_move():
    ctx = context()
    store = MemoryAdminStore(ctx, elect_into=None)     # a controller that never elects
    apis = AdminElectionApis(lambda: ctx, store)
    body = elect_body(1, [{"topic": "t", "partitions": [1]}])
    body["timeout_ms"] = 0
    assert codes(apis.elect_leaders(body, 1)) == {("t", 1): E.REQUEST_TIMED_OUT}


def test_elect_leaders_when_the_controller_resigns_while_waiting():
    ctx = context()
    current = [ctx]
    store = MemoryAdminStore(ctx, elect_into=None)
    store.create_preferred_election = lambda partitions: current.clear()   # resigns at once
    apis = AdminElectionApis(lambda: current[0] if current else None, store)
    answer = apis.elect_leaders(elect_body(1, [{"topic": "t", "partitions": [1]}]), 1)
    assert codes(answer) == {("t", 1): E.NOT_CONTROLLER}


def test_unclean_elections_are_refused():
    ctx = context()
    apis = AdminElectionApis(lambda: ctx, MemoryAdminStore(ctx))
    answer = apis.elect_leaders(elect_body(1, None, election_type=1), 1)
    assert answer["error_code"] == E.INVALID_REQUEST


def test_alter_then_list_reassignments():
    ctx = context()
    store = MemoryAdminStore(ctx)
    apis = AdminElectionApis(lambda: ctx, store)
    answer = apis.alter_reassignments({"timeout_ms": 1000, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [2, 3]}, {"partition_index": 1, "replicas": None},
        {"partition_index": 2, "replicas": [3, 3]}]}]}, 0)
    assert answer["error_code"] == E.NONE
    assert [(p["partition_index"], p["error_code"]) for p in answer["responses"][0]["partitions"]] == [
        (0, E.NONE), (1, E.NO_REASSIGNMENT_IN_PROGRESS), (2, E.INVALID_REPLICA_ASSIGNMENT)]
    assert store.pending == {T0: (2, 3)}
    listed = apis.list_reassignments({"timeout_ms": 1000, "topics": None}, 0)
    assert listed["topics"] == [{"name": "t", "partitions": [{
        "partition_index": 0, "replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}]}]
    named = apis.list_reassignments({"timeout_ms": 1000, "topics": [
        {"name": "t", "partition_indexes": [1, 2]}]}, 0)
    assert named["topics"] == []


def test_a_malformed_reassignment_node_is_an_error_answer_not_a_failure():
    ctx = context()
    store = MemoryAdminStore(ctx)

    def malformed(_additions):
        raise ValueError("/admin/reassign_partitions: not JSON")
    store.add_to_reassignment = malformed
    answer = AdminElectionApis(lambda: ctx, store).alter_reassignments({"timeout_ms": 1, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [2, 3]}]}]}, 0)
    [partition] = answer["responses"][0]["partitions"]
    assert partition["error_code"] == E.UNKNOWN_SERVER_ERROR and "not JSON" in partition["error_message"]


def test_reassignment_apis_on_a_non_controller():
    apis = AdminElectionApis(lambda: None, MemoryAdminStore(context()))
    alter = apis.alter_reassignments({"timeout_ms": 1, "topics": []}, 0)
    listed = apis.list_reassignments({"timeout_ms": 1, "topics": None}, 0)
    assert alter["error_code"] == listed["error_code"] == E.NOT_CONTROLLER
    assert alter["responses"] == listed["topics"] == []


# -- kafka-leader-election.sh's checks (before it connects) -------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--election-type", "preferred", "--all-topic-partitions"],
     "Missing required option(s): bootstrap-server"),
    (["--bootstrap-server", "h:1", "--all-topic-partitions"], "Missing required option(s): election-type"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred"],
     "One and only one of the following options is required"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t",
      "--all-topic-partitions"], "One and only one of the following options is required"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t"],
     "Missing required option(s): partition"),
    (["--bootstrap-server", "h:1", "--election-type", "preferred", "--all-topic-partitions",
      "--partition", "0"], "Option partition is only allowed if topic is used"),
])
def test_leader_election_usage_errors(argv, message, capsys):
    assert lec.main(argv) == 1
    assert capsys.readouterr().out.startswith(message)


def test_leader_election_report_of_a_refused_unclean_election():
    lines, code = lec.report("UNCLEAN", [(T0, E.INVALID_REQUEST, "only preferred")])
    assert code == 1
    assert lines == ["Error completing leader election (UNCLEAN) for partition: t-0: "
                     "INVALID_REQUEST: only preferred"]
