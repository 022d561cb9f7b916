"""A follower's position on the leader is what it fetched, never an offset the leader
cannot serve (issue 18, defect 2).

A fetch beyond the leader's LEO is answered OFFSET_OUT_OF_RANGE; the leader used to
record the requested offset as the follower's LEO all the same, so a follower that
had left the ISR was re-admitted, and the high watermark passed records it never
received.  Kafka updates a follower's state only after a read that succeeded.
"""

import time

import pytest

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.tools.processes import HOST
from tests.harness.kafka import create_topic, read_state, wait_isr
from tests.harness.load import produce

pytestmark = pytest.mark.system
TOPIC = "positions"
LAG_MS = 2000
# Much longer than the pause: the stopped follower stays registered (live), so only the
# offset it claims, not its liveness, decides whether it may rejoin the ISR.
LONG_SESSION_MS = 30000
# How long the ISR is watched after the bogus fetch: the buggy leader wrote the
# expansion within milliseconds of answering it.
ISR_WATCH_S = 3.0


def fetch(port, replica_id, offset):
    """One Fetch v3 of TOPIC-0 from ``offset`` as ``replica_id``: (error code, high watermark)."""
    conn = BrokerConnection(HOST, port, "position-test", 10)
    try:
        response = conn.request(ApiKey.FETCH, 3, {
            "replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]})
    finally:
        conn.close()
    entry = response["responses"][0]["partitions"][0]
    return entry["error_code"], entry["high_watermark"]


def test_a_fetch_beyond_the_leo_does_not_readmit_a_stopped_follower(cluster_factory):
    """The outside review's reproduction: a stopped follower leaves the ISR; a Fetch in its
    name far beyond the leader's LEO must neither re-admit it nor commit what it lacks."""
    cluster = cluster_factory(2, {"replica.lag.time.max.ms": LAG_MS}, session_timeout_ms=LONG_SESSION_MS)
    leader = cluster.wait_until(cluster.controller, message="no controller")
    follower = next(b for b in cluster.broker_ids if b != leader)
    create_topic(cluster, TOPIC, 1, 2, "--replica-assignment", f"{leader}:{follower}",
                 "--config", "min.insync.replicas=2")
    wait_isr(cluster, TOPIC, [leader, follower])
    assert produce(cluster, TOPIC, [b"committed"]) == [0]
    held = 1   # the follower's LEO: it has the acknowledged record and nothing more

    cluster.sigstop(follower)
    try:
        cluster.wait_until(lambda: read_state(cluster, TOPIC, 0).isr == (leader,), timeout=20,
                           message="the stopped follower never left the ISR")
        # Below min.insync.replicas the HW stays where the follower left it.
        leo = produce(cluster, TOPIC, [b"leader-only-%d" % i for i in range(5)], acks=1,
                      via=[leader])[-1] + 1
        assert fetch(cluster.port(leader), -1, 0) == (ErrorCode.NONE, held)

        error, hw = fetch(cluster.port(leader), follower, leo + 100)
        assert error == ErrorCode.OFFSET_OUT_OF_RANGE
        assert hw == held, f"the HW passed what follower {follower} holds ({held}): {hw}"
        assert fetch(cluster.port(leader), -1, 0) == (ErrorCode.NONE, held)
        deadline = time.monotonic() + ISR_WATCH_S
        while time.monotonic() < deadline:
            state = read_state(cluster, TOPIC, 0)
            assert state.isr == (leader,), f"follower {follower} was re-admitted: {state}"
            time.sleep(0.1)
    finally:
        cluster.sigcont(follower)

    # Resumed, it fetches for real, catches up and rejoins; then everything commits.
    wait_isr(cluster, TOPIC, [leader, follower])
    cluster.wait_until(lambda: fetch(cluster.port(leader), -1, 0) == (ErrorCode.NONE, leo), timeout=30,
                       message="the HW did not reach the LEO once the follower caught up")
