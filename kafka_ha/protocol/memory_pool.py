"""A broker-wide bound on the bytes of requests being read or served (``queued.max.request.bytes``).

Each connection reads one request at a time, but nothing else bounds how many
connections hold one: a thousand clients sending 1 MB batches, or sixteen
stalled ones that each claimed 100 MB, add up.  Every frame reserves its size
here before its body is read and gives it back when its response has been
sent.  A reservation that does not fit waits, and while it waits its
connection reads nothing more, so the kernel's receive window pushes back on
the client instead of the broker allocating.

Waiters are served in arrival order, so a large request is not starved by a
stream of small ones.  A request larger than the whole pool (the frame limit,
``socket.request.max.bytes``, may exceed it) waits until the pool is empty and
then runs alone: it is never refused for good, and it never shares.  A limit
below zero means no bound, Kafka's default.
"""
from __future__ import annotations

from collections import deque

from gevent.event import Event


class RequestMemoryPool:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0
        self.waits = 0               # reservations that had to wait (for metrics and tests)
        self._waiting: deque[tuple[int, Event]] = deque()

    def acquire(self, size: int) -> None:
        """Reserve ``size`` bytes, waiting (on the gevent hub) until they fit."""
        if self.limit < 0:
            self.in_use += size
            return
        if not self._waiting and self._fits(size):
            self.in_use += size
            return
        self.waits += 1
        ready = Event()
        entry = (size, ready)
        self._waiting.append(entry)
        try:
            ready.wait()
        except BaseException:
            # Killed while waiting (the connection closed): give back what the
            # wake-up may already have granted, and let the next one in.
            if entry in self._waiting:
                self._waiting.remove(entry)
            elif ready.is_set():
                self.in_use -= size
            self._grant()
            raise

    def release(self, size: int) -> None:
        if size > self.in_use:
            raise ValueError(f"releasing {size} bytes with only {self.in_use} reserved")
        self.in_use -= size
        self._grant()

    def _fits(self, size: int) -> bool:
        return self.in_use == 0 or self.in_use + size <= self.limit

    def _grant(self) -> None:
        while self._waiting and self._fits(self._waiting[0][0]):
            size, ready = self._waiting.popleft()
            self.in_use += size
            ready.set()
