"""KIP-227 fetch sessions: the leader's cache (pure logic, no broker)."""
from __future__ import annotations

import random

import pytest

from kafka_ha.broker.fetch_sessions import (FINAL_EPOCH, INITIAL_EPOCH, NO_SESSION, CachedPartition,
                                            FetchSession, FetchSessionCache)
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode

A, B, C = (TopicPartition("t", p) for p in range(3))


def entry(hw=10, records=b"", error=0, log_start=0):
    return {"error_code": error, "high_watermark": hw, "log_start_offset": log_start, "records": records}


def open_session(cache, replica_id=2, wanted=((A, 5, 100), (B, 7, 100)), now=0):
    context = cache.context(replica_id, NO_SESSION, INITIAL_EPOCH, list(wanted), [], now)
    assert context.new_session and not context.incremental
    return cache.open(context, replica_id, [(tp, entry()) for tp, _, _ in wanted], now)


def test_full_fetch_opens_a_session_expecting_epoch_1():
    cache = FetchSessionCache(rng=random.Random(1))
    session_id = open_session(cache)
    assert session_id != NO_SESSION
    session = cache.sessions[session_id]
    assert session.epoch == 1
    assert session.wanted() == [(A, 5, 100), (B, 7, 100)]


def test_final_epoch_is_a_sessionless_full_fetch_and_closes_the_named_session():
    cache = FetchSessionCache()
    session_id = open_session(cache)
    context = cache.context(2, session_id, FINAL_EPOCH, [(C, 1, 100)], [], 0)
    assert context.wanted == [(C, 1, 100)]
    assert not context.new_session and context.session is None
    assert session_id not in cache.sessions


def test_full_fetch_naming_an_old_session_replaces_it():
    cache = FetchSessionCache()
    old = open_session(cache)
    new = open_session(cache)
    cache.context(2, old, INITIAL_EPOCH, [(A, 1, 100)], [], 0)
    assert old not in cache.sessions and new in cache.sessions


def test_incremental_fetch_reads_every_session_partition_and_applies_changes():
    cache = FetchSessionCache()
    session_id = open_session(cache)
    context = cache.context(2, session_id, 1, [(A, 9, 100), (C, 0, 50)], [B], now_ms=5)
    assert context.incremental and context.error == ErrorCode.NONE
    assert context.wanted == [(A, 9, 100), (C, 0, 50)]
    session = cache.sessions[session_id]
    assert (session.epoch, session.last_used_ms) == (2, 5)
    # An empty incremental request still reads (and long-polls on) the session's partitions.
    assert cache.context(2, session_id, 2, [], [], 6).wanted == [(A, 9, 100), (C, 0, 50)]


@pytest.mark.parametrize("session_offset, epoch, replica_id, error", [
    (1, 1, 2, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),    # no such session
    (0, 2, 2, ErrorCode.INVALID_FETCH_SESSION_EPOCH),   # skipped an epoch
    (0, 1, 3, ErrorCode.INVALID_FETCH_SESSION_EPOCH),   # another fetcher's session
])
def test_unknown_session_and_wrong_epoch_are_refused(session_offset, epoch, replica_id, error):
    cache = FetchSessionCache()
    session_id = open_session(cache)
    context = cache.context(replica_id, session_id + session_offset, epoch, [(A, 1, 1)], [], 0)
    assert context.error == error and context.wanted == []
    assert cache.sessions[session_id].epoch == 1   # the refused request changed nothing


def test_a_replayed_request_is_refused():
    cache = FetchSessionCache()
    session_id = open_session(cache)
    assert cache.context(2, session_id, 1, [], [], 0).error == ErrorCode.NONE
    assert cache.context(2, session_id, 1, [], [], 0).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_incremental_response_carries_only_what_changed():
    session = FetchSession(1, 2, 1, 0, {A: CachedPartition(5, 100), B: CachedPartition(7, 100),
                                        C: CachedPartition(0, 100)})
    session.remember([(A, entry()), (B, entry()), (C, entry())])
    chosen = session.select([(A, entry(records=b"x")), (B, entry()), (C, entry(hw=11))])
    assert [tp for tp, _ in chosen] == [A, C]
    assert session.select([(A, entry()), (B, entry(error=6)), (C, entry(hw=11))]) == [(B, entry(error=6))]
    assert session.select([(A, entry(log_start=3)), (B, entry()), (C, entry(hw=11))]) == \
        [(A, entry(log_start=3))]


def test_partitions_that_returned_records_move_to_the_back():
    session = FetchSession(1, 2, 1, 0, {A: CachedPartition(0, 1), B: CachedPartition(0, 1),
                                        C: CachedPartition(0, 1)})
    session.select([(A, entry(records=b"x")), (B, entry()), (C, entry())])
    assert list(session.partitions) == [B, C, A]


def test_forgotten_and_unknown_partitions_are_not_answered():
    session = FetchSession(1, 2, 1, 0, {A: CachedPartition(0, 1)})
    session.apply([], [A, B])
    assert session.partitions == {}
    assert session.select([(A, entry(records=b"x"))]) == []


def test_full_cache_evicts_only_idle_sessions():
    cache = FetchSessionCache(max_slots=2, min_eviction_ms=1000)
    first = open_session(cache, now=0)
    second = open_session(cache, now=500)
    assert open_session(cache, now=900) == NO_SESSION     # nobody idle long enough
    third = open_session(cache, now=1200)                 # the first has idled 1200 ms
    assert set(cache.sessions) == {second, third} and first not in cache.sessions


def test_a_follower_session_may_evict_a_consumer_session():
    cache = FetchSessionCache(max_slots=1, min_eviction_ms=10**9)
    consumer = open_session(cache, replica_id=-1)
    assert open_session(cache, replica_id=-1) == NO_SESSION
    follower = open_session(cache, replica_id=2)
    assert set(cache.sessions) == {follower} and consumer not in cache.sessions
    assert open_session(cache, replica_id=3) == NO_SESSION   # followers do not evict followers


def test_zero_slots_turns_sessions_off():
    assert open_session(FetchSessionCache(max_slots=0)) == NO_SESSION
