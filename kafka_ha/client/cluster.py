"""Cluster metadata and broker connections for the client: who leads what, and how to reach it.

:class:`ClusterMetadata` bootstraps from a ``bootstrap.servers`` list, keeps
the latest Metadata v1 answer as an immutable :class:`MetadataSnapshot`
(replaced whole on every refresh, so readers never see half an update), and
owns one :class:`BrokerConnection` per broker id.  It never decides policy:
producers and consumers ask for a refresh when an error tells them the
snapshot is stale.

>>> parse_bootstrap("a:9092, b:9093")
[('a', 9092), ('b', 9093)]
>>> parse_bootstrap("nohost")
Traceback (most recent call last):
...
ValueError: invalid broker address 'nohost': expected host:port
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import gevent

from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import (BrokerConnection, BrokerConnectionError, BrokerUnreachable,
                                          SocketReplaced)
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.primitives import ProtocolError

from .errors import (KafkaConnectionError, KafkaError, KafkaNotSentError, KafkaTimeoutError,
                     KafkaUnreachableError, NoBrokersAvailable, error_for)

log = logging.getLogger(__name__)

METADATA_VERSION = 1
# Kafka's reconnect.backoff.ms / reconnect.backoff.max.ms: after a refused
# connection, wait before trying that broker again, doubling up to the max.
RECONNECT_BACKOFF_S = 0.05
RECONNECT_BACKOFF_MAX_S = 1.0


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """``"h:p,h:p"`` (or a list of ``"h:p"``) to ``[(host, port), ...]``."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    result = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"invalid broker address {item!r}: expected host:port")
        result.append((host.strip("[]"), int(port)))
    if not result:
        raise ValueError("no broker addresses given (expected host:port[,host:port...])")
    return result


@dataclass(frozen=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    error_code: int
    is_internal: bool
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    # Precomputed once per refresh: the producer asks for them on every send().
    partition_ids: tuple[int, ...] = ()
    available_ids: tuple[int, ...] = ()

    @classmethod
    def build(cls, name: str, error_code: int, is_internal: bool,
              partitions: dict[int, PartitionMetadata]) -> TopicMetadata:
        return cls(name, error_code, is_internal, partitions, tuple(sorted(partitions)),
                   tuple(sorted(p for p, pm in partitions.items() if pm.leader >= 0)))


@dataclass(frozen=True)
class MetadataSnapshot:
    """One Metadata answer (merged with earlier per-topic answers)."""

    brokers: dict[int, BrokerMetadata] = field(default_factory=dict)
    controller_id: int = -1
    topics: dict[str, TopicMetadata] = field(default_factory=dict)

    def partitions_for(self, topic: str) -> tuple[int, ...] | None:
        """Sorted partition ids, or None while the topic has no usable metadata."""
        meta = self.topics.get(topic)
        if meta is None or not meta.partition_ids:
            return None
        return meta.partition_ids

    def available_partitions_for(self, topic: str) -> tuple[int, ...]:
        """Partitions that currently have a leader."""
        meta = self.topics.get(topic)
        return () if meta is None else meta.available_ids

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        meta = self.topics.get(tp.topic)
        return None if meta is None else meta.partitions.get(tp.partition)

    def leader_for(self, tp: TopicPartition) -> int | None:
        """The leader's broker id, or None if unknown or leaderless."""
        pm = self.partition(tp)
        if pm is None or pm.leader < 0 or pm.leader not in self.brokers:
            return None
        return pm.leader

    def topic_error(self, topic: str) -> int:
        meta = self.topics.get(topic)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if meta is None else meta.error_code

    def merged(self, answer: MetadataSnapshot, all_topics: bool) -> MetadataSnapshot:
        """This snapshot updated by ``answer`` (which named some or all topics)."""
        topics = dict(answer.topics) if all_topics else {**self.topics, **answer.topics}
        return MetadataSnapshot(answer.brokers, answer.controller_id, topics)


def snapshot_from_response(body: dict[str, Any]) -> MetadataSnapshot:
    """Parse a Metadata v0/v1 response body."""
    brokers = {b["node_id"]: BrokerMetadata(b["node_id"], b["host"], b["port"], b.get("rack"))
               for b in body["brokers"]}
    topics = {}
    for t in body["topics"]:
        parts = {p["partition_index"]: PartitionMetadata(
            t["name"], p["partition_index"], p["leader_id"], tuple(p["replica_nodes"]),
            tuple(p["isr_nodes"]), p["error_code"]) for p in t["partitions"]}
        topics[t["name"]] = TopicMetadata.build(t["name"], t["error_code"],
                                                bool(t.get("is_internal", False)), parts)
    return MetadataSnapshot(brokers, body.get("controller_id", -1), topics)


class ClusterMetadata:
    """Bootstraps, refreshes metadata, and pools one connection per broker."""

    def __init__(self, bootstrap_servers: str | Iterable[str], client_id: str = "kafka-ha-client",
                 request_timeout_ms: int = 30000, retry_backoff_ms: int = 100) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.timeout_s = request_timeout_ms / 1000.0
        self.retry_backoff_s = retry_backoff_ms / 1000.0
        self.snapshot = MetadataSnapshot()
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_connections: dict[tuple[str, int], BrokerConnection] = {}
        self._reconnect: dict[int, tuple[float, float]] = {}  # node -> (retry at, backoff)
        self._closed = False

    def __enter__(self) -> ClusterMetadata:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- metadata ---------------------------------------------------------------

    def refresh(self, topics: Iterable[str] | None = None) -> MetadataSnapshot:
        """Fetch Metadata v1 for ``topics`` (None = all topics) and install it.

        Raises :class:`NoBrokersAvailable` if no known or bootstrap broker answers.
        """
        names = None if topics is None else sorted(set(topics))
        body = self.request_any(ApiKey.METADATA, METADATA_VERSION, {"topics": names})
        self.snapshot = self.snapshot.merged(snapshot_from_response(body), names is None)
        self._forget_moved_brokers()
        return self.snapshot

    def wait_for_topics(self, topics: Iterable[str], timeout_s: float) -> MetadataSnapshot:
        """Refresh until every topic has partition metadata, or raise.

        A topic error that is retriable (LEADER_NOT_AVAILABLE while a topic is
        auto-created, UNKNOWN_TOPIC_OR_PARTITION while its creation propagates)
        is retried until ``timeout_s``; then the last error is raised.
        """
        wanted = sorted(set(topics))
        deadline = time.monotonic() + timeout_s
        while True:
            snap = self.refresh(wanted)
            missing = [t for t in wanted if snap.partitions_for(t) is None]
            if not missing:
                return snap
            code = snap.topic_error(missing[0]) or ErrorCode.LEADER_NOT_AVAILABLE
            err = error_for(code, f"topic {missing[0]!r} has no partition metadata")
            if not err.retriable:
                raise err
            if time.monotonic() + self.retry_backoff_s >= deadline:
                raise KafkaTimeoutError(f"topic(s) {', '.join(missing)} not available after "
                                        f"{timeout_s:g} s: {err}")
            gevent.sleep(self.retry_backoff_s)

    # -- connections --------------------------------------------------------------

    def connection(self, node_id: int) -> BrokerConnection:
        """The pooled connection to broker ``node_id`` (from the current snapshot)."""
        broker = self.snapshot.brokers.get(node_id)
        if broker is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node_id} is not in the metadata")
        return self.connection_to(node_id, broker.host, broker.port)

    def connection_to(self, node_id: int, host: str, port: int) -> BrokerConnection:
        """A pooled connection to ``node_id``, (re)created if its address differs."""
        if self._closed:
            raise KafkaError(None, "client is closed")
        conn = self._connections.get(node_id)
        if conn is not None and (conn.host, conn.port) == (host, port):
            return conn
        if conn is not None:
            conn.close()
        conn = BrokerConnection(host, port, self.client_id, self.timeout_s)
        self._connections[node_id] = conn
        return conn

    def request(self, node_id: int, api_key: int, version: int, body: dict[str, Any],
                timeout_s: float | None = None, on_socket: int | None = None) -> dict[str, Any]:
        """One request to broker ``node_id``; connection failures raise KafkaConnectionError.

        ``on_socket`` (from :meth:`socket_generation`): send only on that socket,
        else raise ``KafkaNotSentError``.
        """
        conn = self.connection(node_id)
        return self._tracked(node_id, self._exchange, conn, f"broker {node_id}", api_key,
                             version, body, timeout_s, on_socket)

    def socket_generation(self, node_id: int) -> int:
        """Which socket to broker ``node_id`` is in use now (it counts dropped ones)."""
        return self.connection(node_id).generation

    def reconnect_delay(self, node_id: int, now: float | None = None) -> float:
        """Seconds to wait before using ``node_id`` again after a refused connection (0: go)."""
        entry = self._reconnect.get(node_id)
        if entry is None:
            return 0.0
        return max(0.0, entry[0] - (time.monotonic() if now is None else now))

    def request_at(self, node_id: int, host: str, port: int, api_key: int, version: int,
                   body: dict[str, Any]) -> dict[str, Any]:
        """Like :meth:`request`, to an address learnt elsewhere (a group coordinator)."""
        conn = self.connection_to(node_id, host, port)
        return self._exchange(conn, f"broker {node_id}", api_key, version, body, None, None)

    def send_only(self, node_id: int, api_key: int, version: int, body: dict[str, Any]) -> None:
        """Send a request that gets no response (Produce acks=0)."""
        conn = self.connection(node_id)
        self._tracked(node_id, self._send_only, conn, node_id, api_key, version, body)

    def request_any(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """Send to the first broker that answers: known brokers, then bootstrap servers."""
        tried, last_error = [], ""
        for address, label, conn in self._candidates():
            tried.append(address)
            try:
                return self._exchange(conn, label, api_key, version, body, None, None)
            except KafkaConnectionError as exc:
                log.debug("request to %s failed: %s", label, exc)
                last_error = exc.message
        raise NoBrokersAvailable(tried, last_error)

    def close(self) -> None:
        self._closed = True
        for conn in [*self._connections.values(), *self._bootstrap_connections.values()]:
            conn.close()
        self._connections.clear()
        self._bootstrap_connections.clear()

    # -- internals ----------------------------------------------------------------

    def _tracked(self, node_id: int, operation, *args: Any) -> Any:
        """Run ``operation``, keeping the node's reconnect backoff up to date."""
        try:
            result = operation(*args)
        except KafkaUnreachableError:
            backoff = self._reconnect.get(node_id, (0.0, RECONNECT_BACKOFF_S / 2))[1] * 2
            backoff = min(backoff, RECONNECT_BACKOFF_MAX_S)
            self._reconnect[node_id] = (time.monotonic() + backoff, backoff)
            raise
        self._reconnect.pop(node_id, None)
        return result

    @staticmethod
    def _send_only(conn: BrokerConnection, node_id: int, api_key: int, version: int,
                   body: dict[str, Any]) -> None:
        try:
            conn.send_only(api_key, version, body)
        except BrokerUnreachable as exc:
            raise KafkaUnreachableError(f"broker {node_id}: {exc}") from exc
        except BrokerConnectionError as exc:
            raise KafkaConnectionError(f"broker {node_id}: {exc}") from exc

    def _exchange(self, conn: BrokerConnection, label: str, api_key: int, version: int,
                  body: dict[str, Any], timeout_s: float | None,
                  on_socket: int | None) -> dict[str, Any]:
        try:
            return conn.request(api_key, version, body, timeout_s, on_socket)
        except SocketReplaced as exc:
            raise KafkaNotSentError(f"{label}: {exc}") from exc
        except BrokerUnreachable as exc:
            raise KafkaUnreachableError(f"{label}: {exc}") from exc
        except (BrokerConnectionError, ProtocolError) as exc:
            # The connection dropped its socket; the next request reconnects.
            raise KafkaConnectionError(f"{label}: {exc}") from exc

    def _candidates(self) -> Iterable[tuple[str, str, BrokerConnection]]:
        """(address, label, connection): known brokers first, then unseen bootstrap servers."""
        seen = set()
        for node_id, broker in sorted(self.snapshot.brokers.items()):
            seen.add((broker.host, broker.port))
            yield (f"{broker.host}:{broker.port}", f"broker {node_id}",
                   self.connection_to(node_id, broker.host, broker.port))
        for address in self.bootstrap:
            if address in seen:
                continue
            conn = self._bootstrap_connections.get(address)
            if conn is None:
                conn = BrokerConnection(address[0], address[1], self.client_id, self.timeout_s)
                self._bootstrap_connections[address] = conn
            yield f"{address[0]}:{address[1]}", "bootstrap server", conn

    def _forget_moved_brokers(self) -> None:
        # A broker that left the cluster keeps no socket open; one that came
        # back elsewhere is reconnected lazily by connection_to().
        for node_id in [n for n in self._connections if n not in self.snapshot.brokers]:
            self._connections.pop(node_id).close()
