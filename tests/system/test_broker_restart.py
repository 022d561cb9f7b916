"""A broker killed and started again at once is back in the cluster without waiting out its old session
(issue 18, defect 19).

The new process finds the registration (and, if it was the controller, ``/controller``)
of its killed predecessor, whose ZooKeeper session lives on until it times out.  On
e7bd7e2 it waited for that session to expire: for a whole session timeout it was
unregistered, the controller sent it nothing, and it answered every client with
UNKNOWN_TOPIC_OR_PARTITION.  The session timeout here is long (30 s) and every wait
is bounded by half of it: the waits are generous for what takes about a second, and
still end before the old session could expire.  (The delays measured are printed.)
"""

import time

import pytest

from kafka_ha.client.producer import Producer
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.tools.processes import HOST
from tests.harness.kafka import create_topic, read_states
from tests.harness.load import read_partitions

pytestmark = pytest.mark.system
SESSION_MS = 30000
WAIT_S = SESSION_MS / 1000 / 2
SHARED, OWN = "orders", "own"   # OWN has one partition, on the restarted broker alone


def metadata(cluster, broker, topics):
    """{topic: {partition: leader}} from broker ``broker``'s Metadata answer (topics it knows)."""
    with BrokerConnection(HOST, cluster.port(broker), "restart-test", 5.0) as conn:
        answer = conn.request(ApiKey.METADATA, 0, {"topics": topics})
    return {t["name"]: {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
            for t in answer["topics"] if t["error_code"] != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def produce(bootstrap, values_by_partition, topic):
    producer = Producer(bootstrap, acks=-1, retries=20)
    try:
        futures = [producer.send(topic, v, partition=p) for p, v in values_by_partition.items()]
        return [f.get(timeout=30) for f in futures]
    finally:
        producer.close()


@pytest.mark.parametrize("who", ["a follower", "the controller"])
def test_broker_killed_and_started_at_once_serves_its_topics_before_its_old_session_expires(
        cluster_factory, who):
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    controller = cluster.controller()
    victim = controller if who == "the controller" else max(set(cluster.broker_ids) - {controller})
    create_topic(cluster, SHARED, 6, 3)
    create_topic(cluster, OWN, 1, 1, "--replica-assignment", str(victim))
    produce(cluster.bootstrap_servers, {p: b"before-%d" % p for p in range(6)}, SHARED)
    produce(cluster.bootstrap_servers, {0: b"before"}, OWN)
    old_registration = cluster.zk.exists(f"/brokers/ids/{victim}")

    cluster.kill(victim)
    started = time.monotonic()
    cluster.start_broker(victim)

    def registered_anew():
        stat = cluster.zk.exists(f"/brokers/ids/{victim}")
        return stat is not None and stat.czxid != old_registration.czxid
    cluster.wait_until(registered_anew, timeout=WAIT_S,
                       message=f"broker {victim} did not register before its old session expired")
    registered = time.monotonic()

    def serves_its_topics():
        known = metadata(cluster, victim, [SHARED, OWN])
        return (len(known.get(SHARED, {})) == 6 and known.get(OWN) == {0: victim}
                and all(leader >= 0 for leader in known[SHARED].values()))
    cluster.wait_until(serves_its_topics, timeout=WAIT_S, interval=0.05,
                       message=f"restarted broker {victim} does not answer Metadata with its topics")
    served = time.monotonic()
    print(f"\nbroker {victim} ({who}) killed and started: registered {registered - started:.2f} s "
          f"after its start, Metadata with its topics {served - registered:.2f} s after registering")

    # Its partitions work: it follows (back in every ISR) and leads (its own topic), and a
    # client that knows only this broker can write to all of them.
    cluster.wait_until(lambda: all(victim in s.isr for s in read_states(cluster, SHARED).values()),
                       timeout=WAIT_S, message=f"broker {victim} did not rejoin the ISRs")
    produce(cluster.bootstrap_of([victim]), {p: b"after-%d" % p for p in range(6)}, SHARED)
    produce(cluster.bootstrap_of([victim]), {0: b"after"}, OWN)
    assert sorted(r.value for r in read_partitions(cluster, OWN, 1)) == [b"after", b"before"]
    values = sorted(r.value for r in read_partitions(cluster, SHARED, 6))
    assert values == sorted([b"before-%d" % p for p in range(6)] + [b"after-%d" % p for p in range(6)])
