"""Conditional state writes that keep meeting conflicts
(kafka_ha/controller/partition_state_machine.py), on the fake store."""

import logging

import pytest

from kafka_ha.controller import partition_state_machine
from kafka_ha.model import TopicPartition
from kafka_ha.zk import znodes as zn
from tests.harness.controller_driver import new_cluster, states

TP = TopicPartition("t", 0)


@pytest.fixture
def sleeps(monkeypatch):
    """The back-off delays the state machine asks for (recorded, not slept)."""
    asked = []
    monkeypatch.setattr(partition_state_machine, "sleep", asked.append, raising=False)
    return asked


def test_a_state_that_conflicts_more_than_ten_times_is_still_written(sleeps, caplog):
    """Defect 14: re-read and go on, with a growing back-off, until the write lands."""
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2, 3), 1: (1, 3)}})
    zk.interfere(zn.TopicPartitionStateZNode.path(*TP), times=14)
    with caplog.at_level(logging.INFO, logger="kafka_ha.controller"):
        brokers.kill(2)
        controller.run_pending()
    state = states(zk, "t", [0])[0]
    assert (state.leader, state.isr) == (1, (1, 3)), "the dead broker must leave the ISR"
    assert controller.ctx.states[TP] == state
    conflict_lines = [r for r in caplog.records if "changed underneath" in r.getMessage()]
    assert len(conflict_lines) == 14, "every conflict round is logged"
    assert sleeps == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64] + [1.0] * 7
