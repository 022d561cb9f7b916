"""Seeded hostile frames for every API key and version the broker serves.

``FrameMaker(seed, ...)`` makes one frame per call to ``next()``: a ``Frame``
with its bytes, its kind (for the report) and, for requests the broker should
answer, the correlation id, key and version to decode the answer with.

Kinds, drawn with fixed weights from one ``random.Random(seed)``:

- ``schema``: a request built from the broker's own schema for a random
  (key, version), every field drawn from values that break things: limits of
  each integer width, -1 and 0, real and absurd topic names (``../x``), arrays
  with duplicates, and record data that is honest, lying or a bomb;
- ``mutated``: such a request with bytes flipped, inserted, deleted or cut;
- ``counts``: such a request with one int32 (a length or count) set to a huge
  or negative value;
- ``size``: a size prefix that lies (huge, zero, negative) and a short body;
- ``unknown``: an API key or version the broker does not serve;
- ``forged``: LeaderAndIsr, UpdateMetadata or StopReplica claiming a controller
  epoch above the real one (topics named ``forged-*``, a fake controller 4242);
- ``fetch``: a Fetch listing one partition many times, with negative or huge
  sizes, or asking for the whole log at once.

The same seed gives the same frames, so a failing run replays with ``--seed``.
"""
from __future__ import annotations

import random
import struct
from typing import NamedTuple

from kafka_ha.protocol.api import REQUEST_SCHEMAS, ApiKey
from kafka_ha.protocol.framing import encode_request
from kafka_ha.protocol.schema import (BOOLEAN, BYTES, COMPACT_BYTES, COMPACT_NULLABLE_BYTES,
                                      COMPACT_NULLABLE_STRING, COMPACT_STRING, INT8, INT16, INT32,
                                      INT64, NULLABLE_BYTES, NULLABLE_STRING, STRING, Array,
                                      CompactArray, Struct)
from kafka_ha.records.builder import Record, assemble_v2_batch, build_v2_batch, encode_v2_record

FORGED_PREFIX = "forged-"
# ControlledShutdown names the broker to shut down and carries no proof that the
# sender is that broker: v2's broker epoch (KIP-380) fences a broker's previous process,
# but a request that names none (-1, and v0-1) is served, as in Kafka. Any client may
# ask. The fuzzer names only brokers that do not exist; the gap is a known issue.
NO_SUCH_BROKER = 9999

# Any client may create, delete, reconfigure, truncate or move topics (there are no ACLs, as
# in Kafka without an authorizer): hostile frames of these APIs aim at a scratch topic, not
# at the topics whose acknowledged records the campaign reads back.
ADMIN_WRITES = {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
                ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.DELETE_RECORDS,
                ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS}
SCRATCH_TOPIC = "fuzz-admin-scratch"

WEIGHTS = {"schema": 30, "mutated": 20, "counts": 10, "size": 5, "unknown": 5, "forged": 10,
           "fetch": 20}

_INT_EDGES = {INT8: (0, 1, -1, 127, -128), INT16: (0, 1, -1, 32767, -32768),
              INT32: (0, 1, -1, 2, 3, 2**31 - 1, -2**31, 1 << 20),
              INT64: (0, 1, -1, -2, 2**63 - 1, -2**63, 1 << 40)}


class Frame(NamedTuple):
    kind: str
    data: bytes
    correlation_id: int | None = None    # set when a well-formed answer may come back
    api_key: int | None = None
    api_version: int | None = None
    silent: bool = False                 # a request the broker answers with nothing (acks=0)


class FrameMaker:
    def __init__(self, seed: int, topics: list[str], controller_epoch: int, controller_id: int) -> None:
        self.rng = random.Random(seed)
        self.topics = topics
        self.controller_epoch, self.controller_id = controller_epoch, controller_id
        self.correlation_id = 0
        self.keys = sorted(REQUEST_SCHEMAS)
        kinds = list(WEIGHTS)
        self._kinds, self._weights = kinds, [WEIGHTS[k] for k in kinds]
        rng = self.rng
        two = b"".join(encode_v2_record(Record(b"k", b"v"), i, 0) for i in range(2))
        zeros = b"".join(encode_v2_record(Record(None, bytes(1000)), i, 0) for i in range(8000))
        self.batches = [
            build_v2_batch([Record(b"fuzz", b"%d" % i) for i in range(3)], timestamp_ms=1),
            assemble_v2_batch(two, 2**31 - 1, 1000, 1000),                  # count lies
            assemble_v2_batch(two, 1, 1000, 1000),                          # records remain
            assemble_v2_batch(bytes(rng.getrandbits(8) for _ in range(200)), 3, 1, 1),  # garbage
            assemble_v2_batch(zeros, 8000, 1000, 1000, "gzip"),             # 8 MB bomb in ~8 KB
            b"",
        ]

    def next(self) -> Frame:
        kind = self.rng.choices(self._kinds, self._weights)[0]
        return getattr(self, f"_{kind}")()

    # ---- kinds ------------------------------------------------------------------

    def _schema(self) -> Frame:
        key, version = self.rng.choice(self.keys)
        if key == ApiKey.CONTROLLED_SHUTDOWN:
            return self._request(key, version, {"broker_id": NO_SUCH_BROKER, "broker_epoch": -1},
                                 "schema")
        topics = self.topics
        if key in ADMIN_WRITES:
            self.topics = [SCRATCH_TOPIC]
        try:
            body = self._value(REQUEST_SCHEMAS[(key, version)], "")
        finally:
            self.topics = topics
        if key in (ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA):
            self._forge(body)          # never the real epoch: nothing may take effect
        return self._request(key, version, body, "schema")

    def _mutated(self) -> Frame:
        data = bytearray(self._schema().data)
        for _ in range(self.rng.randint(1, 4)):
            op, pos = self.rng.randrange(4), self.rng.randrange(4, max(5, len(data)))
            if op == 0:
                data[pos % len(data)] ^= 1 << self.rng.randrange(8)
            elif op == 1:
                data[pos:pos] = bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(1, 8)))
            elif op == 2:
                del data[pos:pos + self.rng.randint(1, 8)]
            else:
                del data[pos:]
        data[0:4] = struct.pack(">i", len(data) - 4)
        return Frame("mutated", bytes(data))

    def _counts(self) -> Frame:
        data = bytearray(self._schema().data)
        if len(data) > 16:
            pos = self.rng.randrange(12, len(data) - 3)
            struct.pack_into(">i", data, pos, self.rng.choice((2**31 - 1, -2, 1 << 24, 65536)))
        return Frame("counts", bytes(data))

    def _size(self) -> Frame:
        size = self.rng.choice((0, -1, -2**31, 2**31 - 1, 100 << 20, 1 << 20))
        return Frame("size", struct.pack(">i", size) + bytes(self.rng.randint(0, 12)))

    def _unknown(self) -> Frame:
        key = self.rng.choice((ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, 50, 1000, -1))
        header = struct.pack(">hhi", key, self.rng.choice((99, -1, 32767)), self._next_id())
        return Frame("unknown", struct.pack(">i", len(header) + 2) + header + b"\x00\x00")

    def _forged(self) -> Frame:
        key = self.rng.choice((ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA))
        version = self.rng.choice([v for k, v in self.keys if k == key])
        body = self._value(REQUEST_SCHEMAS[(key, version)], "")
        self._forge(body)
        return self._request(key, version, body, "forged")

    def _fetch(self) -> Frame:
        version = self.rng.choice([v for k, v in self.keys if k == ApiKey.FETCH])
        body = self._value(REQUEST_SCHEMAS[(ApiKey.FETCH, version)], "")
        topic = self.rng.choice(self.topics)
        partition = {"partition": 0, "fetch_offset": 0, "log_start_offset": 0,
                     "current_leader_epoch": self.rng.choice((-1, 0, 7, 2**31 - 1)),
                     "partition_max_bytes": self.rng.choice((-1, -2**31, 0, 2**31 - 1, 1 << 20))}
        body["topics"] = [{"topic": topic, "partitions": [dict(partition)
                                                          for _ in range(self.rng.choice((1, 2, 200)))]}]
        body["max_wait_ms"] = self.rng.choice((0, 1, -1))
        body["min_bytes"] = self.rng.choice((0, 1, -1))
        body["replica_id"] = self.rng.choice((-1, -2, 1, 2, 3))
        if "max_bytes" in body:
            body["max_bytes"] = self.rng.choice((-1, 0, 2**31 - 1))
        return self._request(ApiKey.FETCH, version, body, "fetch")

    # ---- helpers ---------------------------------------------------------------

    def _forge(self, body: dict) -> None:
        # Never the real controller's id: a mutation could turn the epoch into the real
        # one, and a request with the real (id, epoch) is, without authentication,
        # indistinguishable from the controller's own.
        body["controller_epoch"] = self.controller_epoch + self.rng.randint(1, 1000)
        body["controller_id"] = self.rng.choice((4242, 1000 + self.rng.randrange(1000)))
        for entry in body.get("partition_states", []) + body.get("partitions", []):
            entry["topic"] = FORGED_PREFIX + str(self.rng.randrange(3))

    def _next_id(self) -> int:
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        return self.correlation_id

    def _request(self, key: int, version: int, body: dict, kind: str) -> Frame:
        cid = self._next_id()
        data = encode_request(key, version, cid, self.rng.choice(("fuzz", "x" * 32000, None)), body)
        silent = key == ApiKey.PRODUCE and body.get("acks") == 0
        return Frame(kind, data, cid, key, version, silent)

    def _value(self, t, name: str):
        rng = self.rng
        if isinstance(t, Struct):
            return {field: self._value(ft, field) for field, ft in t.fields}
        if isinstance(t, (Array, CompactArray)):
            if t.nullable and rng.random() < 0.1:
                return None
            n = rng.choice((0, 1, 1, 2, 3))
            items = [self._value(t.item, name) for _ in range(n)]
            return items + items[:1] if items and rng.random() < 0.2 else items   # duplicates
        if t in _INT_EDGES:
            if name in ("partition", "partition_index", "index") and rng.random() < 0.7:
                return rng.randrange(3)
            return rng.choice(_INT_EDGES[t]) if rng.random() < 0.6 else rng.randrange(-5, 100)
        if t is BOOLEAN:
            return rng.random() < 0.5
        if t in (STRING, NULLABLE_STRING, COMPACT_STRING, COMPACT_NULLABLE_STRING):
            if t in (NULLABLE_STRING, COMPACT_NULLABLE_STRING) and rng.random() < 0.1:
                return None
            return rng.choice(self.topics + ["../x", "", "a" * 300, "/", "..", "\u00e9t\u00e9"])
        if t in (BYTES, NULLABLE_BYTES, COMPACT_BYTES, COMPACT_NULLABLE_BYTES):
            if name == "records":
                return rng.choice(self.batches)
            nullable = t in (NULLABLE_BYTES, COMPACT_NULLABLE_BYTES)
            return None if nullable and rng.random() < 0.3 else bytes(rng.randrange(64))
        raise TypeError(f"no generator for {t!r}")
