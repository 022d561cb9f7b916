"""Start-up steps that need ZooKeeper, repeated until ZooKeeper answers.

Kafka gives up when it has no ZooKeeper connection within
``zookeeper.connection.timeout.ms``, or when a request of its start-up meets a
connection loss, and exits ("Fatal error during KafkaServer startup").  A
broker that exits is worse than one that waits: after a full stop it may be
the last in-sync replica of its partitions, which then stay offline until an
operator starts it again (issue 23: a long log load let the session expire,
and the first request after it failed with ConnectionLoss).  So the steps
before the broker registers (connecting, creating the common paths) are tried
again, with a growing pause, for as long as ZooKeeper is unavailable; every
other error still ends the start-up.  kazoo opens a new session by itself after
an expiry, so an attempt after a lost session runs in the new one.
"""
from __future__ import annotations

import logging
from typing import Callable, TypeVar

from kafka_ha.zk.errors import ZkUnavailable, error_text

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_PAUSE_S = 0.2
MAX_PAUSE_S = 5.0


def pause_before_retry(attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1, 2, ...): doubling from
    0.2 s, at most 5 s, so a short blip costs little and a long outage few log lines.

    >>> [pause_before_retry(n) for n in (1, 2, 3, 5, 6, 50)]
    [0.2, 0.4, 0.8, 3.2, 5.0, 5.0]
    """
    return min(FIRST_PAUSE_S * 2 ** min(attempt - 1, 32), MAX_PAUSE_S)


def until_zookeeper_answers(what: str, step: Callable[[], T], sleep: Callable[[float], None]) -> T:
    """The result of ``step()``, called again after each ZkUnavailable (connection lost,
    session expired, no connection in time) once ``sleep`` has paused; ``what`` names the
    step in the warnings.  Any other error is raised."""
    attempt = 0
    while True:
        try:
            return step()
        except ZkUnavailable as e:
            attempt += 1
            pause = pause_before_retry(attempt)
            log.warning("Start-up is waiting for ZooKeeper: %s failed (%s), attempt %d; trying "
                        "again in %.1f s", what, error_text(e), attempt, pause)
            sleep(pause)
