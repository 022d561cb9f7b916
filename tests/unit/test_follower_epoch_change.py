"""A follower told of a new leader epoch: when it truncates again, and when it fetches on.

Kafka's rule since 2.1 (KAFKA-7164): a LeaderAndIsr that keeps the leader and moves the
epoch by exactly one (an ISR shrink by the controller: a follower died or is shutting
down) leaves the follower fetching where it is; any other change (a new leader, or an
epoch this broker skipped) starts a new truncation round.  At 10,000 partitions over 3
brokers a failover bumps every epoch, and two thirds of a survivor's followed partitions
keep their leader: each of those was asked OffsetsForLeaderEpoch again for nothing.

Real logs on disk and the real ReplicaManager; the leader is tests/harness/fake_leader.py.
"""
import pytest

from kafka_ha.broker import replica_fetcher
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from tests.harness.fake_leader import (CONFIG, FOLLOWER, LEADER, FakeLeader, open_log, wait_for,
                                       write)

A = TopicPartition("a", 0)
OTHER = 3


@pytest.fixture
def leader(monkeypatch, tmp_path):
    fake = FakeLeader()
    monkeypatch.setattr(replica_fetcher, "BrokerConnection", fake.connect)
    fake.logs[A] = open_log(tmp_path, LEADER, A)
    write(fake.logs[A], 0, b"v0", b"v1")
    yield fake
    for log in fake.logs.values():
        log.close()


@pytest.fixture
def manager(tmp_path):
    config = BrokerConfig({"broker.id": FOLLOWER, "zookeeper.connect": "127.0.0.1:1"})
    logs = LogManager([str(tmp_path / "broker2")], CONFIG)
    m = ReplicaManager(config, logs, None, lambda topic: 1, lambda topic: CONFIG, lambda broker: None)
    yield m
    m.shutdown()


def leader_and_isr(manager, epoch, leader=LEADER):
    return manager.leader_and_isr({
        "controller_id": 3, "controller_epoch": 1,
        "live_leaders": [{"id": b, "host": "leader.invalid", "port": 9092} for b in (LEADER, OTHER)],
        "partition_states": [{"topic": A.topic, "partition": A.partition, "controller_epoch": 1,
                              "leader": leader, "leader_epoch": epoch, "isr": [LEADER, FOLLOWER],
                              "zk_version": 0, "replicas": [LEADER, FOLLOWER, OTHER]}]}, 7)


def epoch_questions(leader):
    return leader.requests.count(ApiKey.OFFSETS_FOR_LEADER_EPOCH)


def caught_up(manager, leader):
    wait_for(lambda: manager.partitions[A].log.log_end_offset == leader.logs[A].log_end_offset,
             "the follower caught up")


def test_the_same_leader_one_epoch_on_fetches_on_without_asking_again(leader, manager):
    leader_and_isr(manager, 1)
    caught_up(manager, leader)
    asked = epoch_questions(leader)
    leader_and_isr(manager, 2)
    assert manager.partitions[A].leader_epoch == 2
    assert A in manager.fetchers[LEADER].fetching
    write(leader.logs[A], 2, b"v2")
    caught_up(manager, leader)
    assert epoch_questions(leader) == asked, "no new truncation round for an ISR shrink"


@pytest.mark.parametrize("epoch, new_leader", [(3, LEADER), (2, OTHER)],
                         ids=["an epoch skipped", "a new leader"])
def test_a_skipped_epoch_or_a_new_leader_truncates_again(leader, manager, epoch, new_leader):
    leader_and_isr(manager, 1)
    caught_up(manager, leader)
    asked = epoch_questions(leader)
    leader_and_isr(manager, epoch, new_leader)
    fetcher = manager.fetchers[new_leader]
    assert A in fetcher.needs_truncation or epoch_questions(leader) > asked
    wait_for(lambda: epoch_questions(leader) > asked, "a new OffsetsForLeaderEpoch")


def test_a_fetch_fenced_for_the_epoch_it_has_just_left_is_sent_again(leader, manager):
    """The LeaderAndIsr of epoch 2 reached leader and follower while a fetch of epoch 1 was
    out: the leader fences that fetch, and the follower, already in epoch 2, fetches on (it
    must not wait for a LeaderAndIsr that has come already)."""
    leader_and_isr(manager, 1)
    caught_up(manager, leader)

    def during(api_key):
        if api_key == ApiKey.FETCH and manager.partitions[A].leader_epoch == 1:
            leader.fetch_errors[A] = [ErrorCode.FENCED_LEADER_EPOCH]
            leader_and_isr(manager, 2)
    leader.during = during
    write(leader.logs[A], 1, b"v2")
    wait_for(lambda: manager.partitions[A].leader_epoch == 2, "epoch 2 came during a fetch")
    write(leader.logs[A], 2, b"v3")
    caught_up(manager, leader)
    assert A in manager.fetchers[LEADER].fetching
