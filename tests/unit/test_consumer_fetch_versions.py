"""Consumers (replica id -1) at the Fetch versions now advertised to them (v5-v10): the log
start offset, incremental fetch sessions and KIP-320 fencing, as a Kafka 2.1 broker answers
them.  Real Partition and Log behind the DataApis, no network."""
import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.fetch_sessions import FetchSessionCache, INITIAL_EPOCH
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from tests.harness.fake_leader import follower_partition
from tests.harness.fake_leader import open_log as follower_log
from tests.harness.leader_setup import TP, batch, leader, open_log

CONSUMER = -1
NO_SESSION_YET = 0


@pytest.fixture
def led(tmp_path):
    """This broker leads TP in epoch 2 with two records."""
    lg = open_log(tmp_path)
    p = leader(lg, (1,), replicas=(1, 2), epoch=2)
    p.append_as_leader(batch(b"a", b"b"), acks=1)
    plane = DataApis(HostedPartitions({TP: p}, lambda t: True), lambda t: 1000012, FetchSessionCache())
    yield plane, p
    lg.close()


def consumer_fetch(plane, version, offset=0, epoch=-1, session_id=NO_SESSION_YET,
                   session_epoch=INITIAL_EPOCH, partitions=True):
    partition = {"partition": TP.partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
    if version >= 5:
        partition["log_start_offset"] = -1
    if version >= 9:
        partition["current_leader_epoch"] = epoch
    request = {"replica_id": CONSUMER, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24,
               "isolation_level": 0,
               "topics": [{"topic": TP.topic, "partitions": [partition]}] if partitions else []}
    if version >= 7:
        request.update(session_id=session_id, session_epoch=session_epoch,
                       forgotten_topics_data=[])
    response = plane.fetch(request, version)
    entries = {e["partition_index"]: e for t in response["responses"] for e in t["partitions"]}
    return response, entries.get(TP.partition)


@pytest.mark.parametrize("version", [5, 6, 7, 8, 9, 10])
def test_a_consumer_reads_with_the_log_start_offset(led, version):
    plane, p = led
    response, entry = consumer_fetch(plane, version, epoch=2)
    assert entry["error_code"] == ErrorCode.NONE and entry["records"]
    assert (entry["high_watermark"], entry["log_start_offset"]) == (2, 0)
    if version >= 7:
        assert response["error_code"] == ErrorCode.NONE


@pytest.mark.parametrize("version", [9, 10])
@pytest.mark.parametrize("epoch, error", [
    (1, ErrorCode.FENCED_LEADER_EPOCH), (3, ErrorCode.UNKNOWN_LEADER_EPOCH),
    (2, ErrorCode.NONE), (-1, ErrorCode.NONE)])
def test_a_consumer_in_another_leader_epoch_gets_kafkas_error(led, version, epoch, error):
    plane, _ = led
    _, entry = consumer_fetch(plane, version, epoch=epoch)
    assert entry["error_code"] == error
    assert bool(entry["records"]) == (error == ErrorCode.NONE)


def test_a_consumer_session_answers_only_partitions_with_news(led):
    plane, p = led
    response, entry = consumer_fetch(plane, 10, offset=2, epoch=2, session_epoch=0)
    session = response["session_id"]
    assert session > 0 and entry["error_code"] == ErrorCode.NONE
    # incremental, nothing listed, nothing new: an empty answer in the same session
    response, entry = consumer_fetch(plane, 10, session_id=session, session_epoch=1,
                                     partitions=False)
    assert (response["error_code"], response["session_id"], entry) == (ErrorCode.NONE, session, None)
    p.append_as_leader(batch(b"c"), acks=1)
    response, entry = consumer_fetch(plane, 10, session_id=session, session_epoch=2,
                                     partitions=False)
    assert entry is not None and entry["records"] and entry["high_watermark"] == 3
    # a wrong session epoch: Kafka's INVALID_FETCH_SESSION_EPOCH
    response, _ = consumer_fetch(plane, 10, session_id=session, session_epoch=7, partitions=False)
    assert response["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_a_follower_checks_a_consumers_leader_epoch_before_leadership(tmp_path):
    """Kafka 2.1 compares the named epoch with the replica's own, leader or not: a consumer
    behind the times hears FENCED_LEADER_EPOCH, one ahead UNKNOWN_LEADER_EPOCH, and only one
    in the same epoch NOT_LEADER_FOR_PARTITION."""
    lg = follower_log(tmp_path, 2, TP)
    p = follower_partition(lg, leader_epoch=9)
    plane = DataApis(HostedPartitions({TP: p}, lambda t: True), lambda t: 1000012, FetchSessionCache())
    try:
        errors = [consumer_fetch(plane, 10, epoch=e)[1]["error_code"] for e in (8, 10, 9, -1)]
    finally:
        lg.close()
    assert errors == [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
                      ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.NOT_LEADER_FOR_PARTITION]
