"""An in-memory fake Kafka cluster on real sockets, for testing clients and tools.

Each fake broker is a :class:`ProtocolServer` on port 0 answering Metadata,
Produce, Fetch, ListOffsets and the offset-commit subset from shared
dictionaries.  Every replica has its own log (a list of raw entries), so a
test can make replicas diverge; a produce is copied to every ISR member at
once (HW = LEO).  Offsets are assigned by rewriting the base offset of v2
batches and the offset of uncompressed magic 0/1 messages.

Fault injection is explicit: :meth:`FakeCluster.fail` makes the next matching
partition answer with an error code (or, with ``code=None``, drops the
connection), and :attr:`FakeCluster.requests` records every request a broker
served, for assertions such as "one Produce per broker".
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Any

from gevent.event import Event

from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey, api_versions_entries
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import RequestHeader, decode_request_body
from kafka_ha.protocol.primitives import Reader
from kafka_ha.protocol.server import ProtocolServer
from kafka_ha.records.reader import DecodedRecord, decode_records
from kafka_ha.records.shallow import iter_entries

E = ErrorCode


class DropConnection(Exception):
    """Raised by a handler to make the server close the client's connection."""


@dataclass
class FakeLog:
    """One replica's log: raw entries with their first and last offsets."""

    entries: list[tuple[int, int, bytes]] = field(default_factory=list)
    log_start: int = 0
    end: int = 0                   # log end offset (next offset to assign)
    hw: int | None = None          # None: the high watermark follows the LEO

    @property
    def high_watermark(self) -> int:
        return self.end if self.hw is None else self.hw

    def append(self, data: bytes) -> int:
        """Append ``data`` (one or more entries) at the log end; return the base offset."""
        base = self.end
        buf = bytearray(data)
        for entry in iter_entries(buf):
            if entry.first_offset is None:
                raise ValueError("the fake broker does not accept compressed magic 0/1 data")
            count = entry.last_offset - entry.first_offset + 1
            # v2 base offset and magic 0/1 message offset both sit at byte 0.
            struct.pack_into(">q", buf, entry.position, self.end)
            raw = bytes(buf[entry.position:entry.end])
            self.entries.append((self.end, self.end + count - 1, raw))
            self.end += count
        return base

    def read(self, offset: int, limit: int, max_bytes: int) -> bytes:
        """Whole entries holding offsets >= ``offset`` and below ``limit``; at least one."""
        out, size = [], 0
        for first, last, raw in self.entries:
            if last < offset or last < self.log_start:
                continue
            if last >= limit or (out and size + len(raw) > max_bytes):
                break
            out.append(raw)
            size += len(raw)
        return b"".join(out)


@dataclass
class FakePartition:
    leader: int
    replicas: list[int]
    isr: list[int]
    logs: dict[int, FakeLog]


@dataclass
class Fault:
    api_key: int
    code: int | None                  # None: drop the connection instead
    topic: str | None = None
    partition: int | None = None
    broker: int | None = None
    times: int = 1

    def matches(self, api_key: int, broker: int, tp: TopicPartition | None) -> bool:
        return (self.times > 0 and api_key == self.api_key
                and self.broker in (None, broker)
                and (tp is None or self.topic in (None, tp.topic))
                and (tp is None or self.partition in (None, tp.partition)))


class FakeCluster:
    def __init__(self, broker_ids: tuple[int, ...] = (1,), host: str = "127.0.0.1") -> None:
        self.host = host
        self.partitions: dict[TopicPartition, FakePartition] = {}
        self.requests: list[tuple[int, int, int, dict[str, Any]]] = []
        self.faults: list[Fault] = []
        self.committed: dict[tuple[str, TopicPartition], int] = {}
        self.controller_id = broker_ids[0]
        self.dead: set[int] = set()
        self._appended = Event()
        self.servers = {b: ProtocolServer(host, 0, self._handler_for(b)) for b in broker_ids}

    # -- lifecycle and set-up ---------------------------------------------------------

    def start(self) -> FakeCluster:
        for server in self.servers.values():
            server.start()
        return self

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop(timeout=1)

    def kill(self, broker: int) -> None:
        """Stop one broker: new connections are refused, open ones close on their next request."""
        self.dead.add(broker)
        self.servers[broker].stop(timeout=0)

    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{s.server_port}" for s in self.servers.values())

    def port(self, broker: int) -> int:
        return self.servers[broker].server_port

    def create_topic(self, topic: str, partitions: int = 1,
                     assignment: list[list[int]] | None = None) -> None:
        """Replicas per partition default to one broker each, round-robin."""
        ids = sorted(self.servers)
        for p in range(partitions):
            replicas = list(assignment[p]) if assignment else [ids[p % len(ids)]]
            self.partitions[TopicPartition(topic, p)] = FakePartition(
                replicas[0], replicas, list(replicas), {b: FakeLog() for b in replicas})

    def set_leader(self, tp: TopicPartition, broker: int) -> None:
        self.partitions[tp].leader = broker

    def log(self, tp: TopicPartition, broker: int | None = None) -> FakeLog:
        part = self.partitions[tp]
        return part.logs[part.leader if broker is None else broker]

    def append(self, tp: TopicPartition, data: bytes) -> int:
        """Append to every ISR replica, as a completed produce would; return the base offset."""
        part = self.partitions[tp]
        base = -1
        for broker in part.isr:
            base = part.logs[broker].append(data)
        self._appended.set()
        self._appended = Event()
        return base

    def records(self, tp: TopicPartition, broker: int | None = None) -> list[DecodedRecord]:
        log = self.log(tp, broker)
        return list(decode_records(b"".join(raw for _, _, raw in log.entries)))

    def fail(self, api_key: int, code: int | None, topic: str | None = None,
             partition: int | None = None, broker: int | None = None, times: int = 1) -> None:
        self.faults.append(Fault(api_key, code, topic, partition, broker, times))

    def requests_of(self, api_key: int) -> list[tuple[int, dict[str, Any]]]:
        return [(b, body) for b, key, _, body in self.requests if key == api_key]

    # -- request handling -------------------------------------------------------------

    def _handler_for(self, broker: int):
        def handle(header: RequestHeader, reader: Reader):
            if broker in self.dead:
                raise DropConnection(f"broker {broker} is dead")
            body = decode_request_body(header, reader)
            self.requests.append((broker, int(header.api_key), header.api_version, body))
            if any(f.code is None and f.matches(header.api_key, broker, None) for f in self.faults):
                self._fault(header.api_key, broker, None)
                raise DropConnection(f"fault injected on broker {broker}")
            api = self._apis[header.api_key]
            response = api(self, broker, header.api_version, body)
            return None if response is None else (response, header.api_version)
        return handle

    def _fault(self, api_key: int, broker: int, tp: TopicPartition | None) -> int | None:
        for fault in self.faults:
            if fault.matches(api_key, broker, tp):
                fault.times -= 1
                return fault.code
        return None

    def _partition_error(self, api_key: int, broker: int, tp: TopicPartition,
                         need_leader: bool = True) -> int:
        injected = self._fault(api_key, broker, tp)
        if injected is not None:
            return injected
        part = self.partitions.get(tp)
        if part is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        if need_leader and part.leader != broker:
            return E.NOT_LEADER_FOR_PARTITION
        if broker not in part.logs:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        return E.NONE

    def _api_versions(self, broker: int, version: int, body: dict) -> dict:
        return {"error_code": 0, "api_keys": api_versions_entries(), "throttle_time_ms": 0}

    def _metadata(self, broker: int, version: int, body: dict) -> dict:
        names = body["topics"]
        if names is None or (version == 0 and not names):
            names = sorted({tp.topic for tp in self.partitions})
        topics = []
        for name in names:
            parts = [{"error_code": E.NONE if p.leader >= 0 else E.LEADER_NOT_AVAILABLE,
                      "partition_index": tp.partition, "leader_id": p.leader,
                      "replica_nodes": p.replicas, "isr_nodes": p.isr}
                     for tp, p in sorted(self.partitions.items()) if tp.topic == name]
            code = E.NONE if parts else E.UNKNOWN_TOPIC_OR_PARTITION
            topics.append({"error_code": code, "name": name, "is_internal": False,
                           "partitions": parts})
        brokers = [{"node_id": b, "host": self.host, "port": s.server_port, "rack": None}
                   for b, s in sorted(self.servers.items())]
        return {"brokers": brokers, "controller_id": self.controller_id, "topics": topics}

    def _produce(self, broker: int, version: int, body: dict) -> dict | None:
        responses = []
        for topic in body["topic_data"]:
            results = []
            for pd in topic["partition_data"]:
                tp = TopicPartition(topic["name"], pd["index"])
                code, base = self._partition_error(ApiKey.PRODUCE, broker, tp), -1
                if code == E.NONE:
                    base = self.append(tp, bytes(pd["records"]))
                results.append({"index": tp.partition, "error_code": code, "base_offset": base,
                                "log_append_time_ms": -1})
            responses.append({"name": topic["name"], "partition_responses": results})
        if body["acks"] == 0:
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    def _fetch(self, broker: int, version: int, body: dict) -> dict:
        deadline = time.monotonic() + body["max_wait_ms"] / 1000.0
        while True:
            appended = self._appended
            responses, size = self._fetch_once(broker, body, version)
            remaining = deadline - time.monotonic()
            if size >= max(body["min_bytes"], 1) or remaining <= 0:
                return {"throttle_time_ms": 0, "responses": responses}
            appended.wait(remaining)

    def _fetch_once(self, broker: int, body: dict, version: int) -> tuple[list[dict], int]:
        responses, total = [], 0
        debug = body["replica_id"] == -2
        for topic in body["topics"]:
            parts = []
            for fp in topic["partitions"]:
                tp = TopicPartition(topic["topic"], fp["partition"])
                code = self._partition_error(ApiKey.FETCH, broker, tp, need_leader=not debug)
                hw, data = -1, b""
                if code == E.NONE:
                    log = self.partitions[tp].logs[broker]
                    hw = log.high_watermark
                    offset = fp["fetch_offset"]
                    if not log.log_start <= offset <= hw:
                        code = E.OFFSET_OUT_OF_RANGE
                    else:
                        data = log.read(offset, hw, fp["partition_max_bytes"])
                total += len(data)
                part = {"partition_index": tp.partition, "error_code": code,
                        "high_watermark": hw, "records": data}
                if version >= 4:   # no transactions and no down-conversion in the fake
                    part.update(last_stable_offset=hw, aborted_transactions=[])
                parts.append(part)
            responses.append({"topic": topic["topic"], "partitions": parts})
        return responses, total

    def _list_offsets(self, broker: int, version: int, body: dict) -> dict:
        topics = []
        for topic in body["topics"]:
            parts = []
            for lp in topic["partitions"]:
                tp = TopicPartition(topic["name"], lp["partition_index"])
                code, offset = self._partition_error(ApiKey.LIST_OFFSETS, broker, tp), -1
                if code == E.NONE:
                    log = self.partitions[tp].logs[broker]
                    offset = {-1: log.high_watermark, -2: log.log_start}.get(lp["timestamp"], -1)
                parts.append({"partition_index": tp.partition, "error_code": code,
                              "timestamp": -1, "offset": offset,
                              "old_style_offsets": [offset] if code == E.NONE else []})
            topics.append({"name": topic["name"], "partitions": parts})
        return {"topics": topics}

    def _find_coordinator(self, broker: int, version: int, body: dict) -> dict:
        code = self._fault(ApiKey.FIND_COORDINATOR, broker, None) or E.NONE
        return {"error_code": code, "node_id": broker, "host": self.host,
                "port": self.servers[broker].server_port}

    def _offset_commit(self, broker: int, version: int, body: dict) -> dict:
        topics = []
        for topic in body["topics"]:
            parts = []
            for p in topic["partitions"]:
                tp = TopicPartition(topic["name"], p["partition_index"])
                code = self._fault(ApiKey.OFFSET_COMMIT, broker, tp) or E.NONE
                if code == E.NONE:
                    self.committed[(body["group_id"], tp)] = p["committed_offset"]
                parts.append({"partition_index": tp.partition, "error_code": code})
            topics.append({"name": topic["name"], "partitions": parts})
        return {"topics": topics}

    def _offset_fetch(self, broker: int, version: int, body: dict) -> dict:
        topics = []
        for topic in body["topics"]:
            parts = [{"partition_index": p, "metadata": "", "error_code": 0,
                      "committed_offset": self.committed.get(
                          (body["group_id"], TopicPartition(topic["name"], p)), -1)}
                     for p in topic["partition_indexes"]]
            topics.append({"name": topic["name"], "partitions": parts})
        return {"topics": topics}

    _apis = {
        ApiKey.API_VERSIONS: _api_versions, ApiKey.METADATA: _metadata,
        ApiKey.PRODUCE: _produce, ApiKey.FETCH: _fetch, ApiKey.LIST_OFFSETS: _list_offsets,
        ApiKey.FIND_COORDINATOR: _find_coordinator, ApiKey.OFFSET_COMMIT: _offset_commit,
        ApiKey.OFFSET_FETCH: _offset_fetch,
    }
