"""How one controller event's requests leave the controller (controller/request_batch.py).

Issue 23 (kill -9 at 10k partitions): the LeaderAndIsr of the second survivor
left 1.7 s after the first's.  The batch built each broker's request (10,000
state-change lines and wire states, in slices that yield to the loop) and
queued it at once, so the controller's own broker was already applying its
request, in slices of its own, while the controller built the next one on the
same loop; the other survivor's followers then waited for their new leaders.
Now every LeaderAndIsr is built before any is queued, and the controller's own
broker's goes last."""
from __future__ import annotations

import gevent

from kafka_ha.controller.request_batch import RequestBatch
from kafka_ha.model import BrokerInfo, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.api import ApiKey

CONTROLLER = 1
N = 3000


class RecordingChannel:
    """Records each request with how often a ticker greenlet had run by then."""

    def __init__(self, ticks: list) -> None:
        self.ticks = ticks
        self.sent: list[tuple[int, int, int]] = []

    def send(self, broker_id, api_key, version, body, callback=None) -> bool:
        self.sent.append((broker_id, api_key, len(self.ticks)))
        if callback is not None:
            callback(broker_id, {"error_code": 0, "partition_errors": []})
        return True


def batch_for_a_failover() -> RequestBatch:
    brokers = {b: BrokerInfo(b, "127.0.0.1", 9090 + b) for b in (1, 3)}
    batch = RequestBatch(CONTROLLER, 2, brokers)
    for p in range(N):
        state = PartitionStateInfo(TopicPartition("t", p), 2, (1, 3)[p % 2], 1, (1, 3), 1, (1, 2, 3))
        batch.add_leader_and_isr([1, 3], state)
    return batch


def test_every_leader_and_isr_is_built_before_any_goes_out_and_the_controllers_own_last():
    ticks: list = []
    ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.0005)) for _ in range(100000)])
    channel = RecordingChannel(ticks)
    batch_for_a_failover().send(channel)
    ticker.kill()
    leader_and_isr = [(b, at) for b, key, at in channel.sent if key == ApiKey.LEADER_AND_ISR]
    assert [b for b, _ in leader_and_isr] == [3, CONTROLLER]
    assert leader_and_isr[0][1] == leader_and_isr[1][1], "queued together, with no yield between"
    assert len(ticks) > 0, "the batch still yields while it builds the requests"
