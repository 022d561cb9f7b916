"""Conditional state writes that keep meeting conflicts
(kafka_ha/controller/partition_state_machine.py), on the fake store."""

import logging

import pytest

from kafka_ha.controller import partition_state_machine
from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.zk import znodes as zn
from tests.harness.controller_driver import new_cluster, states
from tests.harness.fake_controller_store import write_state

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


def test_a_state_found_malformed_after_a_conflict_is_skipped_and_the_rest_written(caplog):
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2, 3), 1: (1, 2, 3)}})
    zk.client().set(zn.TopicPartitionStateZNode.path(*TP), b"garbage")  # behind its back
    brokers.kill(3)
    controller.run_pending()
    assert controller.ctx.unusable == {TP} and TP not in controller.ctx.states
    assert states(zk, "t", [1])[1].isr == (1, 2)
    assert "Skipping partition [t,0]: its state znode is unusable" in caplog.text


def test_a_state_that_disappears_is_skipped(caplog):
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2, 3)}})
    zk.client().delete(zn.TopicPartitionStateZNode.path(*TP))
    brokers.kill(3)
    controller.run_pending()
    assert TP not in controller.ctx.states
    assert "State znode of partition [t,0] disappeared" in caplog.text


def test_a_state_written_by_a_newer_controller_deposes_this_one():
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (1, 2, 3)}})
    write_state(zk.client(), TP, LeaderAndIsr(2, 4, (2, 3), 9))
    brokers.kill(3)
    controller.run_pending()
    assert not controller.controller.active
    assert states(zk, "t", [0])[0].controller_epoch == 9, "nothing written over it"
