"""Dispatches decoded requests to the broker component that owns each API.

The protocol server calls ``handle(header, body_reader)`` once per request,
in order per connection; each API handler returns the response body.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import RequestHeader, decode_request_body
from kafka_ha.protocol.primitives import ProtocolError, Reader

log = logging.getLogger(__name__)
ApiHandler = Callable[[RequestHeader, dict[str, Any]], dict[str, Any] | None]


class UnhandledApi(ProtocolError):
    """A request for an API this broker does not serve: the connection is closed."""


class RequestHandler:
    def __init__(self, replica_manager: ReplicaManager, metadata: MetadataCache) -> None:
        self.replicas = replica_manager
        self.metadata = metadata
        self.apis: dict[ApiKey, ApiHandler] = {
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.METADATA: self._metadata,
            ApiKey.LEADER_AND_ISR: lambda h, b: self.replicas.leader_and_isr(b, h.correlation_id),
            ApiKey.STOP_REPLICA: lambda h, b: self.replicas.stop_replica(b, h.correlation_id),
            ApiKey.UPDATE_METADATA: lambda h, b: self.metadata.update(b, h.api_version,
                                                                      h.correlation_id),
        }

    def handle(self, header: RequestHeader, reader: Reader) -> tuple[dict[str, Any], int] | None:
        api = self.apis.get(header.api_key)
        if api is None:
            raise UnhandledApi(f"api key {int(header.api_key)} is not served by this broker")
        body = decode_request_body(header, reader)
        response = api(header, body)
        return None if response is None else (response, header.api_version)

    def _api_versions(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        from kafka_ha.protocol.api import SUPPORTED_VERSIONS
        keys = [{"api_key": int(k), "min_version": lo, "max_version": hi}
                for k, (lo, hi) in SUPPORTED_VERSIONS.items() if k in self.apis]
        return {"error_code": ErrorCode.NONE, "api_keys": keys, "throttle_time_ms": 0}

    def _metadata(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        topics = body["topics"]
        # v0: an empty list means all topics; v1: null means all, empty means none.
        if header.api_version == 0 and not topics:
            topics = None
        return self.metadata.metadata_response(topics)
