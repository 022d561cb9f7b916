"""The controller's handling of brokers coming, going, bouncing and shutting down, run on the
fake store (tests/harness/controller_driver.py)."""

from gevent.event import AsyncResult

from kafka_ha.controller import events as ev
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk import admin_znodes as azn
from tests.harness.controller_driver import new_cluster, states
from tests.harness.fake_controller_store import change_isr

TP = TopicPartition("t", 0)


def controlled_shutdown(controller, broker_id):
    reply = AsyncResult()
    controller.handle(ev.ControlledShutdownRequest(broker_id, reply))
    return reply.get(block=False)


def request_preferred_election(zk, *tps):
    zk.client().create(azn.PreferredReplicaElectionZNode.PATH,
                       azn.PreferredReplicaElectionZNode.encode(tps))


def test_a_broker_that_bounces_after_its_controlled_shutdown_can_lead_again():
    """Defect 3: the new incarnation of a broker is not shutting down."""
    zk, brokers, controller = new_cluster((1, 2, 3), {"t": {0: (2, 1, 3)}})
    assert states(zk, "t", [0])[0].leader == 2
    assert controlled_shutdown(controller, 2) == {"error_code": ErrorCode.NONE,
                                                  "remaining_partitions": []}
    moved = states(zk, "t", [0])[0]
    assert moved.leader == 1 and 2 not in moved.isr
    brokers.bounce(2)  # restarted before the controller looked at /brokers/ids again
    controller.run_pending()
    change_isr(zk.client(), TP, (1, 3, 2))  # the restarted broker caught up
    controller.run_pending()
    request_preferred_election(zk, TP)
    controller.run_pending()
    assert states(zk, "t", [0])[0].leader == 2, "the restarted broker must be able to lead"
    assert controller.ctx.shutting_down == set()
