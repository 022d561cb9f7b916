"""A broker that meets ZooKeeper trouble while it starts waits for ZooKeeper and comes up
once it is back, instead of exiting (issue 23).

A broker that loaded its logs for long on a full restart lost its ZooKeeper session, and
died with ConnectionLoss in the creation of the common paths ("Fatal error during
KafkaServer startup").  As the last in-sync replica of its partitions, it kept them all
offline until someone started it again.  Each test here starts one broker of a running
cluster through a relay to ZooKeeper that the test controls:

- the relay is cut before the broker starts: it cannot connect at all;
- the relay holds the broker's first request for the common paths until its session has
  expired: the request fails with ConnectionLoss, as in the issue.

Then ZooKeeper is made reachable again, and the broker must register, rejoin the ISRs and
serve its partitions.
"""

import signal
import time

import pytest

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.tools.processes import HOST
from tests.harness.cluster import SESSION_MS
from tests.harness.kafka import create_topic, log_text, read_states
from tests.harness.tcp_proxy import TcpProxy
from tests.harness.zk_gate import ZkRequestGate

pytestmark = pytest.mark.system
TOPIC, PARTITIONS = "startup", 6
CONNECTION_TIMEOUT_MS = 2000      # how long one attempt to connect to ZooKeeper waits
EXISTS = 3                        # ZooKeeper's opcode of exists(), the first request of ensure_path
EXPIRY_S = SESSION_MS / 1000 + 2  # the ensemble has expired a session that was silent this long


def serves_all_partitions(cluster, broker):
    """Whether ``broker`` answers Metadata with every partition of TOPIC led."""
    with BrokerConnection(HOST, cluster.port(broker), "startup-test", 5.0) as conn:
        answer = conn.request(ApiKey.METADATA, 0, {"topics": [TOPIC]})
    topics = [t for t in answer["topics"] if t["name"] == TOPIC
              and t["error_code"] != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    return bool(topics) and len(topics[0]["partitions"]) == PARTITIONS and \
        all(p["leader_id"] >= 0 for p in topics[0]["partitions"])


def stopped_broker_behind(cluster_factory, relay_class):
    """A running 3-broker cluster with TOPIC (RF 3), one broker of which is stopped and set
    to reach ZooKeeper through a new ``relay_class`` relay from its next start:
    ``(cluster, broker, relay)``."""
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, TOPIC, PARTITIONS, 3)
    broker = max(set(cluster.broker_ids) - {cluster.controller()})
    cluster.wait_until(lambda: all(broker in s.isr for s in read_states(cluster, TOPIC).values()),
                       message=f"broker {broker} not in every ISR")
    cluster.kill(broker, signal.SIGTERM)
    cluster.wait_deregistered(broker)
    relay = relay_class(cluster.zk_servers)
    cluster.connect_broker_through(broker, relay.connect_string)
    cluster.set_broker_config(broker, {"zookeeper.connection.timeout.ms": CONNECTION_TIMEOUT_MS})
    return cluster, broker, relay


def assert_comes_back(cluster, broker):
    """``broker`` is alive, said it waits for ZooKeeper, registers, rejoins every ISR and
    serves every partition."""
    text = log_text(cluster, broker, "server.log")
    assert cluster.broker_alive(broker), (
        f"broker {broker} exited ({cluster.exit_status(broker)}) while ZooKeeper was away:\n"
        + text[-3000:])
    assert "Start-up is waiting for ZooKeeper" in text, text[-3000:]
    cluster.wait_registered([broker], timeout=60)
    cluster.wait_until(lambda: all(broker in s.isr for s in read_states(cluster, TOPIC).values()),
                       timeout=60, message=f"broker {broker} did not rejoin the ISRs")
    cluster.wait_until(lambda: serves_all_partitions(cluster, broker), timeout=60, interval=0.1,
                       message=f"broker {broker} does not serve {TOPIC}")
    assert cluster.broker_alive(broker)


def test_broker_started_while_zookeeper_is_unreachable_waits_for_it_and_stops_while_it_is(cluster_factory):
    cluster, broker, relay = stopped_broker_behind(cluster_factory, TcpProxy)
    with relay:
        relay.cut()
        cluster.start_broker(broker, wait=False)
        # Several connection timeouts: the broker of the issue gave up after the first.
        # (Waited for in the log, not slept: a loaded machine starts a broker slowly.)
        cluster.wait_until(lambda: ", attempt 3; trying again" in log_text(cluster, broker, "server.log"),
                           timeout=120, message=f"broker {broker} did not try ZooKeeper three times")
        assert cluster.broker_alive(broker), (
            f"broker {broker} exited ({cluster.exit_status(broker)}) while ZooKeeper was "
            "unreachable:\n" + log_text(cluster, broker, "server.log")[-3000:])
        relay.heal()
        assert_comes_back(cluster, broker)
        # SIGTERM while ZooKeeper is unreachable: the controlled shutdown finds the controller
        # in the metadata cache, as Kafka's does, so the broker stops.  (It read /controller
        # and waited for ZooKeeper to come back, for ever.)
        relay.cut()
        time.sleep(1)
        try:
            cluster.kill(broker, signal.SIGTERM)     # waits (up to 30 s) until the process is gone
        except Exception:
            print(log_text(cluster, broker, "server.log")[-4000:])
            raise
        assert "Controlled shutdown of broker %d succeeded" % broker in log_text(cluster, broker, "server.log")


def test_connection_loss_while_creating_the_common_paths_is_retried(cluster_factory):
    cluster, broker, gate = stopped_broker_behind(cluster_factory, ZkRequestGate)
    with gate:
        # Hold the broker's first request for the common paths (and all it sends after it,
        # pings too): its connection times out, and its session expires meanwhile.
        gate.arm(b"/consumers", opcodes=(EXISTS,), passing=0)
        cluster.start_broker(broker, wait=False)
        assert gate.held.wait(60), f"broker {broker} never asked for the common paths"
        time.sleep(EXPIRY_S)
        assert cluster.broker_alive(broker), (
            f"broker {broker} exited ({cluster.exit_status(broker)}) after a connection loss "
            "while creating the common paths:\n" + log_text(cluster, broker, "server.log")[-3000:])
        gate.release()
        assert_comes_back(cluster, broker)

