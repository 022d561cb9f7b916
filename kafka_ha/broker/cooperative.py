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

import gevent

# Long enough to be a timer (not the sleep(0) callback), short enough to cost nothing:
# the loop's clock is as old as the slice that yields, so the timer is due at once.
YIELD_S = 0.0005


def yield_to_io() -> None:
    """Let the hub poll I/O and run whatever became ready, then go on."""
    gevent.sleep(YIELD_S)
