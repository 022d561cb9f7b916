"""The replica fetcher when things go wrong: broken connections, errors from the leader,
partitions that leave while a request is out, a lost fetch session, and a follower whose
log end is outside the leader's log.  Real logs on disk, the fake leader of
tests/harness/fake_leader.py, no network, no ZooKeeper.
"""
import logging

import pytest

from kafka_ha.broker import replica_fetcher
from kafka_ha.broker.fetch_sessions import INITIAL_EPOCH
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from tests.harness.fake_leader import (SESSION_ID, FakeLeader, everything, follower_partition, open_log,
                                       same_bytes, start_fetcher, wait_for, write)

A, B, C = TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("c", 0)
FOLLOWER_DIR = 2


@pytest.fixture
def leader(monkeypatch):
    fake = FakeLeader()
    monkeypatch.setattr(replica_fetcher, "BrokerConnection", fake.connect)
    monkeypatch.setattr(replica_fetcher, "BACKOFF_S", 0.02)   # the waits, not their length, count
    yield fake
    for log in fake.logs.values():
        log.close()


@pytest.fixture
def followers(tmp_path):
    """``followers(*tps)``: broker 2's follower partitions, their logs closed at teardown."""
    made = []

    def make(*tps):
        partitions = [follower_partition(open_log(tmp_path, FOLLOWER_DIR, tp)) for tp in tps]
        made.extend(partitions)
        return partitions
    yield make
    for p in made:
        p.log.close()


def leading(leader, tmp_path, tp, *values, epoch=0):
    log = leader.logs[tp] = open_log(tmp_path, 1, tp)
    write(log, epoch, *values)
    return log


@pytest.mark.parametrize("failure", [ConnectionResetError("Connection reset by peer"),
                                     ValueError("a frame that does not decode")])
def test_a_failed_request_closes_the_connection_and_the_fetcher_starts_over(
        tmp_path, leader, followers, caplog, failure):
    ours = leading(leader, tmp_path, A, b"v0", b"v1")
    leader.failures.append(failure)
    [p] = followers(A)
    fetcher = start_fetcher([p])
    try:
        wait_for(lambda: same_bytes(p.log, ours), "the follower caught up")
    finally:
        fetcher.stop()
    assert leader.connections == 2, "a new connection after the failure"
    assert (f"Broker 2: fetch from broker 1 at leader.invalid:9092 failed: {failure}"
            in caplog.messages)


def test_an_unexpected_error_starts_over_instead_of_ending_replication(tmp_path, leader, followers, caplog):
    ours = leading(leader, tmp_path, A, b"v0")
    leader.failures.append(KeyError("error_code"))   # a bug, say: not an I/O or decoding error
    [p] = followers(A)
    fetcher = start_fetcher([p])
    try:
        wait_for(lambda: same_bytes(p.log, ours), "the follower caught up")
    finally:
        fetcher.stop()
    assert leader.connections == 2
    assert "Broker 2: fetcher for broker 1 failed unexpectedly; starting over" in caplog.messages


def test_a_leader_not_ready_to_answer_for_an_epoch_is_asked_again(tmp_path, leader, followers):
    ours = leading(leader, tmp_path, A, b"m0", b"m1")
    write(ours, 2, b"L2")
    leader.epoch_errors[A] = [ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.NOT_LEADER_FOR_PARTITION]
    [p] = followers(A)
    write(p.log, 0, b"m0", b"m1")
    write(p.log, 1, b"F2", b"F3")   # an epoch the leader never had: must be cut
    fetcher = start_fetcher([p])
    try:
        wait_for(lambda: A in fetcher.fetching and same_bytes(p.log, ours), "the follower caught up")
    finally:
        fetcher.stop()
    assert leader.requests[:3] == [ApiKey.OFFSETS_FOR_LEADER_EPOCH] * 3
    assert p.log.epoch_cache.entries() == [(0, 0), (2, 2)]


def test_fetches_do_not_long_poll_while_other_partitions_wait_to_truncate(tmp_path, leader, followers):
    """After a failover a follower asks a new leader that has not taken its LeaderAndIsr
    yet; those partitions ask again after a pause.  A long poll for the partitions that
    were ready held that next truncation round for replica.fetch.wait.max.ms (500 ms,
    seen in the failover bench), and with it the HW of the partitions still waiting."""
    leading(leader, tmp_path, A, b"a0")
    leading(leader, tmp_path, B, b"b0")
    leader.epoch_errors[B] = [ErrorCode.NOT_LEADER_FOR_PARTITION] * 3
    followers_ = followers(A, B)
    fetcher = start_fetcher(followers_)
    try:
        wait_for(lambda: B in fetcher.fetching, "B truncated")
        fetched = len(leader.fetch_waits)
        wait_for(lambda: len(leader.fetch_waits) >= fetched + 2, "more fetches")
    finally:
        fetcher.stop()
    last_epoch_request = max(i for i, k in enumerate(leader.requests)
                             if k == ApiKey.OFFSETS_FOR_LEADER_EPOCH)
    while_waiting = [w for i, w in leader.fetch_waits if i < last_epoch_request]
    after = [w for i, w in leader.fetch_waits if i > last_epoch_request]
    assert while_waiting and set(while_waiting) == {0}, leader.fetch_waits
    assert after and set(after) == {50}, "a long poll again once nothing waits to truncate"


def test_a_partition_whose_truncation_fails_is_marked_failed_alone(tmp_path, leader, followers, caplog):
    for tp in (A, B):
        leading(leader, tmp_path, tp, b"v0", b"v1")
    a, b = followers(A, B)

    def unreadable_index(offset):
        raise ValueError("a-0: corrupt offset index")
    a.truncate_to = unreadable_index
    fetcher = start_fetcher([a, b])
    try:
        wait_for(lambda: same_bytes(b.log, leader.logs[B]), "b-0 caught up")
        assert fetcher.failed_partitions == {A} and fetcher.fetching == {B}
        assert not fetcher.needs_truncation and a.log.log_end_offset == 0
    finally:
        fetcher.stop()
    assert ("Broker 2: unexpected error occurred while processing data for partition [a,0] at offset 0 "
            "from leader 1: ValueError: a-0: corrupt offset index. Partition [a,0] marked as failed"
            in caplog.messages)


def test_partitions_without_a_replica_here_are_dropped_and_an_idle_fetcher_wakes_for_new_ones(
        tmp_path, leader, followers):
    ours = leading(leader, tmp_path, A, b"v0")
    [a] = followers(A)
    hosted = {}
    fetcher = start_fetcher([], hosted.get)
    try:
        fetcher.add({C})   # not hosted here (deleted meanwhile): nothing to ask the leader
        wait_for(lambda: fetcher.idle, "c-0 was dropped")
        hosted[A] = a
        fetcher.add({A})
        wait_for(lambda: same_bytes(a.log, ours), "a-0 caught up")
        del hosted[A]      # gone while it is fetched
        wait_for(lambda: fetcher.idle, "a-0 was dropped")
        asked = len(leader.requests)
        write(ours, 0, b"v1")
        hosted[A] = a
        fetcher.add({A})
        wait_for(lambda: same_bytes(a.log, ours), "a-0 caught up again")
    finally:
        fetcher.stop()
    assert ApiKey.OFFSETS_FOR_LEADER_EPOCH in leader.requests[asked:], "added again: truncation first"
    assert leader.requests.count(ApiKey.OFFSETS_FOR_LEADER_EPOCH) == 2, "none was sent for c-0 alone"


def test_a_partition_removed_while_its_request_is_out_is_left_as_it_is(tmp_path, leader, followers):
    for tp in (A, B):
        ours = leading(leader, tmp_path, tp, b"m0")
        write(ours, 2, b"L1")
    a, b = followers(A, B)
    for p in (a, b):
        write(p.log, 0, b"m0")
        write(p.log, 1, b"F1")   # to be cut by truncation
    fetcher = None

    def remove_a_while_truncating(api_key):
        if api_key == ApiKey.OFFSETS_FOR_LEADER_EPOCH:
            fetcher.remove({A})
    leader.during = remove_a_while_truncating
    fetcher = start_fetcher([a, b])
    try:
        wait_for(lambda: same_bytes(b.log, leader.logs[B]), "b-0 caught up")
        assert a.log.log_end_offset == 2 and b"F1" in everything(a.log), "a-0 was truncated after it was removed"
        assert fetcher.fetching == {B} and not fetcher.needs_truncation

        def remove_b_while_fetching(api_key):
            if api_key == ApiKey.FETCH:
                fetcher.remove({B})
        leader.during = remove_b_while_fetching
        before = b.log.log_end_offset
        write(leader.logs[B], 2, b"L2")
        wait_for(lambda: not fetcher.fetching, "b-0 was removed")
        assert b.log.log_end_offset == before, "b-0 appended what came for it after it was removed"
    finally:
        fetcher.stop()


def test_errors_for_one_partition_back_off_and_keep_fetching_it(tmp_path, leader, followers):
    ours = leading(leader, tmp_path, A, b"v0", b"v1")
    leader.fetch_errors[A] = [ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    [a] = followers(A)
    fetcher = start_fetcher([a])
    try:
        wait_for(lambda: same_bytes(a.log, ours), "a-0 caught up")
    finally:
        fetcher.stop()
    assert not fetcher.failed_partitions, "the controller's LeaderAndIsr settles such errors"
    assert leader.requests.count(ApiKey.FETCH) >= 3


def test_a_lost_fetch_session_is_followed_by_a_full_fetch(tmp_path, leader, followers, caplog):
    leader.sessions = True
    caplog.set_level(logging.INFO, logger=replica_fetcher.__name__)
    ours = leading(leader, tmp_path, A, b"v0")
    leading(leader, tmp_path, B, b"w0")
    a, b = followers(A, B)
    fetcher = start_fetcher([a, b])
    try:
        wait_for(lambda: same_bytes(a.log, ours) and (SESSION_ID, 1) in leader.fetches, "a session")
        fetcher.remove({B})
        wait_for(lambda: leader.forgotten, "the leader was told to forget b-0")
        assert leader.forgotten == [B]
        leader.session_errors.append(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        lost_at = len(leader.fetches)
        write(ours, 0, b"v1")
        wait_for(lambda: same_bytes(a.log, ours), "a-0 caught up")
    finally:
        fetcher.stop()
    # The request after the refused one is a full fetch (epoch 0), which also closes the old session.
    assert leader.fetches[lost_at + 1] == (SESSION_ID, INITIAL_EPOCH), leader.fetches[lost_at - 1:]
    assert ("Broker 2: fetch session with broker 1 lost (FETCH_SESSION_ID_NOT_FOUND); "
            "starting a new one") in caplog.messages


def test_a_follower_below_the_leaders_log_start_starts_over_there(tmp_path, leader, followers, caplog):
    ours = leading(leader, tmp_path, A, *(b"v%d" % i for i in range(10)))
    ours.maybe_increment_log_start_offset(6)   # retention deleted what the follower lacks
    leader.list_offsets_errors[A] = [ErrorCode.NOT_LEADER_FOR_PARTITION]   # asked again
    caplog.set_level(logging.INFO, logger=replica_fetcher.__name__)
    [a] = followers(A)
    fetcher = start_fetcher([a])
    try:
        wait_for(lambda: a.log.log_end_offset == 10, "a-0 caught up")
    finally:
        fetcher.stop()
    assert a.log.log_start_offset == 6
    assert a.log.read(6, 1 << 20).to_bytes() == ours.read(6, 1 << 20).to_bytes()
    assert leader.requests.count(ApiKey.LIST_OFFSETS) == 2
    assert ("Partition [a,0] on broker 2: LEO 0 is below the leader's log start 6; starting over there"
            in caplog.messages)


def test_a_follower_past_the_leaders_log_end_truncates_again(tmp_path, leader, followers):
    ours = leading(leader, tmp_path, A, *(b"v%d" % i for i in range(6)))
    [a] = followers(A)
    fetcher = start_fetcher([a])
    try:
        wait_for(lambda: same_bytes(a.log, ours), "a-0 caught up")
        asked = len(leader.requests)
        ours.truncate_to(3)   # the leader lost records (an unclean election, say)
        wait_for(lambda: same_bytes(a.log, ours), "a-0 truncated to the leader's log end")
        assert A in fetcher.fetching
    finally:
        fetcher.stop()
    assert leader.requests[asked:].count(ApiKey.LIST_OFFSETS) == 1
    assert leader.requests[asked:].count(ApiKey.OFFSETS_FOR_LEADER_EPOCH) == 1


def test_the_partitions_fenced_in_one_fetch_are_logged_as_one_record(tmp_path, leader, followers, caplog):
    # A leader ahead by an epoch fences thousands of partitions in one answer (a failover):
    # one record, one whole line per partition.
    caplog.set_level(logging.INFO, logger="kafka_ha.broker.replica_fetcher")
    for tp in (A, B, C):
        leading(leader, tmp_path, tp, b"v0")
        leader.fetch_errors[tp] = [ErrorCode.FENCED_LEADER_EPOCH]
    partitions = followers(A, B, C)
    fetcher = start_fetcher(partitions)
    try:
        wait_for(lambda: not fetcher.fetching and not fetcher.needs_truncation, "all three fenced")
    finally:
        fetcher.stop()
    records = [r for r in caplog.records if "is fenced by leader" in r.getMessage()]
    assert len(records) == 1
    assert sorted(records[0].getMessage().split("\n")) == [
        f"Broker 2: partition {tp} is fenced by leader 1 (our leader epoch 9 is old); waiting for "
        f"the LeaderAndIsr of its new epoch" for tp in (A, B, C)]
