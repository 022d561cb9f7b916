"""The broker-wide bound on request bytes in flight (queued.max.request.bytes)."""
from __future__ import annotations

import gevent
import pytest

from kafka_ha.protocol.memory_pool import RequestMemoryPool


def test_reservations_within_the_limit_do_not_wait():
    pool = RequestMemoryPool(100)
    pool.acquire(60)
    pool.acquire(40)
    assert pool.in_use == 100
    pool.release(60)
    pool.release(40)
    assert pool.in_use == 0


def test_a_reservation_past_the_limit_waits_for_a_release():
    pool = RequestMemoryPool(100)
    pool.acquire(80)
    waiter = gevent.spawn(pool.acquire, 30)
    gevent.sleep(0.01)
    assert not waiter.ready() and pool.in_use == 80 and pool.waits == 1
    pool.release(80)
    waiter.join(timeout=5)
    assert waiter.ready() and pool.in_use == 30


def test_a_request_larger_than_the_pool_is_served_alone():
    """socket.request.max.bytes may exceed the pool: such a request waits for an empty pool,
    then runs alone, so it is never refused for good and never shares the pool."""
    pool = RequestMemoryPool(100)
    pool.acquire(10)
    big = gevent.spawn(pool.acquire, 500)
    gevent.sleep(0.01)
    assert not big.ready()
    pool.release(10)
    big.join(timeout=5)
    assert big.ready() and pool.in_use == 500
    small = gevent.spawn(pool.acquire, 1)
    gevent.sleep(0.01)
    assert not small.ready()
    pool.release(500)
    small.join(timeout=5)
    assert small.ready()


def test_waiters_are_served_in_arrival_order():
    pool = RequestMemoryPool(100)
    pool.acquire(100)
    order = []
    first = gevent.spawn(lambda: (pool.acquire(90), order.append("first")))
    gevent.sleep(0)
    second = gevent.spawn(lambda: (pool.acquire(5), order.append("second")))
    gevent.sleep(0.01)
    assert order == []          # the small one does not overtake the first waiter
    pool.release(100)
    gevent.joinall([first, second], timeout=5)
    assert order == ["first", "second"]


def test_unbounded_pool_never_waits():
    pool = RequestMemoryPool(-1)
    pool.acquire(10**12)
    pool.acquire(10**12)
    assert pool.waits == 0


def test_releasing_more_than_reserved_is_a_bug():
    pool = RequestMemoryPool(100)
    pool.acquire(5)
    with pytest.raises(ValueError):
        pool.release(6)
