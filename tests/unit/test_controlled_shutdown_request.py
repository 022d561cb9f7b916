"""The stopping broker's side of controlled shutdown (kafka_ha/broker/controlled_shutdown.py):
what it sends, and what it makes of the controller's answers."""
from __future__ import annotations

import logging

import pytest

from kafka_ha.broker import controlled_shutdown as cs
from kafka_ha.model import BrokerEndpoint
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode


class RecordingConnection:
    """Stands in for BrokerConnection: records each request, answers from a script."""
    sent: list[tuple[int, int, dict]] = []
    answers: list[dict] = []

    def __init__(self, host, port, client_id, timeout_s) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def request(self, api_key: int, version: int, body: dict) -> dict:
        RecordingConnection.sent.append((api_key, version, dict(body)))
        return RecordingConnection.answers.pop(0)


@pytest.fixture
def connection(monkeypatch):
    RecordingConnection.sent, RecordingConnection.answers = [], []
    monkeypatch.setattr(cs, "BrokerConnection", RecordingConnection)
    return RecordingConnection


def shut_down(broker_epoch, retries=2):
    return cs.controlled_shutdown(lambda: 1, 2, lambda b: BrokerEndpoint(b, "127.0.0.1", 9092),
                                  broker_epoch, retries, backoff_ms=0, timeout_s=1)


def test_the_request_names_this_brokers_epoch(connection):
    """KIP-380: v2 carries the epoch of the registration this process made, so a controller
    that handles it after a restart of this broker refuses it."""
    connection.answers = [{"error_code": ErrorCode.NONE, "remaining_partitions": []}]
    assert shut_down(0x5A5A) is True
    assert connection.sent == [(ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": 2, "broker_epoch": 0x5A5A})]


def test_a_broker_that_never_registered_names_no_epoch(connection):
    connection.answers = [{"error_code": ErrorCode.NONE, "remaining_partitions": []}]
    assert shut_down(None) is True
    assert connection.sent[0][2]["broker_epoch"] == -1


def test_an_error_answer_is_logged_by_name_and_retried(connection, caplog):
    connection.answers = [{"error_code": ErrorCode.STALE_BROKER_EPOCH, "remaining_partitions": []},
                          {"error_code": ErrorCode.NONE, "remaining_partitions": [
                              {"topic": "t", "partition": 0}]},
                          {"error_code": ErrorCode.NONE, "remaining_partitions": []}]
    with caplog.at_level(logging.WARNING, logger=cs.log.name):
        assert shut_down(7) is True
    lines = [r.getMessage() for r in caplog.records]
    assert "attempt 1: controller 1 answered STALE_BROKER_EPOCH; retrying" in lines[0]
    assert "attempt 2: still leads ['[t,0]']; retrying" in lines[1]
    assert len(connection.sent) == 3
