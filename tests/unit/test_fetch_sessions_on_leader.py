"""Fetch sessions (KIP-227) on the real leader code path: Partition + on-disk Log + DataApis.

A follower drives the leader with the replica fetcher's own FetchSessionHandler
(no network): idle fetches carry and return no partitions, yet keep every
partition's follower caught up; records, HW moves and errors come back; a lost
session falls back to a full fetch.
"""

import re

import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.fetch_session_handler import FetchSessionHandler
from kafka_ha.broker.fetch_sessions import FetchSessionCache
from kafka_ha.broker.partition import Partition
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.records.reader import decode_records
from tests.harness.leader_setup import NoIsrChanges

TPS = [TopicPartition("s", p) for p in range(4)]


@pytest.fixture
def cluster(tmp_path):
    manager = LogManager([str(tmp_path / "leader")], LogConfig())
    follower_logs = LogManager([str(tmp_path / "follower")], LogConfig())
    partitions = {}
    for tp in TPS:
        p = Partition(tp, 1, manager.get_or_create_log(tp, LogConfig()), lambda: 1, NoIsrChanges())
        p.make_leader(PartitionStateInfo(tp, 1, 1, 0, (1, 2), 0, (1, 2)))
        partitions[tp] = p
    plane = DataApis(HostedPartitions(partitions, lambda t: True), lambda t: 1000012, FetchSessionCache())
    follower = Follower(plane, {tp: follower_logs.get_or_create_log(tp, LogConfig()) for tp in TPS})
    yield plane, partitions, follower
    manager.close()
    follower_logs.close()


class Follower:
    """The replica fetcher's loop, minus the socket: build, fetch v7, apply."""

    def __init__(self, plane, logs):
        self.plane, self.logs, self.session = plane, logs, FetchSessionHandler()
        self.last_request = None

    def fetch(self, tps=TPS):
        wanted = {tp: (self.logs[tp].log_end_offset, 1 << 20) for tp in tps}
        session_id, epoch, changed, forgotten = self.session.build(wanted)
        self.last_request = request = {
            "replica_id": 2, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": "s", "partitions": [
                {"partition": tp.partition, "fetch_offset": off, "log_start_offset": 0,
                 "partition_max_bytes": max_bytes} for tp, (off, max_bytes) in changed]}],
            "forgotten_topics_data": [{"topic": "s", "partitions": [tp.partition for tp in forgotten]}]}
        response = self.plane.fetch(request, 7)
        ok = self.session.handle_response(response["error_code"], response["session_id"])
        answered = {}
        for topic in response["responses"]:
            for e in topic["partitions"]:
                tp = TopicPartition(topic["topic"], e["partition_index"])
                answered[tp] = e
                if e["error_code"] == ErrorCode.NONE and e["records"]:
                    self.logs[tp].append_as_follower(bytes(e["records"]))
        return ok, answered

    def requested(self):
        return [p["partition"] for t in self.last_request["topics"] for p in t["partitions"]]


def produce(plane, tp, *values):
    batch = build_v2_batch([Record(None, v) for v in values])
    response = plane.produce({"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": tp.topic, "partition_data": [{"index": tp.partition, "records": batch}]}]}, 2)
    assert response["responses"][0]["partition_responses"][0]["error_code"] == 0


def test_idle_fetches_carry_nothing_but_keep_every_follower_caught_up(cluster, monkeypatch):
    plane, partitions, follower = cluster
    ok, answered = follower.fetch()                       # full: opens the session
    assert ok and set(answered) == set(TPS) and len(follower.requested()) == 4
    assert follower.session.session_id != 0
    later = max(partitions[tp].followers[2].last_caught_up_ms for tp in TPS) + 60_000
    monkeypatch.setattr("kafka_ha.broker.data_apis.now_ms", lambda: later)
    ok, answered = follower.fetch()                       # incremental, nothing moved
    assert ok and answered == {} and follower.requested() == []
    # Every partition counted as fetched at the LEO: caught up as of this fetch.
    assert [partitions[tp].followers[2].last_caught_up_ms for tp in TPS] == [later] * 4


def test_an_incremental_fetch_reads_only_the_partitions_whose_answer_would_change(cluster, monkeypatch):
    """An idle follower fetch of 3,334 partitions cost the leader 30 ms of its loop,
    mostly reading partitions whose answer the session then dropped as unchanged.
    A caught-up partition with the HW and log start last sent is not read at all."""
    from kafka_ha.broker import replica_reads
    plane, partitions, follower = cluster
    follower.fetch()
    read, real_read = [], replica_reads.read_partition

    def counting(partitions_, tp, *args, **kwargs):
        read.append(tp)
        return real_read(partitions_, tp, *args, **kwargs)
    monkeypatch.setattr(replica_reads, "read_partition", counting)
    ok, answered = follower.fetch()
    assert ok and answered == {} and read == []
    produce(plane, TPS[2], b"a")
    ok, answered = follower.fetch()
    assert list(answered) == [TPS[2]] and read == [TPS[2]]
    read.clear()
    ok, answered = follower.fetch()                       # confirms offset 1: the HW moves
    assert list(answered) == [TPS[2]] and answered[TPS[2]]["high_watermark"] == 1
    assert read == [TPS[2]]


def test_records_and_the_high_watermark_come_back_only_where_they_moved(cluster):
    plane, partitions, follower = cluster
    follower.fetch()
    produce(plane, TPS[1], b"a", b"b")
    ok, answered = follower.fetch()
    assert ok and list(answered) == [TPS[1]] and answered[TPS[1]]["high_watermark"] == 0
    assert follower.logs[TPS[1]].log_end_offset == 2
    # The next fetch names the moved partition only; it confirms offset 2, so
    # the leader's HW moves, and the answer carries that HW without records.
    ok, answered = follower.fetch()
    assert follower.requested() == [1]
    assert partitions[TPS[1]].high_watermark == 2
    assert list(answered) == [TPS[1]] and answered[TPS[1]]["high_watermark"] == 2
    assert not answered[TPS[1]]["records"]
    assert follower.fetch()[1] == {}
    fetched = decode_records(follower.logs[TPS[1]].read(0, 1 << 20).to_bytes(), 0)
    assert [r.value for r in fetched] == [b"a", b"b"]


def test_a_partition_the_leader_lost_keeps_answering_its_error(cluster):
    plane, partitions, follower = cluster
    follower.fetch()
    del partitions[TPS[3]]                                # e.g. StopReplica
    for _ in range(2):
        ok, answered = follower.fetch()
        assert ok and list(answered) == [TPS[3]]
        assert answered[TPS[3]]["error_code"] == ErrorCode.NOT_LEADER_FOR_PARTITION


def test_forgotten_partitions_leave_the_session(cluster):
    plane, partitions, follower = cluster
    follower.fetch()
    follower.fetch(TPS[:2])
    assert follower.last_request["forgotten_topics_data"] == [{"topic": "s", "partitions": [2, 3]}]
    produce(plane, TPS[3], b"x")
    assert follower.fetch(TPS[:2])[1] == {}               # not in the session any more
    session = plane.fetch_sessions.sessions[follower.session.session_id]
    assert list(session.partitions) == TPS[:2]


def test_a_lost_session_falls_back_to_a_full_fetch(cluster):
    plane, partitions, follower = cluster
    follower.fetch()
    lost = follower.session.session_id
    plane.fetch_sessions.sessions.clear()                 # evicted, or the leader restarted
    ok, answered = follower.fetch()
    assert not ok and answered == {}
    ok, answered = follower.fetch()                       # full again, naming the lost one to close
    assert ok and set(answered) == set(TPS) and follower.last_request["session_id"] == lost
    assert follower.session.session_id not in (0, lost)
    assert follower.fetch() == (True, {})


def test_pre_v7_fetches_open_no_session(cluster):
    plane, partitions, follower = cluster
    request = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
               "isolation_level": 0, "topics": [{"topic": "s", "partitions": [
                   {"partition": 0, "fetch_offset": 0, "log_start_offset": 0,
                    "partition_max_bytes": 1 << 20}]}]}
    response = plane.fetch(request, 6)
    assert "session_id" not in response and plane.fetch_sessions.sessions == {}
    assert response["responses"][0]["partitions"][0]["log_start_offset"] == 0


def test_the_epoch_start_lines_of_one_fetch_are_one_log_record(cluster, caplog):
    # A failover confirms thousands of new epochs in a few fetches: one record per fetch,
    # one whole line per partition (a record each cost ~7% of a new leader's loop).
    plane, partitions, follower = cluster
    with caplog.at_level("INFO", logger="kafka_ha.broker.partition"):
        follower.fetch()
    records = [r for r in caplog.records if "every ISR follower reached" in r.getMessage()]
    assert len(records) == 1
    lines = records[0].getMessage().split("\n")
    line = re.compile(r"Partition (\[s,\d\]) on broker 1: every ISR follower reached the start offset 0 "
                      r"of leader epoch 0, \d+ ms after becoming leader")
    assert sorted(line.fullmatch(text).group(1) for text in lines) == sorted(str(tp) for tp in TPS)
