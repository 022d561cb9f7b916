"""The leader's Produce and ListOffsets answers when the partition changes under a request.

A real Partition over a real Log behind the DataApis, no network.
"""
import gevent
import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.deferred import DeferredResponse, resolved
from kafka_ha.protocol.errors import ErrorCode
from tests.harness.leader_setup import TP, batch, leader, open_log, state

NOW = 10_000


@pytest.fixture
def log_(tmp_path):
    lg = open_log(tmp_path)
    yield lg
    lg.close()


class Broker:
    """DataApis over the given partitions, with the partitions the cluster metadata knows
    (two of TP's topic) under the test's control."""

    def __init__(self, *partitions):
        self.known = {TP, TopicPartition(TP.topic, 1)}
        self.partitions = {p.tp: p for p in partitions}
        self.plane = DataApis(HostedPartitions(self.partitions, lambda tp: tp in self.known),
                              lambda t: 1000012)

    def produce(self, tps=(TP,), acks=-1, timeout_ms=5000):
        """One Produce request to ``tps``: {partition: error code}."""
        return self.answer(self.send_produce(tps, acks, timeout_ms))

    def send_produce(self, tps=(TP,), acks=-1, timeout_ms=5000):
        """The handler's return: an answer, or one still to be finished (acks=all)."""
        return self.plane.produce({"acks": acks, "timeout_ms": timeout_ms, "topic_data": [
            {"name": TP.topic, "partition_data": [{"index": tp.partition, "records": batch()}
                                                  for tp in tps]}]}, 2)

    @staticmethod
    def answer(response):
        response = resolved(response)
        return {e["index"]: e["error_code"] for e in response["responses"][0]["partition_responses"]}

    def latest(self):
        response = self.plane.list_offsets({"replica_id": -1, "topics": [
            {"name": TP.topic, "partitions": [{"partition_index": TP.partition, "timestamp": -1}]}]}, 1)
        entry = response["topics"][0]["partitions"][0]
        return entry["error_code"], entry["offset"]


# ---- an acks=all request whose partition goes away (defect 17) ----------------------------

TP1 = TopicPartition(TP.topic, 1)


def delete_topic(broker, tp):
    broker.known.clear()
    broker.partitions.pop(tp).stop()


def move_away(broker, tp):
    broker.partitions.pop(tp).stop()   # a reassignment: the topic stays


def become_follower(broker, tp):
    broker.partitions[tp].make_follower(state((2,), epoch=2, leader=2, tp=tp))


@pytest.mark.parametrize("change, answer", [
    (delete_topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (move_away, ErrorCode.NOT_LEADER_FOR_PARTITION),
    (become_follower, ErrorCode.NOT_LEADER_FOR_PARTITION),
])
@pytest.mark.parametrize("changed", [TP, TP1], ids=["waited-on", "waited-on-next"])
def test_an_acks_all_produce_whose_partition_goes_away_is_answered(tmp_path, change, answer, changed):
    """A request to partitions 0 and 1 waits for follower 2, on 0 first: one of them leaves
    this broker or its leadership meanwhile; the other is acknowledged.  Partition 1 used
    to be looked up again after the wait on 0: a KeyError."""
    logs = [open_log(tmp_path, tp) for tp in (TP, TP1)]
    try:
        partitions = {lg.tp: leader(lg, (1, 2), replicas=(1, 2)) for lg in logs}
        broker = Broker(*partitions.values())
        request = gevent.spawn(broker.produce, (TP, TP1))
        gevent.sleep(0.01)   # appended to both, now waiting for follower 2
        assert not request.ready()
        change(broker, changed)
        other = partitions[TP1 if changed == TP else TP]
        other.on_follower_fetch(2, other.log.log_end_offset, NOW)
        answers = {tp.partition: answer if tp == changed else ErrorCode.NONE for tp in (TP, TP1)}
        assert request.get() == answers
    finally:
        for lg in logs:
            lg.close()


# ---- pipelined acks=all requests are appended at once, answered when replicated ----------

def test_acks_all_requests_append_at_once_and_only_their_answers_wait(tmp_path):
    """Issue 23: librdkafka sends a Produce per partition and pipelines them.  Each
    request must append when it is read, and leave only its answer waiting, so that
    one follower round trip replicates all of them instead of one per request."""
    logs = [open_log(tmp_path, tp) for tp in (TP, TP1)]
    try:
        partitions = {lg.tp: leader(lg, (1, 2), replicas=(1, 2)) for lg in logs}
        broker = Broker(*partitions.values())
        first, second = broker.send_produce((TP,)), broker.send_produce((TP1,))
        assert isinstance(first, DeferredResponse) and isinstance(second, DeferredResponse)
        assert [lg.log_end_offset for lg in logs] == [1, 1]   # both appended, nothing replicated
        for p in partitions.values():
            p.on_follower_fetch(2, 1, NOW)                   # one fetch round covers both
        assert broker.answer(first) == {0: ErrorCode.NONE}
        assert broker.answer(second) == {1: ErrorCode.NONE}
    finally:
        for lg in logs:
            lg.close()


def test_the_acks_all_timeout_runs_from_the_request_not_from_its_turn_to_answer(tmp_path):
    """Answers are finished in request order; a later request's timeout must not restart
    when the earlier ones are done."""
    lg = open_log(tmp_path)
    try:
        broker = Broker(leader(lg, (1, 2), replicas=(1, 2)))
        deferred = broker.send_produce(timeout_ms=50)
        gevent.sleep(0.2)                                    # its turn comes late
        started = gevent.get_hub().loop.now()
        assert broker.answer(deferred) == {0: ErrorCode.REQUEST_TIMED_OUT}
        assert gevent.get_hub().loop.now() - started < 0.05  # already past its deadline
    finally:
        lg.close()


def test_requests_that_wait_for_nothing_are_answered_at_once(tmp_path):
    lg = open_log(tmp_path)
    try:
        broker = Broker(leader(lg, (1,), replicas=(1, 2)))  # the ISR is the leader alone
        assert not isinstance(broker.send_produce(), DeferredResponse)
        assert not isinstance(broker.send_produce(acks=1), DeferredResponse)
    finally:
        lg.close()


# ---- ListOffsets "latest" on a new leader (defect 9) --------------------------------------

def new_leader(log_, isr, min_isr):
    """Leader of epoch 2 over three records of epoch 1 that no follower confirmed."""
    p = leader(log_, (1, 2), min_isr, replicas=(1, 2))
    p.append_as_leader(batch(b"a", b"b", b"c"), acks=1)
    p.make_leader(state(isr, epoch=2, replicas=(1, 2)))
    assert (p.high_watermark, p.leader_epoch_start_offset) == (0, 3)
    return p


def test_a_leader_below_min_isr_answers_its_high_watermark(log_):
    """Its HW cannot move while the ISR is below min.insync.replicas, so waiting for it to
    reach the epoch's start would refuse ListOffsets for as long as the ISR stays small."""
    broker = Broker(new_leader(log_, (1,), min_isr=2))
    assert broker.latest() == (ErrorCode.NONE, 0)


def test_a_healthy_new_leader_answers_once_its_hw_reaches_its_epoch_start(log_):
    p = new_leader(log_, (1, 2), min_isr=2)
    broker = Broker(p)
    # Retriable (Kafka's OFFSET_NOT_AVAILABLE is ListOffsets v5+; below it, this).
    assert broker.latest() == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    p.on_follower_fetch(2, 3, NOW)
    assert broker.latest() == (ErrorCode.NONE, 3)


# ---- a produce to thousands of partitions holds the loop one slice at a time --------------

def test_a_produce_to_many_partitions_pauses_between_them(tmp_path, monkeypatch):
    from kafka_ha import cooperative
    tps = [TopicPartition(TP.topic, i) for i in range(5)]
    logs = [open_log(tmp_path, tp) for tp in tps]
    partitions = [leader(lg, (1,)) for lg in logs]
    broker = Broker(*partitions)
    seen = []   # at each pause: how many partitions the request has appended to
    monkeypatch.setattr(cooperative, "SLICE_MS", 0)
    monkeypatch.setattr(cooperative, "yield_to_io",
                        lambda: seen.append(sum(lg.log_end_offset == 1 for lg in logs)))
    assert broker.produce(tps, acks=1) == {tp.partition: ErrorCode.NONE for tp in tps}
    for lg in logs:
        lg.close()
    assert any(0 < n < len(tps) for n in seen), seen


def test_a_partition_the_metadata_does_not_know_is_unknown_even_if_its_topic_exists(log_):
    """Kafka decides per partition (ReplicaManager.getPartitionOrError): NOT_LEADER would
    make the client refresh its metadata and retry a partition that does not exist."""
    broker = Broker(leader(log_, (1,)))
    assert broker.produce((TopicPartition(TP.topic, 1),), acks=1) == {1: ErrorCode.NOT_LEADER_FOR_PARTITION}
    assert broker.produce((TopicPartition(TP.topic, 9),), acks=1) == {9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
