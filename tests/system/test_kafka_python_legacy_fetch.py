"""Fetch format promises through real broker processes (records/down_convert.py).

The log stores v2 batches only; Fetch v0/v1 readers must get magic 0, v2/v3
magic 1 and v4 the stored magic 2, with the same records.  Checked with the
project's protocol client (raw bytes), and with unmodified kafka-python
pinned to old broker versions, which makes it fetch with v0 and v1.
"""

import time

import pytest

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.records.reader import decode_records
from kafka_ha.records.shallow import iter_entries
from tests.harness.cluster import SESSION_MS
from tests.harness.kafka import create_topic, read_state

kafka = pytest.importorskip("kafka", reason="kafka-python is a test dependency")

from kafka import KafkaConsumer, TopicPartition  # noqa: E402
from kafka.consumer.fetcher import Fetcher, RecordTooLargeError  # noqa: E402

pytestmark = pytest.mark.system
TOPIC = "formats"

# Two uncompressed batches around a gzip one, with a header, null keys and a null value.
BATCHES = [
    ([Record(b"k0", b"v0", 1_600_000_000_000), Record(None, b"v1", 1_600_000_000_001)], "none"),
    ([Record(b"k%d" % i, b"gz-%d" % i * 20, 1_600_000_000_010 + i) for i in range(2, 7)], "gzip"),
    ([Record(b"k7", None, 1_600_000_000_020, (("trace", b"abc"),)),
      Record(b"k8", b"v8" * 100, 1_600_000_000_021)], "none"),
]
COUNT = sum(len(rs) for rs, _ in BATCHES)


def leader_port(cluster):
    return cluster.port(read_state(cluster, TOPIC, 0).leader)


@pytest.fixture
def loaded(cluster_factory):
    """A 2-broker cluster whose partition holds BATCHES, committed on both replicas."""
    cluster = cluster_factory(2, session_timeout_ms=SESSION_MS)
    create_topic(cluster, TOPIC, 1, 2)
    cluster.wait_until(lambda: len(read_state(cluster, TOPIC, 0).isr) == 2, timeout=60,
                       message="ISR never reached both brokers")
    conn = BrokerConnection("127.0.0.1", leader_port(cluster), "t", 15)
    for records, codec in BATCHES:
        # acks=-1: the follower (Fetch v4, raw bytes) has it too and the HW covers it.
        batch = build_v2_batch(records, compression=codec)
        response = conn.request(ApiKey.PRODUCE, 2, {"acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
        assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
    conn.close()
    return cluster


def fetch(cluster, version, port=None, replica_id=-1, offset=0, partition_max_bytes=1 << 20,
          high_watermark=COUNT):
    conn = BrokerConnection("127.0.0.1", port or leader_port(cluster), "t", 15)
    body = {"replica_id": replica_id, "max_wait_ms": 100, "min_bytes": 1, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset,
                                         "partition_max_bytes": partition_max_bytes}]}]}
    if version >= 3:
        body["max_bytes"] = 1 << 20
    if version >= 4:
        body["isolation_level"] = 0
    try:
        part = conn.request(ApiKey.FETCH, version, body)["responses"][0]["partitions"][0]
    finally:
        conn.close()
    assert part["error_code"] == 0
    # (A follower learns the HW from its next fetch: it may still report an older one.)
    assert high_watermark is None or part["high_watermark"] == high_watermark
    return bytes(part["records"])


def test_fetch_v1_v3_v4_get_magic_0_1_2_with_the_same_records(loaded):
    by_version = {v: fetch(loaded, v) for v in (0, 1, 2, 3, 4)}
    promised = {0: 0, 1: 0, 2: 1, 3: 1, 4: 2}
    for version, data in by_version.items():
        entries = list(iter_entries(data))
        assert sum(e.size for e in entries) == len(data), f"v{version}: partial entries"
        assert {data[e.position + 16] for e in entries} == {promised[version]}, f"Fetch v{version}"
    # v4: the stored batches; v2/v3: 2 + 1 (gzip wrapper) + 2 messages; v0/v1 likewise.
    assert [len(list(iter_entries(by_version[v]))) for v in (1, 3, 4)] == [5, 5, 3]
    expected = [(r.key, r.value) for rs, _ in BATCHES for r in rs]
    for version, data in by_version.items():
        records = list(decode_records(data))          # CRCs checked
        assert [r.offset for r in records] == list(range(COUNT))
        assert [(r.key, r.value) for r in records] == expected
        stamps = [r.timestamp_ms for r in records]
        if version >= 2:
            assert stamps == [r.timestamp_ms for rs, _ in BATCHES for r in rs]
        else:
            assert set(stamps) == {-1}
        assert [r.headers for r in records][7] == ((("trace", b"abc"),) if version >= 4 else ())
    # The follower stored exactly the leader's bytes: followers always get them raw.
    follower = next(i for i in loaded.broker_ids if loaded.port(i) != leader_port(loaded))
    # The debug consumer (-2) reads a follower up to its log end.
    assert fetch(loaded, 4, port=loaded.port(follower), replica_id=-2,
                 high_watermark=None) == by_version[4]


def test_legacy_hard_limit_returns_the_cut_entry(loaded):
    """Below v3 an entry larger than partition_max_bytes comes back cut: 'too large' for the client."""
    data = fetch(loaded, 1, offset=COUNT - 1, partition_max_bytes=100)
    assert len(data) == 100 and list(iter_entries(data)) == []
    whole = fetch(loaded, 3, offset=COUNT - 1, partition_max_bytes=100)   # KIP-74: whole, converted
    assert [r.value for r in decode_records(whole, COUNT - 1)] == [b"v8" * 100]


def fetch_versions_used(monkeypatch):
    """[(Fetch version, {magic bytes received})] of every Fetch response kafka-python handles."""
    seen = []
    original = Fetcher._handle_fetch_response

    def spy(self, node_id, fetch_offsets, send_time, response):
        magics = set()
        for topic in response.responses:
            for part in topic.partitions:
                data = part.records
                if isinstance(data, (bytes, bytearray, memoryview)):
                    magics |= {bytes(data)[e.position + 16] for e in iter_entries(bytes(data))}
        seen.append((response.API_VERSION, frozenset(magics)))
        return original(self, node_id, fetch_offsets, send_time, response)
    monkeypatch.setattr(Fetcher, "_handle_fetch_response", spy)
    return seen


# kafka-python 3.0 skips ApiVersions only for api_version < (0, 10) and then uses its
# built-in table (0.8.2: Fetch v0, 0.9: Fetch v1).  From (0, 10, 0) up it asks the
# broker and infers its release from the table (Metadata v7, Fetch v10: Kafka 2.1); a
# release above the configured one is clamped to the configured one's built-in table
# (BrokerVersionData's ordering), so api_version=(0, 10, 0) fetches with v2.
@pytest.mark.parametrize("api_version, fetch_version",
                         [((0, 8, 2), 0), ((0, 9), 1), ((0, 10, 0), 2), (None, 10)],
                         ids=["0.8.2-fetch-v0", "0.9-fetch-v1", "0.10.0-fetch-v2", "auto-fetch-v10"])
def test_kafka_python_consumes_with_old_and_current_api_versions(loaded, monkeypatch, api_version,
                                                                 fetch_version):
    seen = fetch_versions_used(monkeypatch)
    consumer = KafkaConsumer(bootstrap_servers=loaded.bootstrap_servers, enable_auto_commit=False,
                             api_version=api_version, fetch_max_wait_ms=200,
                             max_partition_fetch_bytes=1 << 20)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)   # ListOffsets v0 below (0, 10, 1)
    records = []
    deadline = time.monotonic() + 60
    while len(records) < COUNT:
        assert time.monotonic() < deadline, f"stuck after {len(records)} records"
        for rs in consumer.poll(timeout_ms=1000).values():
            records.extend(rs)
    consumer.close()
    assert {version for version, _ in seen} == {fetch_version}
    promised = 0 if fetch_version <= 1 else 1 if fetch_version <= 3 else 2
    assert set().union(*(magics for _, magics in seen)) == {promised}
    assert [(r.offset, r.key, r.value) for r in records] == \
        [(i, r.key, r.value) for i, r in enumerate(r for rs, _ in BATCHES for r in rs)]
    if fetch_version >= 2:
        assert [r.timestamp for r in records] == [r.timestamp_ms for rs, _ in BATCHES for r in rs]
    headers = [list(r.headers or []) for r in records]
    assert headers[7] == ([("trace", b"abc")] if fetch_version >= 4 else [])


def test_kafka_python_legacy_consumer_reports_a_too_large_record(loaded):
    """Fetch v1 with max_partition_fetch_bytes below the entry: RecordTooLargeError, as from Kafka."""
    consumer = KafkaConsumer(bootstrap_servers=loaded.bootstrap_servers, enable_auto_commit=False,
                             api_version=(0, 9), fetch_max_wait_ms=200, max_partition_fetch_bytes=100)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, COUNT - 1)
    deadline = time.monotonic() + 30
    with pytest.raises(RecordTooLargeError):
        while time.monotonic() < deadline:
            consumer.poll(timeout_ms=500)
    consumer.close()
