"""Run the real KafkaController in a unit test: fake store, recording channel, no processes.

``ControllerUnderTest`` builds a ``KafkaController`` on a ``FakeControllerStore``
and hands it a ``RecordingChannel`` for each term.  Nothing runs on its own:
``handle(event)`` dispatches one event through the controller's own event loop
code, then every event the watches queued meanwhile (``run_pending``), all on
the test's greenlet.  So a test reads as a sequence of cluster changes, each
followed by the controller's complete reaction.

``FakeBrokers`` plays the brokers' part in ZooKeeper: each registers in a
session of its own, so a kill (session closed) removes its registration and a
bounce re-registers it with a new czxid.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kafka_ha.config import BrokerConfig
from kafka_ha.controller import events as ev
from kafka_ha.controller.controller import KafkaController
from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.partition_states import from_wire
from tests.harness.fake_controller_store import (FakeControllerStore, prepare_namespace,
                                                 read_state, register_broker, write_topic)
from tests.harness.fake_zookeeper import FakeZkClient, FakeZooKeeper

MAX_EVENTS_PER_STEP = 1000  # more means the controller and its watches feed each other


@dataclass
class Request:
    broker_id: int
    api_key: int
    body: dict
    callback: Callable | None
    answered: bool = False


class RecordingChannel:
    """The controller's channel to the brokers, recording each request instead of sending it.

    LeaderAndIsr and UpdateMetadata are answered at once with no error, as a
    healthy broker does; StopReplica waits for ``answer_stop_replicas`` (topic
    deletion moves on with those answers).  Like the real channel, it sends
    only to the brokers it was last given, and nothing once stopped.
    """

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.requests: list[Request] = []
        self.stopped = False

    def set_brokers(self, brokers: dict[int, BrokerInfo]) -> None:
        self.brokers = dict(brokers)

    def send(self, broker_id: int, api_key: int, version: int, body: dict,
             callback: Callable | None = None) -> bool:
        if self.stopped or broker_id not in self.brokers:
            return False
        request = Request(broker_id, api_key, body, callback)
        self.requests.append(request)
        if api_key != ApiKey.STOP_REPLICA:
            self._answer(request, {"error_code": ErrorCode.NONE})
        return True

    def stop(self) -> None:
        self.stopped = True
        self.brokers = {}

    def answer_stop_replicas(self, error_code: int = ErrorCode.NONE) -> int:
        """Answer every unanswered StopReplica; returns how many."""
        waiting = [r for r in self.requests if r.api_key == ApiKey.STOP_REPLICA and not r.answered]
        for request in waiting:
            self._answer(request, {"error_code": error_code, "partition_errors": [
                {**p, "error_code": error_code} for p in request.body["partitions"]]})
        return len(waiting)

    @staticmethod
    def _answer(request: Request, response: dict) -> None:
        request.answered = True
        if request.callback is not None:
            request.callback(request.broker_id, response)

    def sent(self, api_key: int, broker_id: int | None = None) -> list[Request]:
        return [r for r in self.requests
                if r.api_key == api_key and broker_id in (None, r.broker_id)]

    def leader_and_isr(self, broker_id: int) -> dict[TopicPartition, Any]:
        """The last LeaderAndIsr state sent to ``broker_id`` for each partition."""
        states = {}
        for request in self.sent(ApiKey.LEADER_AND_ISR, broker_id):
            for entry in request.body["partition_states"]:
                state = from_wire(entry)
                states[state.tp] = state
        return states

    def clear(self) -> None:
        self.requests.clear()


class FakeBrokers:
    """Broker registrations in ``/brokers/ids``, one ZooKeeper session each."""

    def __init__(self, zk: FakeZooKeeper) -> None:
        self.zk = zk
        self.sessions: dict[int, FakeZkClient] = {}

    def start(self, *broker_ids: int) -> None:
        for broker_id in broker_ids:
            session = self.zk.client()
            register_broker(session, broker_id)
            self.sessions[broker_id] = session

    def kill(self, *broker_ids: int) -> None:
        for broker_id in broker_ids:
            self.sessions.pop(broker_id).close()

    def bounce(self, broker_id: int) -> None:
        """Gone and back before the controller looks again: the registration's czxid changes."""
        self.kill(broker_id)
        self.start(broker_id)


class ControllerUnderTest:
    """Broker ``broker_id``'s controller on a fake store (see the module docstring)."""

    def __init__(self, zk: FakeZooKeeper, broker_id: int = 1,
                 config: dict[str, Any] | None = None) -> None:
        self.zk = zk
        self.session = zk.client()
        self.store = FakeControllerStore(self.session, broker_id)
        self.channels: list[RecordingChannel] = []
        self.stopped = False
        # No rebalance timer: it would queue events on its own clock.
        values = {"broker.id": broker_id, "zookeeper.connect": "fake:2181",
                  "auto.leader.rebalance.enable": False, **(config or {})}
        self.controller = KafkaController(
            BrokerConfig(values), self.store, lambda: register_broker(self.session, broker_id),
            new_channel=self._new_channel)

    def _new_channel(self) -> RecordingChannel:
        self.channels.append(RecordingChannel())
        return self.channels[-1]

    @property
    def channel(self) -> RecordingChannel:
        """This term's channel (the last one made)."""
        return self.channels[-1]

    @property
    def term(self):
        """The controller's current term (None while it is not the controller)."""
        return self.controller.term

    @property
    def ctx(self):
        """The current term's view of the cluster."""
        return self.controller.term.ctx

    def start(self) -> ControllerUnderTest:
        self.handle(ev.Startup())
        return self

    def shutdown(self) -> None:
        """What the broker's shutdown does: a Shutdown event, then the loop stops, so the
        events queued behind it (its own /controller deletion's) are never handled."""
        self.controller.loop.dispatch(ev.Shutdown())
        self.stopped = True

    def handle(self, event: object) -> None:
        """Dispatch ``event``, then everything it and the watches queued."""
        self.controller.loop.dispatch(event)
        self.run_pending()

    def run_pending(self) -> int:
        """Dispatch the queued events (watches queue them) until none is left."""
        queue = self.controller.loop._queue
        handled = 0
        while not queue.empty() and not self.stopped:
            handled += 1
            assert handled <= MAX_EVENTS_PER_STEP, "the controller's events never settle"
            self.controller.loop.dispatch(queue.get_nowait())
        return handled


def new_cluster(brokers: tuple[int, ...] = (1, 2, 3),
                topics: dict[str, dict[int, tuple[int, ...]]] | None = None,
                config: dict[str, Any] | None = None
                ) -> tuple[FakeZooKeeper, FakeBrokers, ControllerUnderTest]:
    """A namespace with ``topics`` and registered ``brokers``, and broker 1's controller
    started (it registers broker 1 itself, so 1 need not be in ``brokers``)."""
    zk = FakeZooKeeper()
    admin = zk.client()
    prepare_namespace(admin)
    for topic, partitions in (topics or {}).items():
        write_topic(admin, topic, partitions)
    cluster = FakeBrokers(zk)
    cluster.start(*(b for b in brokers if b != 1))
    controller = ControllerUnderTest(zk, 1, config).start()
    return zk, cluster, controller


def states(zk: FakeZooKeeper, topic: str, partitions) -> dict[int, LeaderAndIsr | None]:
    """The stored state of each partition (None where there is none)."""
    client = zk.client()
    return {p: read_state(client, TopicPartition(topic, p)) for p in partitions}
