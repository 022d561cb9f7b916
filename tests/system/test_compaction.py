"""Log compaction on real brokers with unmodified kafka-python: many updates over few keys
compact down; a reader from offset 0 sees the last value of every key at the offset the
producer was given; deleted keys go after delete.retention.ms; the follower compacts its
own copy."""

import time

import pytest

kafka = pytest.importorskip("kafka", reason="kafka-python is a test dependency")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

from kafka_ha.log.checkpoints import OffsetCheckpointFile  # noqa: E402
from kafka_ha.model import TopicPartition as TP  # noqa: E402
from tests.harness.kafka import create_topic, wait_isr  # noqa: E402
from kafka_ha.records import decode_records  # noqa: E402
from tests.harness.replica_files import partition_dir, segment_bytes  # noqa: E402

pytestmark = pytest.mark.system

LEADER, FOLLOWER = 1, 2
TOPIC = "compacted"
KEYS = 100
OVERRIDES = {"log.cleaner.backoff.ms": 300}
TOPIC_CONFIG = ["--config", "cleanup.policy=compact", "--config", "segment.bytes=20000",
                "--config", "min.cleanable.dirty.ratio=0.01", "--config", "delete.retention.ms=2000"]


def send(cluster, pairs):
    """Produce ``(key, value)`` pairs; returns ``{(key, value): offset}``."""
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5,
                      request_timeout_ms=15000, max_block_ms=30000)
    futures = [((k, v), p.send(TOPIC, key=k, value=v, partition=0)) for k, v in pairs]
    p.flush()
    offsets = {kv: f.get(timeout=30).offset for kv, f in futures}
    p.close()
    return offsets


def read_from_zero(cluster):
    """``[(offset, key, value)]`` of the partition, from offset 0 to its end."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                             fetch_max_wait_ms=200)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    end = consumer.end_offsets([tp])[tp]
    out = []
    deadline = time.monotonic() + 60
    while consumer.position(tp) < end:
        assert time.monotonic() < deadline, f"consumer stuck below the end offset {end}"
        for records in consumer.poll(timeout_ms=1000).values():
            out.extend((r.offset, r.key, r.value) for r in records)
    consumer.close()
    return out


def updates(rounds, keys):
    return [(b"key-%03d" % k, b"round-%04d-of-key-%03d" % (r, k)) for r in range(rounds) for k in keys]


def log_bytes(cluster, broker):
    return sum(f.stat().st_size for f in partition_dir(cluster, broker, TOPIC).glob("*.log"))


def test_a_compacted_topic_keeps_the_last_value_of_every_key_at_its_offset(cluster_factory):
    cluster = cluster_factory(2, overrides=OVERRIDES)
    create_topic(cluster, TOPIC, 1, 2, "--replica-assignment", f"{LEADER}:{FOLLOWER}", *TOPIC_CONFIG)
    wait_isr(cluster, TOPIC, {LEADER, FOLLOWER})
    offsets = send(cluster, updates(100, range(KEYS)))               # 10,000 updates over 100 keys
    deleted = [b"key-%03d" % k for k in range(10)]
    offsets.update(send(cluster, [(k, None) for k in deleted]))
    offsets.update(send(cluster, updates(20, range(10, KEYS))))
    last = {}
    for (key, value), offset in sorted(offsets.items(), key=lambda item: item[1]):
        last[key] = (offset, value)
    # What the updates' keys and values alone take (the cleaner may be at work already, so
    # the files' size now would not do); the compacted log holds a fraction of it.
    sent_bytes = sum(len(key) + len(value or b"") for key, value in offsets)

    def compacted():
        records = read_from_zero(cluster)
        return len(records) < 2500 and records
    records = cluster.wait_until(compacted, timeout=90, message="the topic was not compacted")
    seen = {}
    for offset, key, value in records:
        assert offsets[(key, value)] == offset, "a record moved to another offset"
        seen[key] = (offset, value)
    live = {key: v for key, v in last.items() if key not in deleted}
    assert {key: v for key, v in seen.items() if key not in deleted} == live
    assert all(seen.get(key, (None, None))[1] is None for key in deleted), "a deleted key came back"

    # The tombstones go once a later pass cleans past them, delete.retention.ms after.
    def tombstones_gone():
        send(cluster, updates(5, range(10, KEYS)))                   # new dirty data for the next pass
        return not [r for r in read_from_zero(cluster) if r[1] in deleted]
    cluster.wait_until(tombstones_gone, timeout=90, message="the tombstones were never removed")

    # The follower compacted its own copy below its own high watermark, and says how far.
    cluster.wait_until(lambda: log_bytes(cluster, FOLLOWER) < sent_bytes / 3, timeout=60,
                       message="the follower did not compact its log")
    checkpoint = cluster.data_dir(FOLLOWER) / "cleaner-offset-checkpoint"
    assert OffsetCheckpointFile(str(checkpoint)).read().get(TP(TOPIC, 0), 0) > 0
    assert log_bytes(cluster, LEADER) < sent_bytes / 3


def test_a_kill_during_a_throttled_cleaning_leaves_a_log_that_loads(cluster_factory):
    """log.cleaner.io.max.bytes.per.second slows the pass down enough to kill -9 the broker
    while a cleaned copy is being written; the restarted broker removes it, serves every
    record at its offset, and compacts the log in a later pass."""
    cluster = cluster_factory(1, overrides={"log.cleaner.backoff.ms": 300,
                                            "log.cleaner.io.max.bytes.per.second": 100000})
    create_topic(cluster, TOPIC, 1, 1, *TOPIC_CONFIG)
    offsets = send(cluster, updates(100, range(KEYS)))
    before = read_from_zero(cluster)
    directory = partition_dir(cluster, 1, TOPIC)
    cluster.wait_until(lambda: list(directory.glob("*.cleaned")), timeout=60, interval=0.05,
                       message="no cleaned copy was ever being written")
    cluster.kill(1)
    assert list(directory.glob("*.cleaned")), "killed while a copy was being written"
    cluster.set_broker_config(1, {"log.cleaner.io.max.bytes.per.second": 10**9})
    cluster.start_broker(1)
    assert not list(directory.glob("*.cleaned")) and not list(directory.glob("*.swap"))
    after = read_from_zero(cluster)
    assert all(offsets[(key, value)] == offset for offset, key, value in after)
    assert after[-1] == before[-1] and {r[1]: r[2] for r in after} == {r[1]: r[2] for r in before}
    cluster.wait_until(lambda: len(read_from_zero(cluster)) < 2500, timeout=90,
                       message="the restarted broker did not compact the log")


def test_a_follower_that_was_down_catches_up_across_the_compacted_gaps(cluster_factory):
    cluster = cluster_factory(2, overrides={**OVERRIDES, "replica.lag.time.max.ms": 2000})
    create_topic(cluster, TOPIC, 1, 2, "--replica-assignment", f"{LEADER}:{FOLLOWER}", *TOPIC_CONFIG)
    wait_isr(cluster, TOPIC, {LEADER, FOLLOWER})
    send(cluster, updates(5, range(KEYS)))
    cluster.kill(FOLLOWER)
    wait_isr(cluster, TOPIC, {LEADER})                               # the HW moves without it
    offsets = send(cluster, updates(100, range(KEYS)))
    compacted = cluster.wait_until(lambda: (lambda r: len(r) < 2500 and r)(read_from_zero(cluster)),
                                   timeout=90, message="the leader did not compact")
    assert all(offsets.get((k, v), o) == o for o, k, v in compacted)
    cluster.start_broker(FOLLOWER)
    wait_isr(cluster, TOPIC, {LEADER, FOLLOWER})
    on_disk = [(r.offset, r.key, r.value) for r in decode_records(segment_bytes(cluster, FOLLOWER, TOPIC))]
    latest_on_disk = {}
    for offset, key, value in on_disk:
        latest_on_disk[key] = (offset, value)
    assert latest_on_disk == {key: (offset, value) for offset, key, value in compacted}
    assert on_disk[-1] == compacted[-1]
