"""The group benchmark's read-rate part: one confluent-kafka consumer reading a topic
from its start, either assigned every partition or as the only member of a group.
(confluent-kafka is imported here only, so that the rest of the bench does without it.)
"""
from __future__ import annotations

import subprocess
import sys
import time

TIMEOUT_S = 120


def create_topic(zk_connect: str, bootstrap: str, topic: str, partitions: int,
                 replication: int = 3) -> None:
    """Created through kafka-topics.sh (ZooKeeper), then waited for until every partition
    has a leader in the brokers' metadata."""
    from confluent_kafka.admin import AdminClient
    subprocess.run([sys.executable, "-m", "kafka_ha.admin.topics_command", "--zookeeper", zk_connect,
                    "--create", "--topic", topic, "--partitions", str(partitions),
                    "--replication-factor", str(replication)], check=True,
                   stdout=subprocess.DEVNULL)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        meta = admin.list_topics(topic, timeout=10).topics[topic]
        if meta.error is None and len(meta.partitions) == partitions and \
                all(p.leader >= 0 for p in meta.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} has no leaders after {TIMEOUT_S} s")
        time.sleep(0.2)


def produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.num.messages": 5000, "queue.buffering.max.messages": 200000})
    value = b"x" * size
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value, key=b"%d" % i)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(TIMEOUT_S):
        raise TimeoutError(f"records of {topic} not acknowledged after {TIMEOUT_S} s")


def read_all(bootstrap: str, topic: str, partitions: int, count: int, mode: str,
             group: str) -> dict:
    """Read ``count`` records from the start: ``mode`` "assign" or "group"; the rate
    from the assignment (at once for assign(), after the join for a group) to the last
    record, and the times to the assignment and to the first record."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 100})
    # Connections and metadata first, for both: the group's join would otherwise hide
    # them while assign() pays for them in its reading time.
    consumer.list_topics(topic, timeout=30)
    started = time.monotonic()
    assigned: list[float] = []
    if mode == "assign":
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        assigned.append(started)
    else:
        consumer.subscribe([topic], on_assign=lambda c, tps: assigned.append(time.monotonic()))
    seen, total_bytes, first = 0, 0, None
    deadline = started + TIMEOUT_S
    try:
        while seen < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{mode}: read {seen} of {count} records in {TIMEOUT_S} s")
            for message in consumer.consume(num_messages=10000, timeout=0.5):
                if message.error() is not None:
                    continue
                if first is None:
                    first = time.monotonic()
                seen += 1
                total_bytes += len(message.value() or b"")
        last = time.monotonic()
    finally:
        consumer.close()
    # From the assignment on: librdkafka fetches ahead, so the first record's arrival
    # would leave out the reads it had made already.
    reading = max(last - assigned[0], 1e-6)
    return {"mode": mode, "records": seen, "seconds": round(reading, 3),
            "per_second": round(seen / reading, 1),
            "mb_per_second": round(total_bytes / reading / 1e6, 2),
            "assigned_ms": round((assigned[0] - started) * 1000, 1),
            "first_record_ms": round((first - started) * 1000, 1)}
