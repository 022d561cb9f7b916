"""TopicDeletion across controller terms (issue 18, defect 18), driven through a stand-in controller.

The stand-in starts and ends terms the way KafkaController does: a new
ControllerTerm on failover, ended on resignation.  Requests go into a real
RequestBatch and a channel that records them, so the test can answer each
StopReplica when it chooses.
"""
from __future__ import annotations

from kafka_ha.controller import events as ev
from kafka_ha.controller.term import ControllerTerm
from kafka_ha.controller.topic_deletion import TopicDeletion
from kafka_ha.model import BrokerInfo, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk.controller_store import Election

TOPIC = "doomed"
BROKERS = (1, 2, 3)
OK = {"error_code": ErrorCode.NONE, "partition_errors": []}


class RecordingChannel:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, dict, object]] = []

    def send(self, broker_id, api_key, version, body, callback=None) -> bool:
        self.sent.append((broker_id, api_key, body, callback))
        return True

    def stop_replicas(self, epoch: int) -> dict[int, object]:
        """broker -> answer callback of the StopReplica(delete) requests sent in ``epoch``."""
        return {b: cb for b, key, body, cb in self.sent
                if key == ApiKey.STOP_REPLICA and body["delete_partitions"]
                and body["controller_epoch"] == epoch}

    def stop(self) -> None:
        """The term ended; what it recorded stays, for the test to answer late."""


class StandInStore:
    def __init__(self, markers: set[str]) -> None:
        self.markers = set(markers)
        self.deleted_topics: list[str] = []

    def deletion_markers(self, watch=None) -> list[str]:
        return sorted(self.markers)

    def fenced_delete(self, path: str) -> None:
        self.markers.discard(path.rsplit("/", 1)[-1])

    def delete_topic_znodes(self, topic: str) -> None:
        self.deleted_topics.append(topic)
        self.markers.discard(topic)


class StandInController:
    """Terms as in KafkaController: ``failover`` makes a new ControllerTerm, ``resign`` ends it."""

    def __init__(self, store: StandInStore) -> None:
        self.store = store
        self.term: ControllerTerm | None = None
        self.queue: list[object] = []
        self.deletion = TopicDeletion(store, {"delete.topic.enable": True},
                                      lambda: (lambda _event: None),
                                      lambda event: self.queue.append(event))

    @property
    def ctx(self):
        return self.term.ctx

    @property
    def channel(self) -> RecordingChannel:
        return self.term.channel

    def failover(self, epoch: int) -> None:
        self.term = ControllerTerm(1, Election(True, 1, epoch), self.store, RecordingChannel())
        self.ctx.live_brokers = {b: BrokerInfo(b, "127.0.0.1", 9090 + b) for b in BROKERS}
        for p in range(2):
            self.ctx.set_assignment(TopicPartition(TOPIC, p), BROKERS)
        self.deletion.on_markers(self.term)

    def resign(self) -> None:
        self.term.end()
        self.term = None

    def handle_queued_results(self) -> None:
        """The event loop's part: StopReplicaResult events in arrival order."""
        queued, self.queue = self.queue, []
        for event in queued:
            assert isinstance(event, ev.StopReplicaResult)
            self.deletion.on_stop_replica_result(self.term, event)


def test_a_controller_elected_again_restarts_a_deletion_its_previous_term_left_unanswered():
    store = StandInStore({TOPIC})
    c = StandInController(store)
    c.failover(epoch=5)
    first_term = c.channel
    assert set(first_term.stop_replicas(5)) == set(BROKERS)

    c.resign()                      # e.g. its session expired before any broker answered
    c.failover(epoch=7)             # and it won the next election
    second_term = c.channel.stop_replicas(7)
    assert set(second_term) == set(BROKERS), \
        "the re-elected controller sent no StopReplica(delete): the deletion is stalled"

    for broker in BROKERS:
        second_term[broker](broker, OK)
    c.handle_queued_results()
    assert store.deleted_topics == [TOPIC]
    assert TOPIC not in c.ctx.deleting_topics and TOPIC not in c.ctx.topics


def test_answers_to_an_earlier_term_do_not_count_in_the_next():
    store = StandInStore({TOPIC})
    c = StandInController(store)
    c.failover(epoch=5)
    first_term = c.channel.stop_replicas(5)
    c.resign()
    c.failover(epoch=7)
    second_term = c.channel.stop_replicas(7)

    # Answers that the first term's channel had taken in before it stopped reach the
    # event queue after the new term began: they must not finish its deletion.
    for broker in BROKERS:
        first_term[broker](broker, OK)
    c.handle_queued_results()
    assert store.deleted_topics == []
    assert c.term.deletions_waiting[TOPIC] == set(BROKERS)

    for broker in BROKERS:
        second_term[broker](broker, OK)
    c.handle_queued_results()
    assert store.deleted_topics == [TOPIC]


def test_a_broker_that_dies_after_answering_does_not_hold_up_the_deletion():
    store = StandInStore({TOPIC})
    c = StandInController(store)
    c.failover(epoch=5)
    answers = c.channel.stop_replicas(5)
    answers[3](3, OK)
    c.handle_queued_results()
    c.deletion.on_broker_failure(c.term, {3})
    for broker in (1, 2):
        answers[broker](broker, OK)
    c.handle_queued_results()
    assert store.deleted_topics == [TOPIC]


def test_a_broker_that_dies_before_answering_makes_the_deletion_start_again_when_it_returns():
    store = StandInStore({TOPIC})
    c = StandInController(store)
    c.failover(epoch=5)
    answers = c.channel.stop_replicas(5)
    del c.ctx.live_brokers[3]
    c.deletion.on_broker_failure(c.term, {3})
    for broker in (1, 2):
        answers[broker](broker, OK)
    c.handle_queued_results()
    assert store.deleted_topics == []

    c.ctx.live_brokers[3] = BrokerInfo(3, "127.0.0.1", 9093)
    c.channel.sent.clear()
    c.deletion.resume(c.term)
    again = c.channel.stop_replicas(5)
    assert set(again) == set(BROKERS)
    for broker in BROKERS:
        again[broker](broker, OK)
    c.handle_queued_results()
    assert store.deleted_topics == [TOPIC]
