"""The broker's request layer: each request decoded, handed to what serves its API, and answered.

The protocol server calls ``handle(header, body_reader)`` once per request,
in order per connection; each API handler returns the response body.  The data
APIs (Produce, Fetch, the offset requests) go to ``data_apis``, which calls the
replica side; LeaderAndIsr and StopReplica to the replica manager (then the
group coordinator looks at what it leads); the group APIs to the coordinator
(``kafka_ha/coordinator``).  The controller's requests pass
``controller_requests``'s guard first.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable, NamedTuple

from kafka_ha.broker.controller_requests import CONTROLLER_APIS, ControllerRequestGuard
from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.protocol.api import ADVERTISED_VERSIONS, ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import RequestHeader, decode_request_body
from kafka_ha.protocol.partition_states import ungrouped
from kafka_ha.protocol.primitives import ProtocolError, Reader
from kafka_ha.protocol.server import client_address

log = logging.getLogger(__name__)
_SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
ApiHandler = Callable[[dict[str, Any], RequestHeader], dict[str, Any] | None]


def by_version(handler: Callable[[dict[str, Any], int], dict[str, Any] | None]) -> ApiHandler:
    return lambda body, header: handler(body, header.api_version)


def by_correlation_id(handler: Callable[[dict[str, Any], int], dict[str, Any]]) -> ApiHandler:
    return lambda body, header: handler(body, header.correlation_id)


class GroupApis(NamedTuple):
    """The group coordinator's two request handlers (kafka_ha/coordinator)."""

    coordinator: Any
    offsets: Any


class UnhandledApi(ProtocolError):
    """A request for an API this broker does not serve: the connection is closed."""


class KafkaApis:
    def __init__(self, replica_manager: ReplicaManager, metadata: MetadataCache,
                 data_apis: DataApis | None = None, groups: GroupApis | None = None,
                 auto_create: Callable[[list[str]], None] | None = None,
                 controlled_shutdown: Callable[[dict[str, Any], int], dict[str, Any]] | None = None,
                 controller_guard: ControllerRequestGuard | None = None) -> None:
        self.metadata = metadata
        self._controller_guard = controller_guard
        self._auto_create = auto_create
        self.apis: dict[ApiKey, ApiHandler] = {
            ApiKey.API_VERSIONS: by_version(self._api_versions),
            ApiKey.METADATA: by_version(self._metadata),
            ApiKey.LEADER_AND_ISR: by_correlation_id(replica_manager.leader_and_isr),
            ApiKey.STOP_REPLICA: by_correlation_id(replica_manager.stop_replica),
            ApiKey.UPDATE_METADATA: self._update_metadata_with(replica_manager),
        }
        if data_apis is not None:
            self.apis.update({
                ApiKey.PRODUCE: by_version(data_apis.produce),
                ApiKey.FETCH: by_version(data_apis.fetch),
                ApiKey.LIST_OFFSETS: by_version(data_apis.list_offsets),
                ApiKey.OFFSETS_FOR_LEADER_EPOCH: by_version(data_apis.offsets_for_leader_epoch),
            })
        if controlled_shutdown is not None:
            self.apis[ApiKey.CONTROLLED_SHUTDOWN] = by_version(controlled_shutdown)
        if groups is not None:
            coordinator, offsets = groups.coordinator, groups.offsets

            def with_client_id(handler: Callable) -> ApiHandler:
                # JoinGroup records each member's client id and host (DescribeGroups shows
                # them; Kafka writes the host as "/<ip>").
                def handle(body, header):
                    address = client_address()
                    return handler({**body, "_client_id": header.client_id or "",
                                    "_client_host": f"/{address}" if address else ""},
                                   header.api_version)
                return handle

            def then_refresh(handler: ApiHandler) -> ApiHandler:
                # A new leadership of an offsets partition: load its groups now.
                def handle(body: dict[str, Any], header: RequestHeader) -> dict[str, Any]:
                    response = handler(body, header)
                    coordinator.leadership_changed()
                    return response
                return handle
            for key in (ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA):
                self.apis[key] = then_refresh(self.apis[key])
            self.apis.update({
                ApiKey.FIND_COORDINATOR: by_version(coordinator.find_coordinator),
                ApiKey.JOIN_GROUP: with_client_id(coordinator.join_group),
                ApiKey.SYNC_GROUP: by_version(coordinator.sync_group),
                ApiKey.HEARTBEAT: by_version(coordinator.heartbeat),
                ApiKey.LEAVE_GROUP: by_version(coordinator.leave_group),
                ApiKey.LIST_GROUPS: by_version(coordinator.list_groups),
                ApiKey.DESCRIBE_GROUPS: by_version(coordinator.describe_groups),
                ApiKey.DELETE_GROUPS: by_version(coordinator.delete_groups),
                ApiKey.OFFSET_COMMIT: by_version(offsets.commit),
                ApiKey.OFFSET_FETCH: by_version(offsets.fetch),
            })

    def handle(self, header: RequestHeader, reader: Reader) -> tuple[dict[str, Any], int] | None:
        api = self.apis.get(header.api_key)
        if api is None:
            raise UnhandledApi(f"api key {int(header.api_key)} is not served by this broker")
        body = decode_request_body(header, reader)
        if header.api_key in CONTROLLER_APIS:
            body = ungrouped(body)   # one layout for every version, from here on
        if self._controller_guard is not None and header.api_key in CONTROLLER_APIS:
            error = self._controller_guard.admit(header.api_key, body, header.correlation_id,
                                                 header.api_version)
            if error != ErrorCode.NONE:
                refused: dict[str, Any] = {"error_code": error}
                if header.api_key != ApiKey.UPDATE_METADATA:
                    refused["partition_errors"] = []
                return refused, header.api_version
        response = api(body, header)
        return None if response is None else (response, header.api_version)

    def _update_metadata_with(self, replica_manager: ReplicaManager) -> ApiHandler:
        def update_metadata(body: dict[str, Any], header: RequestHeader) -> dict[str, Any]:
            live_before = set(self.metadata.brokers)
            response = self.metadata.update(body, header.api_version, header.correlation_id)
            if set(self.metadata.brokers) != live_before:
                # A failover or a restart has begun: a state change for the deferred pass.
                replica_manager.state_changes.changed()
            return response
        return update_metadata

    def _api_versions(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        keys = [{"api_key": int(k), "min_version": lo, "max_version": hi}
                for k, (lo, hi) in ADVERTISED_VERSIONS.items() if k in self.apis]
        if version >= 3 and not all(_SOFTWARE_NAME.fullmatch(body[field]) for field in (
                "client_software_name", "client_software_version")):
            # KIP-511: a name or version outside [a-zA-Z0-9.-] is refused, as Kafka does.
            return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
        return {"error_code": ErrorCode.NONE, "api_keys": keys, "throttle_time_ms": 0}

    def _metadata(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        topics = body["topics"]
        # v0: an empty list means all topics; v1: null means all, empty means none.
        if version == 0 and not topics:
            topics = None
        auto_create = self._auto_create is not None and body.get("allow_auto_topic_creation", True)
        missing = [t for t in topics if t not in self.metadata.partitions] if topics and auto_create else []
        if not missing:
            return self.metadata.encoded_response(topics, version)
        self._auto_create(missing)
        response = self.metadata.full_response(topics, version)
        for topic in response["topics"]:
            if topic["name"] in missing and topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                topic["error_code"] = ErrorCode.LEADER_NOT_AVAILABLE
        return response
