"""Fetch sessions (KIP-227) on the real leader code path: Partition + on-disk Log + DataApis.

A follower drives the leader with the replica fetcher's own FetchSessionHandler
(no network): idle fetches carry and return no partitions, yet keep every
partition's follower caught up; records, HW moves and errors come back; a lost
session falls back to a full fetch.
"""

import gc
import re

import gevent
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
from tests.harness.leader_setup import NoIsrChanges, RecordingIsrWriter

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
        self.max_wait_ms, self.min_bytes, self.replica_id = 0, 0, 2

    def fetch(self, tps=TPS):
        wanted = {tp: (self.logs[tp].log_end_offset, 1 << 20) for tp in tps}
        session_id, epoch, changed, forgotten = self.session.build(wanted)
        self.last_request = request = {
            "replica_id": self.replica_id, "max_wait_ms": self.max_wait_ms, "min_bytes": self.min_bytes, "max_bytes": 1 << 24,
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
    # Every partition counted as fetched at the LEO: caught up as of this fetch, so a
    # lag check a minute after the full fetch keeps the follower in every ISR.
    writer = RecordingIsrWriter()
    monkeypatch.setattr("kafka_ha.broker.partition.now_ms", lambda: later + 1)
    for p in partitions.values():
        p._isr_writer = writer
        p.shrink_isr_if_lagging(10_000)
    assert writer.removals == []


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
    partitions.pop(TPS[3]).stop()                         # StopReplica
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


def counting_lookups(monkeypatch, plane):
    """Every per-partition step of a fetch starts with a lookup in the hosted partitions."""
    looked_up = []
    real_get = plane.replicas.get

    def get(tp):
        looked_up.append(tp)
        return real_get(tp)
    monkeypatch.setattr(plane.replicas, "get", get)
    return looked_up


def test_an_idle_incremental_fetch_looks_at_no_partition(cluster, monkeypatch):
    """An idle follower fetch of 3,334 partitions cost its leader about 40 ms of loop, twice a
    second per follower (a third of a core per broker with no traffic): each fetch recorded
    the follower's position, tested and waited on every partition.  A partition whose
    answer is the one last sent rests in the session until it changes."""
    plane, partitions, follower = cluster
    follower.fetch()
    looked_up = counting_lookups(monkeypatch, plane)
    for _ in range(3):
        assert follower.fetch() == (True, {})
    assert looked_up == []
    produce(plane, TPS[2], b"a")
    looked_up.clear()
    ok, answered = follower.fetch()
    assert list(answered) == [TPS[2]] and set(looked_up) == {TPS[2]}


def test_resting_partitions_keep_their_follower_in_the_isr_while_it_fetches(cluster, monkeypatch):
    plane, partitions, follower = cluster
    writer = RecordingIsrWriter()
    for p in partitions.values():
        p._isr_writer = writer
    follower.fetch()
    follower.fetch()                                      # every partition rests now
    start = max(p.followers[2].last_caught_up_ms for p in partitions.values())
    clock = {"now": start + 8_000}
    monkeypatch.setattr("kafka_ha.broker.data_apis.now_ms", lambda: clock["now"])
    monkeypatch.setattr("kafka_ha.broker.partition.now_ms", lambda: clock["now"])
    assert follower.fetch() == (True, {})                 # an idle fetch 8 s on
    clock["now"] = start + 16_000
    for p in partitions.values():
        p.shrink_isr_if_lagging(10_000)
    assert writer.removals == []                          # it fetched 8 s ago
    clock["now"] = start + 18_001                         # silent for more than 10 s
    for p in partitions.values():
        p.shrink_isr_if_lagging(10_000)
    assert [leaving for leaving, _ in writer.removals] == [[2]] * len(TPS)


def waiting_fetch(follower):
    """Every partition resting, an incremental fetch that waits (up to 3 s) for records."""
    follower.fetch()
    follower.fetch()
    follower.max_wait_ms, follower.min_bytes = 3000, 1
    waiting = gevent.spawn(follower.fetch)
    gevent.sleep(0.05)
    return waiting


def test_a_resting_partition_wakes_a_waiting_fetch_when_it_is_written(cluster):
    plane, partitions, follower = cluster
    waiting = waiting_fetch(follower)
    produce(plane, TPS[1], b"late")
    ok, answered = waiting.get()
    # Not woken, it would have read nothing at the end of its wait: the partition rested.
    assert ok and list(answered) == [TPS[1]] and answered[TPS[1]]["records"]


def test_a_resting_partition_answers_a_log_start_it_moved(cluster):
    plane, partitions, follower = cluster
    produce(plane, TPS[0], b"a", b"b", b"c")
    for _ in range(3):
        follower.fetch()                                  # records, then the HW, then rest
    assert follower.fetch() == (True, {})
    partitions[TPS[0]].maybe_increment_log_start_offset(2)   # DeleteRecords on the leader
    ok, answered = follower.fetch()
    assert list(answered) == [TPS[0]] and answered[TPS[0]]["log_start_offset"] == 2


def test_a_resting_partition_answers_its_lost_leadership(cluster):
    plane, partitions, follower = cluster
    follower.fetch()
    follower.fetch()
    partitions[TPS[3]].make_follower(PartitionStateInfo(TPS[3], 1, 2, 1, (1, 2), 1, (1, 2)))
    ok, answered = follower.fetch()
    assert list(answered) == [TPS[3]]
    assert answered[TPS[3]]["error_code"] == ErrorCode.NOT_LEADER_FOR_PARTITION


def test_a_session_that_goes_leaves_no_watch_behind(cluster):
    plane, partitions, follower = cluster
    follower.fetch()
    follower.fetch()
    assert all(len(p.resting_in) == 1 for p in partitions.values())
    plane.fetch_sessions.sessions.clear()                 # evicted
    gc.collect()
    assert all(len(p.resting_in) == 0 for p in partitions.values())


def test_a_write_to_a_resting_partition_counts_its_follower_caught_up_until_then(cluster, monkeypatch):
    """Kafka's rule: a follower that has not yet fetched a new write was caught up as of
    its last fetch at the old LEO, the resting fetches included."""
    plane, partitions, follower = cluster
    writer = RecordingIsrWriter()
    partitions[TPS[0]]._isr_writer = writer
    follower.fetch()
    follower.fetch()
    start = partitions[TPS[0]].followers[2].last_caught_up_ms
    clock = {"now": start + 8_000}
    monkeypatch.setattr("kafka_ha.broker.data_apis.now_ms", lambda: clock["now"])
    monkeypatch.setattr("kafka_ha.broker.partition.now_ms", lambda: clock["now"])
    follower.fetch()                                      # resting, 8 s on
    produce(plane, TPS[0], b"new")                        # the follower has not fetched it yet
    clock["now"] = start + 17_000
    partitions[TPS[0]].shrink_isr_if_lagging(10_000)
    assert writer.removals == []                          # caught up as of 8 s: 9 s behind
    clock["now"] = start + 18_001
    partitions[TPS[0]].shrink_isr_if_lagging(10_000)
    assert [leaving for leaving, _ in writer.removals] == [[2]]


def test_a_consumer_session_rests_at_the_high_watermark(cluster, monkeypatch, tmp_path):
    """A consumer reads below the HW: an append it cannot see yet leaves its partition
    resting, and the HW that the follower's next fetch moves wakes it."""
    plane, partitions, follower = cluster
    follower.fetch()
    own_logs = LogManager([str(tmp_path / "consumer")], LogConfig())
    consumer = Follower(plane, {tp: own_logs.get_or_create_log(tp, LogConfig()) for tp in TPS})
    consumer.replica_id = -1
    consumer.fetch()
    consumer.fetch()
    produce(plane, TPS[0], b"c")
    looked_up = counting_lookups(monkeypatch, plane)
    assert consumer.fetch() == (True, {}) and set(looked_up) == {TPS[0]}   # looked at, unseen
    looked_up.clear()
    assert consumer.fetch() == (True, {}) and looked_up == []              # resting again
    follower.fetch()                                      # takes offset 0
    follower.fetch()                                      # confirms it: the HW moves to 1
    looked_up.clear()
    ok, answered = consumer.fetch()
    assert list(answered) == [TPS[0]] and answered[TPS[0]]["high_watermark"] == 1
    assert answered[TPS[0]]["records"] and set(looked_up) == {TPS[0]}
    own_logs.close()


def test_a_session_evicted_while_its_fetch_waits_still_gets_its_answer(cluster):
    plane, partitions, follower = cluster
    waiting = waiting_fetch(follower)
    plane.fetch_sessions.sessions.clear()                 # another reader's session took its slot
    produce(plane, TPS[1], b"late")
    ok, answered = waiting.get()
    assert ok and list(answered) == [TPS[1]]
    assert follower.fetch() == (False, {})                # the next one learns the session is gone
