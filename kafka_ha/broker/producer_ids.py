"""InitProducerId (22) for idempotent producers: ids handed out from blocks claimed in ZooKeeper.

Any broker answers (there is no transaction coordinator): each claims blocks
of 1,000 ids through ``/latest_producer_id_block`` (:mod:`kafka_ha.zk.producer_id_store`)
and hands them out one by one, so ids are unique across the cluster and
across restarts (a restarted broker claims a new block).  Every id starts at
epoch 0: without transactions nothing ever fences a producer id, so its epoch
is never bumped.  A transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED
(see :mod:`produce_checks` for why that code).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from gevent.lock import Semaphore

from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk.errors import MalformedZnode, ZkError
from kafka_ha.zk.producer_id_znodes import ProducerIdBlock

log = logging.getLogger(__name__)

NO_PRODUCER_ID, NO_PRODUCER_EPOCH = -1, -1


class ProducerIdManager:
    """Hands out this broker's producer ids, claiming a new block when one runs out."""

    def __init__(self, broker_id: int, claim_block: Callable[[int], ProducerIdBlock]) -> None:
        self.broker_id = broker_id
        self._claim_block = claim_block
        self._next, self._last = 0, -1     # no block yet
        self._lock = Semaphore()           # one claim at a time; the others wait for its ids

    def next_id(self) -> int:
        """The next unused id; raises what the claim raises (ZkError, MalformedZnode, ValueError)."""
        with self._lock:
            if self._next > self._last:
                block = self._claim_block(self.broker_id)
                self._next, self._last = block.first, block.last
            producer_id = self._next
            self._next += 1
            return producer_id


class InitProducerIdApi:
    def __init__(self, manager: ProducerIdManager) -> None:
        self.manager = manager

    def handle(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        transactional_id = request["transactional_id"]
        if transactional_id == "":
            # Kafka: an empty transactional id is neither idempotent-only nor a transaction.
            return _answer(ErrorCode.INVALID_REQUEST)
        if transactional_id is not None:
            log.info("Refused InitProducerId for transactional id %r: transactions are not supported",
                     transactional_id)
            return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        try:
            return _answer(ErrorCode.NONE, self.manager.next_id(), 0)
        except ZkError as e:
            # Retriable for producers: they ask again (any broker may answer).
            log.warning("Cannot claim a producer id block from ZooKeeper: %s", e)
            return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        except (MalformedZnode, ValueError) as e:
            log.error("Cannot claim a producer id block: %s", e)
            return _answer(ErrorCode.UNKNOWN_SERVER_ERROR)


def _answer(error: int, producer_id: int = NO_PRODUCER_ID,
            producer_epoch: int = NO_PRODUCER_EPOCH) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id,
            "producer_epoch": producer_epoch}
