"""KIP-320 between brokers: Fetch v9 and OffsetsForLeaderEpoch v2 name the sender's
current leader epoch, and a leader serves only senders in its own epoch.

The replication simulation found the case (seeds 1632 and 11535, about one in a thousand):
a follower that missed two LeaderAndIsr requests kept fetching from a broker that had
since become leader again; its fetch offset lay inside the leader's log, so it was
counted as caught up and rejoined the ISR with a log that had never truncated to the new
epoch's start.  Leader side: real Partition and Log behind the DataApis, no network.
Follower side: the replica fetcher against the fake leader of tests/harness/fake_leader.py.
"""
import pytest

from kafka_ha.broker import replica_fetcher
from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.fetch_sessions import FetchSessionCache, INITIAL_EPOCH
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.replication import leader_epoch_error
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from tests.harness.fake_leader import FakeLeader, follower_partition, start_fetcher, wait_for, write
from tests.harness.fake_leader import open_log as fake_open_log
from tests.harness.leader_setup import TP, batch, leader, open_log, state

FENCED, UNKNOWN = ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH


@pytest.mark.parametrize("requested, current, error", [
    (-1, 3, ErrorCode.NONE), (3, 3, ErrorCode.NONE), (2, 3, FENCED), (0, 3, FENCED), (4, 3, UNKNOWN)])
def test_leader_epoch_error(requested, current, error):
    assert leader_epoch_error(requested, current) == error


# ---- the leader --------------------------------------------------------------------------

@pytest.fixture
def led(tmp_path):
    """Broker 1 leads TP in epoch 2 with ISR {1} and follower 2 outside it; one record."""
    lg = open_log(tmp_path)
    p = leader(lg, (1,), replicas=(1, 2), epoch=2)
    p.append_as_leader(batch(b"a"), acks=1)
    plane = DataApis(HostedPartitions({TP: p}, lambda t: True), lambda t: 1000012, FetchSessionCache())
    yield plane, p
    lg.close()


def follower_fetch(plane, offset, epoch, session_id=0, session_epoch=INITIAL_EPOCH, listed=True):
    partitions = [{"partition": TP.partition, "current_leader_epoch": epoch, "fetch_offset": offset,
                   "log_start_offset": 0, "partition_max_bytes": 1 << 20}] if listed else []
    response = plane.fetch({
        "replica_id": 2, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
        "session_id": session_id, "session_epoch": session_epoch,
        "topics": [{"topic": TP.topic, "partitions": partitions}] if listed else [],
        "forgotten_topics_data": []}, 9)
    entries = {e["partition_index"]: e for t in response["responses"] for e in t["partitions"]}
    return response, entries.get(TP.partition)


def test_a_fetch_in_an_older_epoch_is_fenced_and_not_counted(led):
    plane, p = led
    _, entry = follower_fetch(plane, 1, epoch=1)
    assert entry["error_code"] == FENCED and not entry["records"]
    assert p.followers[2].log_end_offset < 1, "a fenced fetch is not the follower's position"
    assert p.isr == (1,) and not p.joining, "nor does it bring the follower into the ISR"


def test_a_fetch_in_a_newer_epoch_asks_again_later(led):
    plane, _ = led
    assert follower_fetch(plane, 0, epoch=3)[1]["error_code"] == UNKNOWN


def test_a_fetch_in_the_leaders_epoch_is_served(led):
    plane, p = led
    _, entry = follower_fetch(plane, 0, epoch=2)
    assert entry["error_code"] == ErrorCode.NONE and entry["records"]


def test_a_session_remembers_the_epoch_of_partitions_an_incremental_fetch_leaves_out(led):
    plane, p = led
    response, entry = follower_fetch(plane, 1, epoch=2)
    assert entry["error_code"] == ErrorCode.NONE and response["session_id"]
    # The leader is elected again (epoch 3) and this follower hears nothing of it.
    p.make_leader(state((1,), epoch=3, replicas=(1, 2)))
    _, entry = follower_fetch(plane, 1, epoch=2, session_id=response["session_id"],
                              session_epoch=1, listed=False)
    assert entry is not None and entry["error_code"] == FENCED


def test_an_epoch_question_from_an_older_epoch_is_fenced(led):
    plane, _ = led
    answer = plane.offsets_for_leader_epoch({"topics": [{"topic": TP.topic, "partitions": [
        {"partition": TP.partition, "current_leader_epoch": 1, "leader_epoch": 1}]}]}, 2)
    assert answer["throttle_time_ms"] == 0
    assert answer["topics"][0]["partitions"][0]["error_code"] == FENCED


# ---- the follower --------------------------------------------------------------------------

A = TopicPartition("a", 0)


@pytest.fixture
def fake(monkeypatch):
    fake = FakeLeader()
    monkeypatch.setattr(replica_fetcher, "BrokerConnection", fake.connect)
    yield fake
    for log in fake.logs.values():
        log.close()


@pytest.mark.parametrize("where", ["epoch question", "fetch"])
def test_a_fenced_follower_stops_fetching_until_its_next_leader_and_isr(tmp_path, fake, where):
    ours = fake.logs[A] = fake_open_log(tmp_path, 1, A)
    write(ours, 0, b"m0")
    errors = fake.epoch_errors if where == "epoch question" else fake.fetch_errors
    errors[A] = [FENCED]
    p = follower_partition(fake_open_log(tmp_path, 2, A))
    fetcher = start_fetcher([p])
    try:
        wait_for(lambda: fetcher.idle, "the fenced partition left the fetcher")
        assert A not in fetcher.failed_partitions, "fenced is not failed: a LeaderAndIsr resumes it"
        fetcher.add({A})                                   # the LeaderAndIsr of the new epoch
        wait_for(lambda: A in fetcher.fetching and p.log.log_end_offset == 1, "caught up")
    finally:
        fetcher.stop()
        p.log.close()


@pytest.mark.parametrize("where", ["epoch question", "fetch"])
def test_a_fence_answer_to_an_epoch_the_follower_has_since_left_is_ignored(tmp_path, fake, where):
    """The fetcher asked in epoch 9; while the request was out, the LeaderAndIsr of epoch 10
    arrived and re-added the partition.  The leader's FENCED answer is about epoch 9: acting
    on it removed the partition for good (no further LeaderAndIsr was coming), and the
    follower stopped replicating (seen in test_reassignment_under_load)."""
    ours = fake.logs[A] = fake_open_log(tmp_path, 1, A)
    write(ours, 0, b"m0")
    p = follower_partition(fake_open_log(tmp_path, 2, A))
    errors = fake.epoch_errors if where == "epoch question" else fake.fetch_errors
    errors[A] = [FENCED]
    api = ApiKey.OFFSETS_FOR_LEADER_EPOCH if where == "epoch question" else ApiKey.FETCH
    fetcher = start_fetcher([p])

    def leader_and_isr_meanwhile(api_key):
        if api_key == api and errors.get(A):
            p.make_follower(state((1, 2), epoch=10, leader=1, replicas=(1, 2), tp=A))
            fetcher.add({A})
    fake.during = leader_and_isr_meanwhile
    try:
        wait_for(lambda: A in fetcher.fetching and p.log.log_end_offset == 1, "caught up")
    finally:
        fetcher.stop()
        p.log.close()
