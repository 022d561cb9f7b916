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


def test_a_group_consumer_uses_the_kafka_2_1_versions(cluster_factory):
    """librdkafka picks the versions now advertised (Fetch v10, Metadata v7 with leader epochs,
    OffsetCommit v6 / OffsetFetch v5 with the committed leader epoch) and a group consumes,
    commits and resumes from its commit with them."""
    import logging
    import re
    cluster = cluster_factory(1, overrides={"offsets.topic.replication.factor": 1},
                              session_timeout_ms=SESSION_MS)
    create_topic(cluster, "v21", 1, 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})

    def produce(values):
        for v in values:
            producer.produce("v21", v)
        assert producer.flush(30) == 0

    sent: list[str] = []

    class Sent(logging.Handler):
        def emit(self, record):
            found = re.search(r"Sent (\w+)Request \(v(\d+)", record.getMessage())
            if found:
                sent.append(f"{found.group(1)} v{found.group(2)}")
    logger = logging.getLogger("test.librdkafka.protocol")
    logger.addHandler(Sent())
    logger.setLevel(logging.DEBUG)

    def read(expected):
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "v21",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "debug": "protocol"}, logger=logger)
        consumer.subscribe(["v21"])
        got, deadline = [], time.monotonic() + 60
        try:
            while len(got) < len(expected):
                assert time.monotonic() < deadline, f"read {len(got)} of {len(expected)}"
                m = consumer.poll(1)
                if m is not None and m.error() is None:
                    got.append(m.value())
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        return got

    produce([b"a%d" % i for i in range(10)])
    assert read([b"a%d" % i for i in range(10)]) == [b"a%d" % i for i in range(10)]
    produce([b"b%d" % i for i in range(5)])
    assert read(range(5)) == [b"b%d" % i for i in range(5)], "resumes from the commit"
    for used in ("Fetch v10", "Metadata v7", "OffsetCommit v6", "OffsetFetch v5", "JoinGroup v3"):
        assert used in sent, (used, sorted(set(sent)))
