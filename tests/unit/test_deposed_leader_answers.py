"""Issue 23: an acks=all answer that waits on a partition this broker stops leading is
answered NOT_LEADER_FOR_PARTITION at once (Kafka's delayed produce completes when the
leadership moves), so the producer retries at the new leader instead of waiting for
its timeout or for this broker to exit; and a deposed leader appends nothing more."""
import gevent
import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log import LogConfig, LogManager
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol.deferred import DeferredResponse, resolved
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.partition_states import to_wire
from tests.harness.leader_setup import batch

ME = 1
PARTITIONS = (0, 1, 2)
TPS = [TopicPartition("t", p) for p in PARTITIONS]


def leader_and_isr(leader, epoch):
    states = [to_wire(PartitionStateInfo(tp, 1, leader, epoch, (1, 2), 0, (1, 2))) for tp in TPS]
    return {"controller_id": 2, "controller_epoch": 1, "partition_states": states, "live_leaders": []}


def stop_replica():
    return {"controller_id": 2, "controller_epoch": 1, "delete_partitions": False,
            "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in TPS]}


class Broker:
    """A replica manager that leads t-0..2 with follower 2 in the ISR, and its data plane."""

    def __init__(self, log_dir):
        config = BrokerConfig({"broker.id": ME, "zookeeper.connect": "127.0.0.1:1"})
        self.rm = ReplicaManager(config, LogManager([log_dir], LogConfig()), None, lambda t: 1,
                                 lambda t: LogConfig(), lambda b: None)
        self.rm.leader_and_isr(leader_and_isr(ME, 1), 1)
        self.plane = DataApis(self.rm.hosted, lambda t: 1000012)

    def produce(self, acks, timeout_ms=30_000):
        return self.plane.produce({"acks": acks, "timeout_ms": timeout_ms, "topic_data": [
            {"name": "t", "partition_data": [{"index": tp.partition, "records": batch()}
                                             for tp in TPS]}]}, 2)

    def ends(self):
        return [self.rm.partitions[tp].log.log_end_offset for tp in TPS]


def errors(response):
    return {e["index"]: e["error_code"] for e in resolved(response)["responses"][0]["partition_responses"]}


@pytest.fixture
def broker(tmp_path):
    b = Broker(str(tmp_path))
    yield b
    b.rm.log_manager.close()


def deposed_by_leader_and_isr(broker):
    broker.rm.leader_and_isr(leader_and_isr(2, 2), 2)


def deposed_by_stop_replica(broker):
    broker.rm.stop_replica(stop_replica(), 2)


def stopping(broker):
    """The broker shuts down: its controlled shutdown has moved every leadership, and
    the controller's LeaderAndIsr has not been applied (a broker stopping with thousands
    of logs to flush did not apply it before it exited)."""
    broker.rm.stop_leading()


@pytest.mark.parametrize("depose", [deposed_by_leader_and_isr, deposed_by_stop_replica, stopping])
def test_a_pending_acks_all_answer_is_not_leader_as_soon_as_the_leadership_ends(broker, depose):
    deferred = broker.produce(acks=-1)
    assert isinstance(deferred, DeferredResponse)
    answer = gevent.spawn(resolved, deferred)
    gevent.sleep(0.01)
    assert not answer.ready()                     # follower 2 has not fetched: it waits
    depose(broker)
    # No follower fetch, no timeout (30 s): the leadership's end alone answers it.
    with gevent.Timeout(2):
        answer.join()
    assert errors(answer.value) == {p: ErrorCode.NOT_LEADER_FOR_PARTITION for p in PARTITIONS}


@pytest.mark.parametrize("depose", [deposed_by_leader_and_isr, deposed_by_stop_replica, stopping])
@pytest.mark.parametrize("acks", [1, -1])
def test_a_deposed_leader_appends_nothing(broker, depose, acks):
    depose(broker)
    before = broker.ends()
    assert errors(broker.produce(acks)) == {p: ErrorCode.NOT_LEADER_FOR_PARTITION for p in PARTITIONS}
    assert broker.ends() == before


def test_shutdown_answers_pending_acks_all_waits_before_it_closes_the_logs(broker, monkeypatch):
    """The logs' close (a flush of every log) held the loop until exit: the answers must
    be out before it starts."""
    answer = gevent.spawn(resolved, broker.produce(acks=-1))
    gevent.sleep(0.01)
    seen_at_close = []
    real_close = broker.rm.log_manager.close

    def close(run_each):
        seen_at_close.append(answer.ready())
        real_close(run_each)
    monkeypatch.setattr(broker.rm.log_manager, "close", close)
    broker.rm.shutdown()
    assert seen_at_close == [True]
    assert errors(answer.value) == {p: ErrorCode.NOT_LEADER_FOR_PARTITION for p in PARTITIONS}
    monkeypatch.setattr(broker.rm.log_manager, "close", lambda *_: None)   # closed already
