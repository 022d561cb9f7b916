"""Start-up steps retried while ZooKeeper is unavailable (kafka_ha/broker/startup_retry.py)."""

import logging

import pytest

from kafka_ha.broker.startup_retry import pause_before_retry, until_zookeeper_answers
from kafka_ha.zk.errors import (MalformedZnode, ZkConnectionLost, ZkNoNode, ZkSessionExpired,
                                ZkTimeout)


class FailingStep:
    """Raises each of ``errors`` in turn, then returns ``result``."""

    def __init__(self, errors, result="done"):
        self.errors = list(errors)
        self.result = result
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


def test_unavailable_zookeeper_is_waited_for_with_growing_pauses(caplog):
    step = FailingStep([ZkTimeout("no connection"), ZkConnectionLost(), ZkSessionExpired(),
                        ZkConnectionLost()])
    pauses = []
    with caplog.at_level(logging.WARNING, "kafka_ha.broker.startup_retry"):
        assert until_zookeeper_answers("creating the common paths", step, pauses.append) == "done"
    assert step.calls == 5
    assert pauses == [0.2, 0.4, 0.8, 1.6]
    assert len(caplog.records) == 4
    assert "creating the common paths failed (ConnectionLoss), attempt 2" in caplog.records[1].message


def test_a_step_that_works_at_once_neither_pauses_nor_warns(caplog):
    pauses = []
    with caplog.at_level(logging.WARNING):
        assert until_zookeeper_answers("connecting", FailingStep([]), pauses.append) == "done"
    assert pauses == [] and caplog.records == []


@pytest.mark.parametrize("error", [ZkNoNode(), MalformedZnode("/brokers/ids", "not JSON"),
                                   ValueError("bad config")])
def test_other_errors_end_the_start_up(error):
    step = FailingStep([ZkConnectionLost(), error])
    pauses = []
    with pytest.raises(type(error)):
        until_zookeeper_answers("connecting", step, pauses.append)
    assert step.calls == 2 and pauses == [0.2]


def test_pauses_stop_growing_at_five_seconds():
    assert pause_before_retry(6) == pause_before_retry(10_000) == 5.0
