"""The group membership state machine (coordinator/group_state.py), driven by hand."""
from kafka_ha.coordinator.group_state import Group, GroupState
from kafka_ha.protocol.errors import ErrorCode

SESSION, REBALANCE = 10000, 30000
RANGE = [("range", b"sub")]


def join(group, member_id="", now=0, protocols=RANGE, protocol_type="consumer", client="c"):
    return group.join(member_id, client, "/127.0.0.1", SESSION, REBALANCE, protocol_type,
                      protocols, now)


def stable_group_of_two():
    g = Group("g")
    first = join(g, client="a")
    a = first.member_id
    assert first.deliver[("join", a)]["generation_id"] == 1   # alone: joins at once
    g.sync(a, 1, {a: b"A"}, 0)
    second = join(g, client="b", now=1)
    b = second.member_id
    assert g.state == GroupState.PREPARING_REBALANCE and not second.deliver
    assert g.heartbeat(a, 1, 2).reply["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS
    done = join(g, a, now=3)
    assert set(done.deliver) == {("join", a), ("join", b)}
    assert done.deliver[("join", a)]["members"] and not done.deliver[("join", b)]["members"]
    assert g.state == GroupState.COMPLETING_REBALANCE and g.generation == 2
    assert g.sync(b, 2, {}, 4).reply is None                      # a follower waits
    synced = g.sync(a, 2, {a: b"A2", b: b"B2"}, 5)
    assert synced.persist and synced.deliver[("sync", b)]["assignment"] == b"B2"
    assert g.state == GroupState.STABLE
    return g, a, b


def test_two_members_join_sync_and_become_stable():
    g, a, b = stable_group_of_two()
    assert g.leader_id == a
    assert g.heartbeat(b, 2, 6).reply == {"error_code": ErrorCode.NONE}
    assert g.to_record()["members"][1]["assignment"] == b"B2"


def test_errors_for_unknown_member_and_old_generation():
    g, a, b = stable_group_of_two()
    assert g.heartbeat("nobody", 2, 7).reply["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.heartbeat(a, 1, 7).reply["error_code"] == ErrorCode.ILLEGAL_GENERATION
    assert g.sync(a, 1, {}, 7).reply["error_code"] == ErrorCode.ILLEGAL_GENERATION
    assert join(g, "nobody").reply["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.commit_error("nobody", 2, 7) == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.commit_error(a, 1, 7) == ErrorCode.ILLEGAL_GENERATION
    assert g.commit_error(a, 2, 7) == ErrorCode.NONE
    assert g.commit_error("", -1, 7) == ErrorCode.UNKNOWN_MEMBER_ID   # not while it has members


def test_inconsistent_protocols_are_refused():
    g, a, b = stable_group_of_two()
    assert join(g, protocols=[("sticky", b"")]).reply["error_code"] == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(g, protocol_type="connect").reply["error_code"] == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(Group("h"), protocols=[]).reply["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_a_silent_member_expires_and_the_rest_rebalance():
    g, a, b = stable_group_of_two()
    # b was last heard of at 4 (its SyncGroup), a at 5.
    assert not g.tick(4 + SESSION).deliver and len(g.members) == 2
    g.heartbeat(a, 2, 5000)
    g.tick(4 + SESSION + 1)                     # b's session is over
    assert set(g.members) == {a} and g.state == GroupState.PREPARING_REBALANCE
    rejoined = join(g, a, now=5 + SESSION + 2)
    assert rejoined.deliver[("join", a)]["generation_id"] == 3
    assert g.state == GroupState.COMPLETING_REBALANCE


def test_members_that_do_not_rejoin_in_time_are_dropped_at_the_rebalance_timeout():
    g, a, b = stable_group_of_two()
    join(g, a, now=10)                           # a rejoins (its leader's rejoin starts a rebalance)
    for t in (5000, 15000, 25000):               # b stays alive but does not rejoin
        g.heartbeat(b, 2, t)
    assert g.tick(10 + REBALANCE - 1).deliver == {}
    done = g.tick(10 + REBALANCE)
    assert set(done.deliver) == {("join", a)} and set(g.members) == {a}
    assert g.generation == 3


def test_leave_rebalances_and_last_leave_empties_the_group():
    g, a, b = stable_group_of_two()
    assert g.leave(b, 10).reply == {"error_code": ErrorCode.NONE}
    assert g.state == GroupState.PREPARING_REBALANCE
    assert g.leave(b, 10).reply["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    left = g.leave(a, 11)
    assert g.state == GroupState.EMPTY and left.persist and g.generation == 3
    assert g.commit_error("", -1, 12) == ErrorCode.NONE               # simple commits again


def test_a_rebalance_answers_waiting_syncs_with_rebalance_in_progress():
    g = Group("g")
    a = join(g).member_id
    b = join(g, now=1).member_id
    join(g, a, now=2)
    assert g.state == GroupState.COMPLETING_REBALANCE
    g.sync(b, g.generation, {}, 3)
    assert g.commit_error(b, g.generation, 3) == ErrorCode.REBALANCE_IN_PROGRESS
    c = join(g, now=4)
    assert c.deliver[("sync", b)]["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS
    assert g.sync(b, g.generation, {}, 5).reply["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS


def test_initial_rebalance_delay_waits_for_more_members():
    g = Group("g", initial_rebalance_delay_ms=3000)
    a = join(g, now=0).member_id
    b = join(g, now=100).member_id
    assert g.tick(2999).deliver == {}
    done = g.tick(3000)
    assert set(done.deliver) == {("join", a), ("join", b)} and g.generation == 1


def test_a_failed_metadata_write_starts_over():
    g, a, b = stable_group_of_two()
    g.store_failed(2, ErrorCode.NOT_COORDINATOR, 20)
    assert g.state == GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in g.members.values())


def test_the_most_voted_common_protocol_wins():
    g = Group("g")
    a = join(g, protocols=[("roundrobin", b"r"), ("range", b"x")]).member_id
    join(g, now=1, protocols=[("range", b"y"), ("roundrobin", b"s")])
    join(g, now=2, protocols=[("range", b"z")])
    done = join(g, a, now=3, protocols=[("roundrobin", b"r"), ("range", b"x")])
    assert done.deliver[("join", a)]["protocol_name"] == "range"
    assert [m["metadata"] for m in done.deliver[("join", a)]["members"]] == [b"x", b"y", b"z"]


def test_unload_answers_waiters_and_marks_the_group_dead():
    g = Group("g")
    a = join(g).member_id
    b = join(g, now=1).member_id
    out = g.unload()
    assert out.deliver[("join", b)]["error_code"] == ErrorCode.NOT_COORDINATOR
    assert g.state == GroupState.DEAD
    assert g.heartbeat(a, 1, 2).reply["error_code"] == ErrorCode.NOT_COORDINATOR


def test_a_loaded_group_is_stable_with_its_members():
    g, a, b = stable_group_of_two()
    loaded = Group.from_record("g", g.to_record(), now=100)
    assert loaded.state == GroupState.STABLE and loaded.generation == 2
    assert loaded.heartbeat(b, 2, 101).reply["error_code"] == ErrorCode.NONE
    assert loaded.sync(b, 2, {}, 102).reply["assignment"] == b"B2"
    assert Group.from_record("e", {**g.to_record(), "members": []}, 0).state == GroupState.EMPTY
