"""Record headers, timestamps (CreateTime and LogAppendTime topics) and ListOffsets by
timestamp, with unmodified kafka-python and aiokafka against real broker processes.
One cluster for the module: every test asserts several things per start."""

import asyncio
import time

import pytest

kafka = pytest.importorskip("kafka", reason="kafka-python is a test dependency")
aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is a test dependency")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

from tests.harness.cluster import ClusterFixture  # noqa: E402
from tests.harness.kafka import create_topic  # noqa: E402

pytestmark = pytest.mark.system

HEADERS = [("trace", b"abc"), ("empty", b"")]


@pytest.fixture(scope="module")
def cluster(zk_ensemble):
    c = ClusterFixture(2, ensemble=zk_ensemble, session_timeout_ms=4000).start()
    try:
        create_topic(c, "create-time", 1, 2)
        create_topic(c, "append-time", 1, 2, "--config", "message.timestamp.type=LogAppendTime")
        create_topic(c, "by-time", 1, 1, "--config", "flush.messages=1")   # index files on disk
        yield c
    finally:
        c.stop()


def read_all(cluster, topic, count, timeout_s=30):
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                             fetch_max_wait_ms=200)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    records = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} of {count} records read"
        for rs in consumer.poll(timeout_ms=500).values():
            records.extend(rs)
    consumer.close()
    return records


def test_kafka_python_headers_and_create_time(cluster):
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=15000)
    metas = [p.send("create-time", value=b"v%d" % i, headers=HEADERS, timestamp_ms=1_000_000 + i * 1000)
             for i in range(5)]
    p.flush()
    metas = [m.get(timeout=30) for m in metas]
    p.close()
    assert [m.timestamp for m in metas] == [1_000_000 + i * 1000 for i in range(5)]
    records = read_all(cluster, "create-time", 5)
    assert [r.headers for r in records] == [HEADERS] * 5
    assert [r.timestamp for r in records] == [1_000_000 + i * 1000 for i in range(5)]
    assert {r.timestamp_type for r in records} == {0}


def test_log_append_time_topic_and_aiokafka_headers(cluster):
    async def produce_and_read():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        await producer.start()
        try:
            metas = [await producer.send_and_wait("append-time", b"a%d" % i, headers=HEADERS,
                                                  timestamp_ms=1_000) for i in range(3)]
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer("append-time", bootstrap_servers=cluster.bootstrap_servers,
                                             auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            records = [await consumer.getone() for _ in range(3)]
        finally:
            await consumer.stop()
        return metas, records
    before = int(time.time() * 1000)
    metas, records = asyncio.run(produce_and_read())
    after = int(time.time() * 1000)
    # The leader stamped its clock: the producer's 1000 is replaced, in the answer too.
    assert all(before <= m.timestamp <= after for m in metas), metas
    assert [m.timestamp_type for m in metas] == [1, 1, 1]
    assert [r.timestamp for r in records] == [m.timestamp for m in metas]
    assert [r.timestamp_type for r in records] == [1, 1, 1]
    assert [list(r.headers) for r in records] == [HEADERS] * 3
    # kafka-python reads the LogAppendTime type and the headers too.
    kp = read_all(cluster, "append-time", 3)
    assert [(r.timestamp, r.timestamp_type) for r in kp] == [(m.timestamp, 1) for m in metas]


def test_zstd_from_produce_v7_only_and_our_client_round_trips_it(cluster):
    from kafka_ha.client.cluster import ClusterMetadata
    from kafka_ha.client.consumer import Consumer
    from kafka_ha.client.producer import Producer
    from kafka_ha.model import TopicPartition as TP
    from kafka_ha.protocol.api import ApiKey
    from kafka_ha.protocol.errors import ErrorCode
    from kafka_ha.records.builder import Record, build_v2_batch

    create_topic(cluster, "zstd", 1, 2)
    batch = build_v2_batch([Record(None, b"z" * 100, headers=(("h", b"1"),))], compression="zstd")
    with ClusterMetadata(cluster.bootstrap_servers) as meta:
        leader = meta.refresh(["zstd"]).leader_for(TP("zstd", 0))
        answers = {}
        for version in (3, 6, 7):
            body = {"transactional_id": None, "acks": 1, "timeout_ms": 10000, "topic_data": [
                {"name": "zstd", "partition_data": [{"index": 0, "records": batch}]}]}
            response = meta.request(leader, ApiKey.PRODUCE, version, body)
            answers[version] = response["responses"][0]["partition_responses"][0]["error_code"]
    # KIP-110: Kafka 2.1 accepts zstd only in Produce v7 and later.
    assert answers == {3: ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                       6: ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, 7: ErrorCode.NONE}
    producer = Producer(cluster.bootstrap_servers, compression="zstd", acks=1)
    futures = [producer.send("zstd", b"v%d" % i, partition=0, headers=(("n", b"%d" % i),))
               for i in range(10)]
    producer.flush()
    assert [f.get(30).offset for f in futures] == list(range(1, 11))
    producer.close()
    consumer = Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest")
    consumer.assign([("zstd", 0)])
    consumer.seek_to_beginning(("zstd", 0))
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 11:
        assert time.monotonic() < deadline, got
        got += consumer.poll(500)
    consumer.close()
    assert [r.value for r in got] == [b"z" * 100] + [b"v%d" % i for i in range(10)]
    assert [r.headers for r in got] == [(("h", b"1"),)] + [(("n", b"%d" % i),) for i in range(10)]


def test_a_topics_compression_type_decides_the_stored_codec(cluster):
    """compression.type=zstd: kafka-python's plain batches are stored in zstd, a Fetch v9 is
    refused them (UNSUPPORTED_COMPRESSION_TYPE), v10 gets them; gzip likewise, readable by all."""
    from kafka_ha.client.cluster import ClusterMetadata
    from kafka_ha.model import TopicPartition as TP
    from kafka_ha.protocol.api import ApiKey
    from kafka_ha.protocol.errors import ErrorCode
    from kafka_ha.records.format import CODEC_MASK
    from kafka_ha.records.reader import decode_records
    from kafka_ha.records.shallow import iter_entries

    create_topic(cluster, "stored-zstd", 1, 2, "--config", "compression.type=zstd")
    create_topic(cluster, "stored-gzip", 1, 2, "--config", "compression.type=gzip")
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=15000)
    for topic in ("stored-zstd", "stored-gzip"):
        for i in range(5):
            p.send(topic, value=b"c%d" % i, headers=HEADERS)
    p.flush()
    p.close()
    codecs, answers = {}, {}
    with ClusterMetadata(cluster.bootstrap_servers) as meta:
        for topic in ("stored-zstd", "stored-gzip"):
            leader = meta.refresh([topic]).leader_for(TP(topic, 0))
            for version in (9, 10):
                body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                        "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [
                            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
                entry = meta.request(leader, ApiKey.FETCH, version, body)["responses"][0]["partitions"][0]
                records = entry["records"] or b""
                answers[topic, version] = (entry["error_code"], len(list(decode_records(records))))
                codecs[topic, version] = {e.attributes & CODEC_MASK for e in iter_entries(records)}
    assert answers == {("stored-zstd", 9): (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, 0),
                       ("stored-zstd", 10): (ErrorCode.NONE, 5),
                       ("stored-gzip", 9): (ErrorCode.NONE, 5), ("stored-gzip", 10): (ErrorCode.NONE, 5)}
    assert codecs[("stored-zstd", 10)] == {4} and codecs[("stored-gzip", 9)] == {1}
    # kafka-python reads the rewritten batches with their headers intact.
    assert [(r.value, r.headers) for r in read_all(cluster, "stored-gzip", 5)] == [
        (b"c%d" % i, HEADERS) for i in range(5)]


def test_offsets_for_times_and_dump_log_of_a_real_segment(cluster):
    import subprocess
    from pathlib import Path

    confluent_kafka = pytest.importorskip("confluent_kafka")
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=15000, linger_ms=0)
    stamps = [5_000_000 + i * 1000 for i in range(20)]
    for i, ts in enumerate(stamps):
        p.send("by-time", value=b"t%d" % i, key=b"k", headers=[("i", b"%d" % i)], timestamp_ms=ts).get(30)
    p.close()
    tp = TopicPartition("by-time", 0)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False)
    # ListOffsets v1+ by timestamp: the first record at or after it, with its own timestamp.
    found = consumer.offsets_for_times({tp: 5_007_500})[tp]
    assert (found.offset, found.timestamp) == (8, 5_008_000)
    assert consumer.offsets_for_times({tp: 5_000_000})[tp].offset == 0
    assert consumer.offsets_for_times({tp: 9_000_000})[tp] is None     # none that late
    assert consumer.beginning_offsets([tp]) == {tp: 0} and consumer.end_offsets([tp]) == {tp: 20}
    consumer.close()
    ck = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "by-time"})
    try:
        answer = ck.offsets_for_times([confluent_kafka.TopicPartition("by-time", 0, 5_012_000)], timeout=30)
    finally:
        ck.close()
    assert [(a.offset, a.error) for a in answer] == [(12, None)]

    # kafka-dump-log.sh on the leader's segment: Kafka's line formats.
    segment = next(Path(cluster.data_dir(b)) / "by-time-0" for b in cluster.broker_ids
                   if (Path(cluster.data_dir(b)) / "by-time-0").exists())
    files = ",".join(str(segment / f"00000000000000000000.{s}") for s in ("log", "index", "timeindex"))
    bin_dir = Path(__file__).resolve().parents[2] / "bin"
    run = subprocess.run([str(bin_dir / "kafka-dump-log.sh"), "--files", files, "--print-data-log"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == f"Dumping {segment}/00000000000000000000.log"
    assert lines[1] == "Starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 baseSequence: ")
    assert " position: 0 CreateTime: 5000000 size: " in lines[2] and lines[2].endswith("isvalid: true")
    assert lines[3].startswith("| offset: 0 CreateTime: 5000000 keysize: 1 valuesize: 2 sequence: ")
    assert lines[3].endswith(" headerKeys: [i] key: k payload: t0")
    assert f"Dumping {segment}/00000000000000000000.timeindex" in lines
    assert lines[-1].startswith("timestamp: ") and lines[-1].endswith(" offset: 19")
    assert lines[-1] == "timestamp: 5019000 offset: 19"
    help_run = subprocess.run([str(bin_dir / "kafka-dump-log.sh"), "--help"], capture_output=True, text=True,
                              timeout=60)
    assert help_run.returncode == 0 and "--deep-iteration" in help_run.stdout
