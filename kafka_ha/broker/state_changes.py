"""When the replica manager's state last changed, and when its background disk work may run.

A state change is a LeaderAndIsr or StopReplica being applied (one at a time, under
``lock``), or an UpdateMetadata that changed the live brokers (a failover or a restart
has begun; its LeaderAndIsr follows once the controller has written the states).

The deferred pass (``broker/deferred_log_writes.py``) waits until the changes have been
quiet for ``DEFERRED_WRITES_QUIET_MS`` (so that its file writes fall after a failover's
window: docs/design.md 6.9), or runs ``DEFERRED_WRITES_MAX_WAIT_MS`` after its last run at
the latest, and stops at the first change that comes while it runs.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from gevent.lock import BoundedSemaphore

from kafka_ha.clock import monotonic_ms

DEFERRED_WRITES_QUIET_MS = 10000
DEFERRED_WRITES_MAX_WAIT_MS = 30000


class StateChanges:
    def __init__(self) -> None:
        self.lock = BoundedSemaphore(1)      # held while a LeaderAndIsr or StopReplica is applied
        self.changed_ms = self.pass_ms = monotonic_ms()
        self.count = 0

    @contextmanager
    def applying(self) -> Iterator[None]:
        """Around a LeaderAndIsr or StopReplica: one at a time, counted once it is done."""
        with self.lock:
            try:
                yield
            finally:
                self.changed()

    def changed(self) -> None:
        self.changed_ms = monotonic_ms()
        self.count += 1

    def time_for_a_pass(self, now_ms: int) -> bool:
        """Whether the deferred pass may start now (it counts as started if so)."""
        if (now_ms - self.changed_ms < DEFERRED_WRITES_QUIET_MS
                and now_ms - self.pass_ms < DEFERRED_WRITES_MAX_WAIT_MS):
            return False
        self.pass_ms = now_ms
        return True

    def busy(self) -> bool:
        return self.lock.locked()

    def since_now(self) -> Callable[[], bool]:
        """A test for the pass's pauses: true while a request is applied, and from the
        first change after now on."""
        count = self.count
        return lambda: self.busy() or self.count != count
