"""Unmodified confluent-kafka (librdkafka, from PyPI) against real broker processes.

librdkafka sends one partition per Produce request and keeps many requests in flight
on one connection, so these tests exercise the broker's pipelined acks=all path
(``protocol/deferred.py``): each request is appended when it is read, and answers
leave in request order.
"""
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test dependency")

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from tests.harness.cluster import SESSION_MS  # noqa: E402
from tests.harness.kafka import create_topic  # noqa: E402

pytestmark = pytest.mark.system


def consume_all(cluster, topic: str, partitions: int, expected: int, timeout_s: float = 60) -> list:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(records) < expected:
            assert time.monotonic() < deadline, f"consumed {len(records)} of {expected}"
            for m in consumer.consume(1000, timeout=1):
                if m.error() is None:
                    records.append(m)
    finally:
        consumer.close()
    return records


def test_pipelined_acks_all_requests_keep_each_partitions_order(cluster_factory):
    """Thousands of acks=all requests in flight over 12 partitions: every record is
    acknowledged once, and each partition holds its records in the order they were sent
    (an answer or an append overtaking an earlier one would break it)."""
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "ck", 12, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "linger.ms": 0, "batch.num.messages": 5, "retries": 0})
    acked, failed = [], []

    def delivered(err, msg):
        (failed if err is not None else acked).append((msg.partition(), msg.offset(), msg.value()))

    n = 6000
    for i in range(n):
        producer.produce("ck", value=b"%06d" % i, partition=i % 12, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failed, failed[:3]
    assert len(acked) == n and len({(p, o) for p, o, _ in acked}) == n
    records = consume_all(cluster, "ck", 12, n)
    by_partition: dict[int, list] = {}
    for m in records:
        by_partition.setdefault(m.partition(), []).append((m.offset(), int(m.value())))
    for p, entries in by_partition.items():
        offsets = [o for o, _ in entries]
        values = [v for _, v in entries]
        assert offsets == list(range(len(entries))), f"partition {p} has gaps"
        assert values == sorted(values), f"partition {p} holds records out of send order"
        assert values == list(range(p, n, 12))
    # Metadata v2+ carries the cluster id the first broker wrote to /cluster/id.
    from kafka_ha.zk.znodes import ClusterIdZNode
    cluster_id = ClusterIdZNode.decode(cluster.zk.get("/cluster/id")[0])
    assert producer.list_topics(timeout=30).cluster_id == cluster_id
