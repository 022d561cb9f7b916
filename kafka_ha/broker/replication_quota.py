"""Replication quotas (KIP-73): the byte rate at which throttled replicas move.

Kafka's ReplicationQuotaManager, in pure form (the clock is injected):

- The rate is Kafka's sampled ``Rate``: bytes recorded into ``samples`` windows of
  ``window_ms`` each (``replication.quota.window.num`` = 11,
  ``replication.quota.window.size.seconds`` = 1), divided by the time those windows
  cover.  Until ``samples - 1`` full windows have passed, the time counts as that
  many windows, so a burst right after start-up does not read as a huge rate.
- The quota is exceeded when that rate is above the bound
  (``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``,
  bytes/s, dynamic per broker; Long.MAX_VALUE, i.e. no bound, by default).
- A partition is throttled on this broker when the topic config
  ``leader.replication.throttled.replicas`` (or ``follower.``) names
  ``<partition>:<this broker>``, or is ``*``.
- The leader leaves a throttled partition out of a follower's fetch answer while the
  quota is exceeded, unless that follower is in the ISR; the follower leaves a throttled
  partition out of its fetch request while its quota is exceeded, unless it has caught
  up with the leader.  Both count every byte of throttled partitions they move, in sync
  or not, so in-sync traffic uses up the budget but is never held back.
"""
from __future__ import annotations

import functools
from typing import Callable

from kafka_ha.config_values import _throttled_replicas
from kafka_ha.model import TopicPartition

UNBOUNDED = (1 << 63) - 1      # Kafka's default rate: Long.MAX_VALUE, no throttle
ALL_REPLICAS = "*"


@functools.lru_cache(maxsize=4096)
def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | str:
    """The partitions a throttled-replicas value throttles on ``broker_id``: ``*`` for all.
    A value that does not parse throttles nothing (it was reported when read).

    >>> sorted(throttled_partitions("0:1,1:2,2:1", 1)), throttled_partitions("*", 5)
    ([0, 2], '*')
    """
    try:
        text = _throttled_replicas(value)
    except ValueError:
        return frozenset()
    if text == ALL_REPLICAS:
        return ALL_REPLICAS
    pairs = (item.split(":") for item in text.split(",") if item)
    return frozenset(int(p) for p, b in pairs if int(b) == broker_id)


def replica_list(pairs) -> str:
    """``p:b`` pairs as a config value, in order, each once.

    >>> replica_list([(0, 1), (0, 2), (0, 1)])
    '0:1,0:2'
    """
    return ",".join(dict.fromkeys(f"{p}:{b}" for p, b in pairs))


class SampledRate:
    """Bytes per second over the last ``samples`` windows of ``window_ms`` (Kafka's Rate
    over a SampledStat), read from ``clock_ms``.

    >>> t = [0]; r = SampledRate(3, 1000, lambda: t[0])
    >>> r.record(2000); r.rate()       # 2000 B over the minimum of 2 windows
    1000.0
    >>> t[0] = 5000; r.rate()          # the window that held them has expired
    0.0
    """

    def __init__(self, samples: int, window_ms: int, clock_ms: Callable[[], float]) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a rate needs at least one window of at least 1 ms")
        self.samples, self.window_ms, self._clock = samples, window_ms, clock_ms
        self._windows: list[list[float]] = []   # [start ms, bytes], oldest first

    def _purge(self, now: float) -> None:
        expire_before = now - self.samples * self.window_ms
        while self._windows and self._windows[0][0] <= expire_before:
            self._windows.pop(0)

    def record(self, nbytes: int) -> None:
        now = self._clock()
        self._purge(now)
        if not self._windows or now >= self._windows[-1][0] + self.window_ms:
            self._windows.append([now, 0.0])
        self._windows[-1][1] += nbytes

    def rate(self) -> float:
        now = self._clock()
        self._purge(now)
        if not self._windows:
            return 0.0
        elapsed = now - self._windows[0][0]
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return sum(w[1] for w in self._windows) * 1000.0 / max(elapsed, 1.0)


class ReplicationQuota:
    """One side's quota (leader or follower) on one broker.

    ``throttled_value(topic)`` is the topic's ``<side>.replication.throttled.replicas``
    value ("" if unset), read when asked: topic configs change at runtime.

    >>> t = [0]; q = ReplicationQuota(1, lambda topic: "0:1", bound=1000, samples=3,
    ...                                window_ms=1000, clock_ms=lambda: t[0])
    >>> q.is_throttled(TopicPartition("t", 0)), q.is_throttled(TopicPartition("t", 1))
    (True, False)
    >>> q.record(2000); q.exceeded()                  # 1000 B/s: at the bound, not above
    False
    >>> q.record(1); q.exceeded(), q.should_throttle(TopicPartition("t", 0), in_sync=True)
    (True, False)
    """

    def __init__(self, broker_id: int, throttled_value: Callable[[str], str], bound: int = UNBOUNDED,
                 samples: int = 11, window_ms: int = 1000, *, clock_ms: Callable[[], float]) -> None:
        self.broker_id = broker_id
        self._throttled_value = throttled_value
        self.bound = bound
        self._rate = SampledRate(samples, window_ms, clock_ms)

    def set_bound(self, bytes_per_s: int) -> None:
        self.bound = bytes_per_s

    def is_throttled(self, tp: TopicPartition) -> bool:
        value = self._throttled_value(tp.topic)
        if not value:
            return False
        partitions = throttled_partitions(value, self.broker_id)
        return partitions == ALL_REPLICAS or tp.partition in partitions

    def record(self, nbytes: int) -> None:
        if nbytes > 0:
            self._rate.record(nbytes)

    def rate(self) -> float:
        return self._rate.rate()

    def exceeded(self) -> bool:
        return self.bound < UNBOUNDED and self._rate.rate() > self.bound

    def should_throttle(self, tp: TopicPartition, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: hold ``tp`` back now?"""
        return not in_sync and self.is_throttled(tp) and self.exceeded()
