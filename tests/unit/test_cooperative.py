"""Long loops on the gevent loop must let it poll I/O between slices (ZooKeeper pings,
requests from clients), not only switch to greenlets that are already runnable."""
from __future__ import annotations

import socket

import gevent
import gevent.socket

from kafka_ha.cooperative import yield_to_io


def test_a_busy_loop_that_yields_lets_waiting_io_be_served():
    ours, theirs = socket.socketpair()
    reader = gevent.socket.socket(fileno=ours.detach())
    got = []
    waiting = gevent.spawn(lambda: got.append(reader.recv(1)))
    gevent.sleep(0.01)             # the reader now waits for its socket to be readable
    theirs.sendall(b"x")           # and it is, before the busy loop starts
    for _ in range(50):
        yield_to_io()
        if got:
            break
    served_during_loop = bool(got)
    waiting.join(timeout=5)
    reader.close()
    theirs.close()
    assert served_during_loop, "the reader was not served while the loop ran (I/O never polled)"
