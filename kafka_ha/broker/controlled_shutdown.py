"""Controlled shutdown, broker side: ask the controller to move this broker's work first.

Before stopping, the broker sends ControlledShutdown (key 7) to the
controller, which moves its leaderships away and takes it out of every ISR;
it retries up to ``controlled.shutdown.max.retries`` times while the
controller reports partitions it still leads, then stops anyway.

The controller is the one the last UpdateMetadata named (the metadata cache), as in
Kafka since 1.1, not a read of ``/controller``: a broker cut off from ZooKeeper would
wait for that read until ZooKeeper came back, and never stop.

The request is v2 (KIP-380): it names this broker's epoch, its registration's czxid,
so that a controller handling it late, after this broker restarted and registered
again, refuses it (STALE_BROKER_EPOCH) rather than move the new process's work.
"""
from __future__ import annotations

import logging
from typing import Callable

import gevent
from kafka_ha.model import BrokerEndpoint
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode, error_name

log = logging.getLogger(__name__)
REQUEST_VERSION = 2   # names the broker epoch (KIP-380)


def controlled_shutdown(controller_of: Callable[[], int], broker_id: int,
                        endpoint_of: Callable[[int], BrokerEndpoint | None], broker_epoch: int | None,
                        retries: int, backoff_ms: int, timeout_s: float) -> bool:
    """True once the controller reports no partitions left; False after the last retry.
    ``broker_epoch`` is None if this broker never registered (then the request names none)."""
    request = {"broker_id": broker_id, "broker_epoch": -1 if broker_epoch is None else broker_epoch}
    for attempt in range(1, retries + 2):
        remaining = _ask_controller(controller_of(), request, endpoint_of, timeout_s)
        if remaining == []:
            log.info("Controlled shutdown of broker %d succeeded", broker_id)
            return True
        log.warning("Controlled shutdown of broker %d, attempt %d: %s; retrying in %d ms", broker_id,
                    attempt, remaining if isinstance(remaining, str) else f"still leads {remaining}",
                    backoff_ms)
        if attempt <= retries:
            gevent.sleep(backoff_ms / 1000)
    log.warning("Controlled shutdown of broker %d did not complete; shutting down anyway", broker_id)
    return False


def _ask_controller(controller: int, request: dict, endpoint_of, timeout_s: float
                    ) -> list[str] | str:
    """The partitions the controller says this broker still leads, or why there is no such list."""
    if controller < 0:
        return "no controller known"
    endpoint = endpoint_of(controller)
    if endpoint is None:
        return f"controller {controller} has no known endpoint"
    try:
        with BrokerConnection(endpoint.host, endpoint.port, f"broker-{request['broker_id']}",
                              timeout_s) as conn:
            response = conn.request(ApiKey.CONTROLLED_SHUTDOWN, REQUEST_VERSION, request)
    except (OSError, ValueError) as e:
        log.warning("ControlledShutdown request to controller %d failed: %s", controller, e)
        return "no answer"
    if response["error_code"] != ErrorCode.NONE:
        return f"controller {controller} answered {error_name(response['error_code'])}"
    return [f"[{p['topic']},{p['partition']}]" for p in response["remaining_partitions"]]
