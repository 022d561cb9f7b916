"""Controller -> broker requests: one queue and one sender greenlet per live broker.

A request that fails to send is retried on a fresh connection every 300 ms
(Kafka's ControllerChannelManager) until it is answered or the broker is
removed, so requests to one broker keep their order and a slow broker holds up
no other.  Unlike Kafka's one request in flight, up to ``PIPELINE`` queued
requests go out back to back on the connection; the broker serves them in order.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import gevent
from gevent.queue import Queue

from kafka_ha.model import BrokerInfo
from kafka_ha.protocol.connection import BrokerConnection

log = logging.getLogger("kafka_ha.controller")

RETRY_BACKOFF_S = 0.3
# Requests queued for one broker that go out back to back, before the first answer: an
# UpdateMetadata and the LeaderAndIsr behind it then cost one round trip, not two (at 10k
# partitions, the broker's handling of the UpdateMetadata held the LeaderAndIsr back).
PIPELINE = 4
Callback = Callable[[int, dict[str, Any]], None]


class _BrokerSender:
    def __init__(self, broker: BrokerInfo, client_id: str, timeout_s: float) -> None:
        self.broker = broker
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._queue: Queue = Queue()
        self._conn: BrokerConnection | None = None
        self._greenlet = gevent.spawn(self._run)

    def enqueue(self, api_key: int, version: int, body: dict, callback: Callback | None) -> None:
        self._queue.put((api_key, version, body, callback))

    def stop(self) -> None:
        self._greenlet.kill(block=False)
        self._close()

    def _run(self) -> None:
        while True:
            queued = [self._queue.get()]
            while len(queued) < PIPELINE and not self._queue.empty():
                queued.append(self._queue.get_nowait())
            responses = self._send_until_answered([(key, version, body)
                                                   for key, version, body, _ in queued])
            for (_, _, _, callback), response in zip(queued, responses):
                if callback is not None:
                    try:
                        callback(self.broker.broker_id, response)
                    except Exception:
                        log.exception("Response callback for broker %d failed", self.broker.broker_id)

    def _send_until_answered(self, requests: list[tuple[int, int, dict]]) -> list[dict]:
        """Send the requests back to back and return their answers; after a failure, all of
        them again in order on a fresh connection (one may have taken effect already: each
        is safe to apply twice, as a single request retried after a lost answer is)."""
        attempt = 0
        while True:
            try:
                if self._conn is None:
                    self._conn = BrokerConnection(self.broker.host, self.broker.port,
                                                  self._client_id, self._timeout_s)
                return self._conn.request_pipelined(requests)
            except (OSError, ValueError) as e:
                attempt += 1
                if attempt == 1 or attempt % 20 == 0:
                    log.warning("Controller request%s (api key %s) to broker %d at %s:%d failed "
                                "(attempt %d): %s; retrying", "s" if len(requests) > 1 else "",
                                ", ".join(str(key) for key, _, _ in requests), self.broker.broker_id,
                                self.broker.host, self.broker.port, attempt, e)
                self._close()
                gevent.sleep(RETRY_BACKOFF_S)

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None


class ControllerChannel:
    def __init__(self, controller_id: int, timeout_s: float) -> None:
        self._client_id = f"controller-{controller_id}"
        self._timeout_s = timeout_s
        self._senders: dict[int, _BrokerSender] = {}

    def set_brokers(self, brokers: dict[int, BrokerInfo]) -> None:
        """Match the senders to the live brokers; a re-registered broker gets a new sender."""
        for broker_id in list(self._senders):
            if brokers.get(broker_id) != self._senders[broker_id].broker:
                self._senders.pop(broker_id).stop()
        for broker_id, info in brokers.items():
            if broker_id not in self._senders:
                self._senders[broker_id] = _BrokerSender(info, self._client_id, self._timeout_s)

    def send(self, broker_id: int, api_key: int, version: int, body: dict,
             callback: Callback | None = None) -> bool:
        sender = self._senders.get(broker_id)
        if sender is None:
            return False
        sender.enqueue(api_key, version, body, callback)
        return True

    def stop(self) -> None:
        for sender in self._senders.values():
            sender.stop()
        self._senders.clear()
