"""A leader for the replica fetcher's unit tests: real logs on disk, no network.

``FakeLeader`` answers OffsetsForLeaderEpoch, Fetch and ListOffsets from real
``Log`` objects, as the leader's data plane would, so what a test checks is the
follower's conversation with it.  The test sets what goes wrong: a partition's data
with a bad CRC, errors for a partition or for the whole request, a request that
fails (``failures``), a fetch session the leader hands out and then loses.  The
``leader`` fixture of a test module installs it in place of the fetcher's
``BrokerConnection``: ``monkeypatch.setattr(replica_fetcher, "BrokerConnection",
fake.connect)``.
"""
from __future__ import annotations

from typing import Callable

import gevent

from kafka_ha.broker.partition import Partition
from kafka_ha.broker.replica_fetcher import ReplicaFetcher
from kafka_ha.log import Log, LogConfig
from kafka_ha.model import BrokerEndpoint, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records import Record, build_v2_batch

LEADER, FOLLOWER = 1, 2
CONFIG = LogConfig(retention_ms=-1)
SESSION_ID = 7


class FakeLeader:
    """Broker 1.  What it does wrong, the test sets:

    - ``corrupt``: partitions whose data goes out with a bad CRC;
    - ``epoch_errors`` / ``fetch_errors`` / ``list_offsets_errors``: {partition: [error
      codes]}, answered (and used up) before the partition's real answer;
    - ``session_errors``: error codes answered to the next Fetch requests as a whole;
    - ``failures``: exceptions the next requests raise, as a broken connection would;
    - ``during``: called with the API key while a request is out (the follower's loop
      runs meanwhile);
    - ``sessions``: hand out fetch session ``SESSION_ID`` (KIP-227).  Its incremental
      fetches are answered for the partitions they name only.
    """

    def __init__(self) -> None:
        self.logs: dict[TopicPartition, Log] = {}
        self.corrupt: set[TopicPartition] = set()
        self.epoch_errors: dict[TopicPartition, list[int]] = {}
        self.fetch_errors: dict[TopicPartition, list[int]] = {}
        self.list_offsets_errors: dict[TopicPartition, list[int]] = {}
        self.session_errors: list[int] = []
        self.failures: list[BaseException] = []
        self.during: Callable[[int], None] = lambda api_key: None
        self.sessions = False
        self.forgotten: list[TopicPartition] = []   # what incremental fetches asked to forget
        self.requests: list[int] = []               # API keys, in order
        self.fetch_waits: list[tuple[int, int]] = []  # (index in requests, max_wait_ms) per Fetch
        self.fetches: list[tuple[int, int]] = []    # (session id, session epoch) of each Fetch
        self.connections = 0

    def connect(self, host, port, client_id, timeout_s):
        self.connections += 1
        return FakeConnection(self)


def _next_error(errors: dict[TopicPartition, list[int]], tp: TopicPartition) -> int:
    pending = errors.get(tp)
    return pending.pop(0) if pending else ErrorCode.NONE


class FakeConnection:
    def __init__(self, leader: FakeLeader) -> None:
        self.leader = leader

    def close(self) -> None:
        pass

    def request(self, api_key, version, body):
        self.leader.requests.append(api_key)
        gevent.sleep(0.005)   # a round trip: let the test's greenlet run
        self.leader.during(api_key)
        if self.leader.failures:
            raise self.leader.failures.pop(0)
        if api_key == ApiKey.OFFSETS_FOR_LEADER_EPOCH:
            return {"topics": [{"topic": t["topic"], "partitions": [
                self._epoch_end(TopicPartition(t["topic"], p["partition"]), p["leader_epoch"])
                for p in t["partitions"]]} for t in body["topics"]]}
        if api_key == ApiKey.LIST_OFFSETS:
            return {"topics": [{"name": t["name"], "partitions": [
                self._log_start(TopicPartition(t["name"], p["partition_index"]), p["timestamp"])
                for p in t["partitions"]]} for t in body["topics"]]}
        assert api_key == ApiKey.FETCH
        self.leader.fetch_waits.append((len(self.leader.requests) - 1, body["max_wait_ms"]))
        return self._fetch(body)

    def _epoch_end(self, tp, epoch):
        entry = {"partition": tp.partition, "leader_epoch": -1, "end_offset": -1}
        error = _next_error(self.leader.epoch_errors, tp)
        if error:
            return {**entry, "error_code": error}
        epoch, end = self.leader.logs[tp].end_offset_for_epoch(epoch)
        return {**entry, "error_code": 0, "leader_epoch": epoch, "end_offset": end}

    def _log_start(self, tp, timestamp):
        assert timestamp == -2, "the fetcher asks for the log start only"
        entry = {"partition_index": tp.partition, "timestamp": -1, "offset": -1}
        error = _next_error(self.leader.list_offsets_errors, tp)
        if error:
            return {**entry, "error_code": error}
        return {**entry, "error_code": 0, "offset": self.leader.logs[tp].log_start_offset}

    def _fetch(self, body):
        self.leader.fetches.append((body["session_id"], body["session_epoch"]))
        session_id = 0
        if self.leader.session_errors:
            return {"error_code": self.leader.session_errors.pop(0), "session_id": 0, "responses": []}
        if self.leader.sessions:
            session_id = SESSION_ID
            self.leader.forgotten += [TopicPartition(t["topic"], p) for t in body["forgotten_topics_data"]
                                      for p in t["partitions"]]
        return {"error_code": 0, "session_id": session_id, "responses": [
            {"topic": t["topic"], "partitions": [
                self._fetch_one(TopicPartition(t["topic"], p["partition"]), p["fetch_offset"],
                                p["partition_max_bytes"])
                for p in t["partitions"]]} for t in body["topics"]]}

    def _fetch_one(self, tp, offset, max_bytes=1 << 20):
        log = self.leader.logs[tp]
        entry = {"partition_index": tp.partition, "high_watermark": log.log_end_offset,
                 "log_start_offset": log.log_start_offset, "records": b""}
        error = _next_error(self.leader.fetch_errors, tp)
        if error:
            return {**entry, "error_code": error}
        if not log.log_start_offset <= offset <= log.log_end_offset:
            return {**entry, "error_code": ErrorCode.OFFSET_OUT_OF_RANGE}
        records = log.read(offset, max_bytes, min_one_message=True).to_bytes()
        if records and tp in self.leader.corrupt:
            records = records[:-1] + bytes([records[-1] ^ 0xFF])   # a flipped bit: CRC mismatch
        return {**entry, "error_code": 0, "records": records}


# ---- logs, partitions and the fetcher -------------------------------------------------------

def write(log, epoch, *values):
    """Append one single-record batch per value, as leader of ``epoch`` (timestamps fixed,
    so the same value at the same offset and epoch is the same bytes on every broker)."""
    for value in values:
        log.append_as_leader(build_v2_batch([Record(None, value, 1000)]), epoch)


def open_log(tmp_path, broker, tp):
    return Log(str(tmp_path / f"broker{broker}" / f"{tp.topic}-{tp.partition}"), tp, CONFIG)


def follower_partition(log, leader_epoch=9):
    p = Partition(log.tp, FOLLOWER, log, lambda: 1, None)
    p.make_follower(PartitionStateInfo(log.tp, 1, LEADER, leader_epoch, (LEADER, FOLLOWER), 0,
                                       (LEADER, FOLLOWER)))
    return p


def start_fetcher(partitions, partition_of=None):
    """Broker 2's fetcher from broker 1 for ``partitions``; ``partition_of`` (default: those
    partitions by their TopicPartition) is how it finds a partition's replica."""
    fetcher = ReplicaFetcher(FOLLOWER, BrokerEndpoint(LEADER, "leader.invalid", 9092),
                             partition_of or {p.tp: p for p in partitions}.get, 50, 1, 1 << 20, 5.0)
    fetcher.add({p.tp for p in partitions})
    return fetcher


def wait_for(condition, what, timeout=20):
    with gevent.Timeout(timeout, AssertionError(f"timed out waiting until {what}")):
        while not condition():
            gevent.sleep(0.01)


def same_bytes(a: Log, b: Log) -> bool:
    return a.log_end_offset == b.log_end_offset and everything(a) == everything(b)


def everything(log: Log) -> bytes:
    return log.read(0, 1 << 20).to_bytes()
