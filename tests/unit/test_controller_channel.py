"""The controller's channel to one broker, over loopback: queued requests go out back to back
and come back in order, and a dropped connection sends them all again in order.

At 10k partitions a failover's UpdateMetadata took the broker a while to handle, and the
LeaderAndIsr queued behind it waited for that answer before it was even sent.
"""
from __future__ import annotations

import gevent
import gevent.event
import gevent.queue
import pytest
from gevent.server import StreamServer

from kafka_ha.controller.channel import ControllerChannel
from kafka_ha.model import BrokerInfo
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.framing import decode_request, encode_response
from tests.harness.protocol_samples import api_versions_response
from tests.harness.raw_socket import recv_frame

WAIT_FOR_SECOND_S = 2.0


class HoldingBroker:
    """Answers ApiVersions, but holds its first answer until a second request has arrived
    (or ``WAIT_FOR_SECOND_S`` passed); with ``drop_first_connection`` it closes the first
    connection once it has read two requests, without answering."""

    def __init__(self, drop_first_connection: bool = False) -> None:
        self.events: list[str] = []
        self.connections = 0
        self._drop_first = drop_first_connection
        self._second = gevent.event.Event()
        self.server = StreamServer(("127.0.0.1", 0), self._serve)
        self.server.start()

    @property
    def port(self) -> int:
        return self.server.server_port

    def _serve(self, sock, _address) -> None:
        self.connections += 1
        connection = self.connections
        answers: gevent.queue.Queue = gevent.queue.Queue()
        gevent.spawn(self._answer_in_order, sock, answers, connection)
        seen = 0
        while True:
            try:
                header, _ = decode_request(recv_frame(sock))
            except (EOFError, OSError):
                return
            seen += 1
            self.events.append(f"c{connection} got {header.client_id}#{header.correlation_id}")
            if seen >= 2:
                self._second.set()
                if self._drop_first and connection == 1:
                    sock.close()
                    return
            answers.put(header.correlation_id)

    def _answer_in_order(self, sock, answers, connection: int) -> None:
        """A broker answers a connection's requests in order; the first waits for a second."""
        first = True
        while True:
            correlation_id = answers.get()
            if first:
                self._second.wait(WAIT_FOR_SECOND_S)
                first = False
            self.events.append(f"c{connection} answered #{correlation_id}")
            try:
                sock.sendall(encode_response(correlation_id, ApiKey.API_VERSIONS, 0,
                                             api_versions_response(0)))
            except OSError:
                return

    def stop(self) -> None:
        self.server.stop(timeout=0.2)


@pytest.fixture
def channel():
    ch = ControllerChannel(controller_id=9, timeout_s=5)
    yield ch
    ch.stop()


def send_two(channel: ControllerChannel, broker: HoldingBroker) -> list[int]:
    channel.set_brokers({1: BrokerInfo(1, "127.0.0.1", broker.port)})
    answered = []
    done = gevent.event.Event()

    def callback(n):
        def on_answer(_broker_id, response):
            assert response["error_code"] == 0
            answered.append(n)
            if len(answered) == 2:
                done.set()
        return on_answer
    for n in (1, 2):
        assert channel.send(1, ApiKey.API_VERSIONS, 0, {}, callback(n))
    assert done.wait(10), broker.events
    return answered


def test_queued_requests_go_out_before_the_first_answer(channel):
    broker = HoldingBroker()
    try:
        answered = send_two(channel, broker)
    finally:
        broker.stop()
    assert answered == [1, 2]
    # one at a time, the broker would have answered the first after waiting in vain
    assert broker.events[:3] == ["c1 got controller-9#0", "c1 got controller-9#1", "c1 answered #0"]


def test_requests_lost_with_a_connection_go_again_in_order(channel):
    broker = HoldingBroker(drop_first_connection=True)
    try:
        answered = send_two(channel, broker)
    finally:
        broker.stop()
    assert answered == [1, 2]
    assert broker.connections == 2
    second = [e for e in broker.events if e.startswith("c2 got")]
    assert second == ["c2 got controller-9#0", "c2 got controller-9#1"]
