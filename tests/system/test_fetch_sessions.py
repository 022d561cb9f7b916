"""Fetch sessions between real broker processes: idle partitions stay in sync.

With incremental fetch sessions a follower's fetch names only the partitions
whose position moved, so an idle partition is not in the requests at all.  The
leader must still count it as fetched: if it did not, the follower would look
stuck and leave the ISR after replica.lag.time.max.ms.  Here one partition of
six takes acks=all traffic for several lag periods while the others idle; no
ISR may change (the state znodes keep their versions), and the HW must follow
the busy partition (a consumer reads everything acknowledged).
"""

import time

import pytest

from kafka_ha.client.consumer import Consumer
from kafka_ha.client.producer import Producer
from kafka_ha.zk import znodes as zn
from tests.harness.kafka import create_topic, read_states, run_tool

pytestmark = pytest.mark.system
LAG_MS = 1500


def state_versions(cluster, topic, partitions):
    return [cluster.zk.get(zn.TopicPartitionStateZNode.path(topic, p))[1].version for p in range(partitions)]


def test_idle_partitions_stay_in_the_isr_and_the_busy_one_commits(cluster_factory):
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": LAG_MS})
    create_topic(cluster, "sessions", 6, 3)
    cluster.wait_until(lambda: all(len(s.isr) == 3 for s in read_states(cluster, "sessions").values())
                       and len(read_states(cluster, "sessions")) == 6, timeout=60,
                       message="ISRs never became full")
    before = state_versions(cluster, "sessions", 6)

    producer = Producer(cluster.bootstrap_servers, acks="all", linger_ms=0)
    acknowledged = []
    deadline = time.monotonic() + 4 * LAG_MS / 1000
    i = 0
    while time.monotonic() < deadline:
        acknowledged.append(producer.send("sessions", b"m%d" % i, partition=0).get(timeout=30).offset)
        i += 1
        time.sleep(0.02)
    producer.close()

    assert state_versions(cluster, "sessions", 6) == before, "an ISR changed while partitions idled"
    assert acknowledged == list(range(len(acknowledged)))
    consumer = Consumer(cluster.bootstrap_servers)
    consumer.assign([("sessions", 0)])
    consumer.seek_to_beginning(("sessions", 0))
    got = []
    end = time.monotonic() + 30
    while len(got) < len(acknowledged) and time.monotonic() < end:
        got.extend(r.value for r in consumer.poll(500))
    consumer.close()
    assert got == [b"m%d" % n for n in range(len(acknowledged))]
    rc, out, err = run_tool("kafka-replica-verification.sh", "--broker-list", cluster.bootstrap_servers,
                            "--topic-white-list", "sessions", "--time", "-2", "--once", timeout_s=120)
    assert rc == 0, out + err
