"""Issue 23 (kill -9 at 10k partitions): a new leader that the cluster metadata already
names takes a Produce once its LeaderAndIsr is applied, instead of bouncing it.

The controller sends UpdateMetadata before LeaderAndIsr, so that clients learn the
new leaders early; at 10k partitions the new leaders applied their LeaderAndIsr
1.5-2 s after it.  Producers that came in between got NOT_LEADER_FOR_PARTITION,
refreshed their metadata (which named the same leader) and retried with a
back-off that grows to 1 s (librdkafka's retry.backoff.max.ms): even acks=1 writes
were accepted 2-3 s after the leaders were ready.  Now the Produce waits, for a
few seconds at most, while the metadata names this broker the leader at a newer
leader epoch than its replica has taken."""
import gevent
import pytest

from kafka_ha.broker import hosted_partitions
from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log import LogConfig, LogManager
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol.deferred import resolved
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.partition_states import to_wire
from tests.harness.leader_setup import batch

ME = 1
TP = TopicPartition("t", 0)


def leader_and_isr(leader, epoch, tp=TP):
    return {"controller_id": 2, "controller_epoch": 1, "live_leaders": [],
            "partition_states": [to_wire(PartitionStateInfo(tp, 1, leader, epoch, (1, 2), 0, (1, 2)))]}


class Broker:
    """A follower of t-0 at leader epoch 1; ``announced`` is what its metadata says:
    tp -> (leader, leader epoch)."""

    def __init__(self, log_dir):
        self.announced: dict[TopicPartition, tuple[int, int]] = {}
        config = BrokerConfig({"broker.id": ME, "zookeeper.connect": "127.0.0.1:1"})
        self.rm = ReplicaManager(config, LogManager([log_dir], LogConfig()), None, lambda t: 1,
                                 lambda t: LogConfig(), lambda b: None,
                                 announced_leader_epoch=self.announced_epoch)
        self.rm.leader_and_isr(leader_and_isr(2, 1), 1)
        self.plane = DataApis(self.rm.hosted, lambda t: 1000012)

    def announced_epoch(self, tp):
        leader, epoch = self.announced.get(tp, (-1, -1))
        return epoch if leader == ME else None

    def produce(self, tp=TP, acks=1):
        return resolved(self.plane.produce({"acks": acks, "timeout_ms": 30_000, "topic_data": [
            {"name": tp.topic, "partition_data": [{"index": tp.partition, "records": batch()}]}]}, 2))


def error_of(response):
    return response["responses"][0]["partition_responses"][0]["error_code"]


@pytest.fixture
def broker(tmp_path):
    b = Broker(str(tmp_path))
    yield b
    b.rm.log_manager.close()


def test_a_produce_waits_for_the_leader_and_isr_that_the_metadata_announced(broker):
    broker.announced[TP] = (ME, 2)
    answer = gevent.spawn(broker.produce)
    gevent.sleep(0.05)
    assert not answer.ready(), "the produce waits for the announced leadership"
    broker.rm.leader_and_isr(leader_and_isr(ME, 2), 2)
    assert error_of(answer.get(timeout=5)) == ErrorCode.NONE
    assert broker.rm.partitions[TP].log.log_end_offset > 0


def test_a_partition_not_created_yet_waits_too(broker):
    """A new topic: UpdateMetadata came first, the LeaderAndIsr that creates the log follows."""
    new = TopicPartition("new", 0)
    broker.announced[new] = (ME, 0)
    answer = gevent.spawn(broker.produce, new)
    gevent.sleep(0.05)
    assert not answer.ready()
    broker.rm.leader_and_isr(leader_and_isr(ME, 0, new), 2)
    assert error_of(answer.get(timeout=5)) == ErrorCode.NONE


def test_without_the_announcement_the_answer_is_not_leader_at_once(broker):
    broker.announced[TP] = (2, 1)           # the metadata names the current leader
    assert error_of(broker.produce()) == ErrorCode.NOT_LEADER_FOR_PARTITION


def test_the_wait_is_bounded_and_ends_in_not_leader_if_the_leader_and_isr_never_comes(broker, monkeypatch):
    monkeypatch.setattr(hosted_partitions, "ANNOUNCED_LEADERSHIP_WAIT_S", 0.2)
    broker.announced[TP] = (ME, 2)
    assert error_of(gevent.spawn(broker.produce).get(timeout=5)) == ErrorCode.NOT_LEADER_FOR_PARTITION


def test_a_leader_and_isr_that_makes_it_a_follower_after_all_ends_the_wait(broker):
    broker.announced[TP] = (ME, 2)
    answer = gevent.spawn(broker.produce)
    gevent.sleep(0.05)
    broker.rm.leader_and_isr(leader_and_isr(2, 3), 2)   # a newer decision came first
    assert error_of(answer.get(timeout=1)) == ErrorCode.NOT_LEADER_FOR_PARTITION
