"""Yielding from long loops on the gevent loop so that it serves I/O in between.

``gevent.sleep(0)`` only switches to greenlets that are already runnable: the
hub runs its queue of callbacks, new ones included, without polling sockets.
A loop that yields that way still keeps every request, and the ZooKeeper
client's pings, waiting until it ends (measured: LeaderAndIsr for 300 new
partitions held an ApiVersions answer for 2.8 s although it yielded every
50 ms; over a session timeout, the broker's registration is gone).  A timer,
however short, makes the hub finish its iteration, and polling I/O is part of it.
"""
from __future__ import annotations

import os
from typing import Callable, Iterable, Iterator, TypeVar

import gevent

from kafka_ha.clock import monotonic_ms

T = TypeVar("T")

# Long enough to be a timer (not the sleep(0) callback), short enough to cost nothing:
# the loop's clock is as old as the slice that yields, so the timer is due at once.
YIELD_S = 0.0005


def yield_to_io() -> None:
    """Let the hub poll I/O and run whatever became ready, then go on."""
    gevent.sleep(YIELD_S)


def yield_on_this_thread() -> Callable[[], None]:
    """A ``yield_to_io`` that yields on this thread (the event loop's) only, and does
    nothing in any other: work handed to a native thread has no loop to yield to.  The
    broker passes it to ``primitives.pause_long_arrays``, so that a LeaderAndIsr or
    UpdateMetadata of 10,000 partitions, or a follower's Fetch of thousands, is decoded
    and encoded in chunks with a yield between two."""
    from gevent import monkey
    get_ident = monkey.get_original("_thread", "get_ident")   # a thread's, not a greenlet's
    loop_thread = get_ident()

    def pause() -> None:
        if get_ident() == loop_thread:
            yield_to_io()
    return pause

# Longest stretch of per-partition work between two yields to the hub.  A request
# that arrives waits for one slice of every greenlet ready before it, so this sets
# everyone else's latency on a busy broker.  In the failover bench at 10k partitions
# the probe's longest wait was 490-690 ms with 50 ms slices and 260-630 ms with 10 ms
# ones; a slice costs a timer and a turn of the hub (docs/design.md section 2).
SLICE_MS = 10
# The controller's loops (deciding, recording, batching requests) take longer slices: the
# hub shares itself out slice by slice among the ready greenlets, and every broker's
# availability waits on the controller, not on this broker's fetchers and clients.  In the
# controlled shutdown of a broker leading 10k partitions (failover bench, shutdown-all),
# alternating runs: 6.24-7.39 s with 10 ms slices, 3.93-5.49 s with 40 ms.
CONTROLLER_SLICE_MS = 40


def yielding(items: Iterable[T], slice_ms: int | None = None, clock: Callable[[], int] = monotonic_ms,
             pause: Callable[[], None] | None = None) -> Iterator[T]:
    """``items``, pausing (``yield_to_io``) before the next item whenever ``slice_ms``
    have passed since the last pause: a loop over thousands of partitions then holds
    the event loop for about one slice at a time.  Whoever loops must expect other
    greenlets to have run at each pause (re-check what a request may have changed).

    >>> t = [0]
    >>> pauses = []
    >>> def clock():
    ...     t[0] += 20
    ...     return t[0]
    >>> [x for x in yielding("abcde", 50, clock, lambda: pauses.append(t[0]))]
    ['a', 'b', 'c', 'd', 'e']
    >>> pauses
    [80]
    """
    slice_ms = SLICE_MS if slice_ms is None else slice_ms
    pause = pause or yield_to_io
    sliced_at = clock()
    for item in items:
        if clock() - sliced_at >= slice_ms:
            pause()
            sliced_at = clock()
        yield item


def in_a_thread(fn: Callable[..., T], *args) -> T:
    """``fn(*args)`` in the hub's native thread pool, the calling greenlet waiting for it:
    blocking file work (fsync, a large read or write) then leaves the loop serving I/O
    and answering ZooKeeper meanwhile."""
    return gevent.get_hub().threadpool.apply(fn, args)


def fsync_in_a_thread(fd: int) -> None:
    """``os.fsync(fd)`` in the native thread pool: a large segment's fsync can take seconds."""
    in_a_thread(os.fsync, fd)


def controller_slices(items: Iterable[T]) -> Iterator[T]:
    """``yielding`` with the controller's slices (``CONTROLLER_SLICE_MS``, read at each call)."""
    return yielding(items, CONTROLLER_SLICE_MS)
