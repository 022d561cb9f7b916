"""The controller shares its broker's event loop: an event that touches thousands of
partitions must let the loop serve requests and ZooKeeper pings between slices of its
per-partition work (deciding, recording, building requests), as the broker's own
LeaderAndIsr does.  At 10k partitions a controlled shutdown or a topic creation held the
controller broker's loop for 0.9-1.1 s in one stretch (measured with the failover bench's
ApiVersions probe).  Run on the fake store; slices of 0 ms make every item a slice,
so whether the loop got a turn does not depend on this machine's speed."""
from __future__ import annotations

import gevent
import pytest
from gevent.event import AsyncResult

from kafka_ha import cooperative
from kafka_ha.controller import events as ev
from tests.harness.controller_driver import new_cluster
from tests.harness.fake_controller_store import write_topic

N = 60


@pytest.fixture
def every_item_a_slice(monkeypatch):
    monkeypatch.setattr(cooperative, "SLICE_MS", 0)
    monkeypatch.setattr(cooperative, "CONTROLLER_SLICE_MS", 0)


class LoopTurns:
    """Counts the turns another greenlet gets while the test's greenlet works."""

    def __init__(self) -> None:
        self.turns = 0
        self._greenlet = gevent.spawn(self._run)
        gevent.sleep(0.01)                        # let it start waiting

    def _run(self) -> None:
        while True:
            gevent.sleep(cooperative.YIELD_S)
            self.turns += 1

    def during(self, work) -> int:
        before = self.turns
        work()
        return self.turns - before

    def stop(self) -> None:
        self._greenlet.kill()


def big_cluster():
    assignment = {p: ((1, 2, 3), (2, 3, 1), (3, 1, 2))[p % 3] for p in range(N)}
    return new_cluster((1, 2, 3), {"t": assignment})


def test_a_controlled_shutdown_of_many_partitions_lets_the_loop_turn(every_item_a_slice):
    _, _, controller = big_cluster()
    turns = LoopTurns()
    reply = AsyncResult()
    ran = turns.during(lambda: controller.handle(ev.ControlledShutdownRequest(2, reply)))
    turns.stop()
    assert reply.get(block=False)["remaining_partitions"] == []
    assert ran >= N, f"the loop turned {ran} times while {N} partitions were moved"


def test_a_broker_failure_of_many_partitions_lets_the_loop_turn(every_item_a_slice):
    _, brokers, controller = big_cluster()
    turns = LoopTurns()
    brokers.kill(2)
    ran = turns.during(controller.run_pending)
    turns.stop()
    assert ran >= N, f"the loop turned {ran} times while {N} partitions were re-elected"


def test_creating_many_partitions_lets_the_loop_turn(every_item_a_slice):
    zk, _, controller = new_cluster((1, 2, 3))
    turns = LoopTurns()
    write_topic(zk.client(), "new", {p: (1, 2, 3) for p in range(N)})
    ran = turns.during(controller.run_pending)
    turns.stop()
    assert ran >= N, f"the loop turned {ran} times while {N} partitions were created"
