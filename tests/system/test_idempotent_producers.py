"""Unmodified clients' idempotent producers (InitProducerId, Produce v3+, magic 2)
against real broker processes, and the proof that matters: an idempotent
confluent-kafka producer writing through a kill -9 of a leader leaves no
duplicate and no gap in any partition."""
import asyncio
import json
import os
import threading

import pytest

from tests.harness.cluster import SESSION_MS
from tests.harness.kafka import create_topic, read_states
from tests.harness.load import assert_intact, judge, read_partitions

pytestmark = pytest.mark.system


def values_by_partition(records):
    out = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        out.setdefault(r.partition, []).append(int(r.value))
    return out


def assert_each_partition_holds(records, partitions, n):
    """Partition p holds exactly p, p + partitions, ... < n, once each, in send order."""
    got = values_by_partition(records)
    for p in range(partitions):
        assert got.get(p, []) == list(range(p, n, partitions)), \
            f"partition {p}: {len(got.get(p, []))} records, expected {len(range(p, n, partitions))}"


def block_claims(cluster):
    data, _ = cluster.zk.get("/latest_producer_id_block")
    return json.loads(data)


def test_kafka_python_idempotent_producer(cluster_factory):
    kafka = pytest.importorskip("kafka")
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "kp-idem", 3, 3)
    p = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True,
                            request_timeout_ms=15000, max_block_ms=30000)
    futures = [p.send("kp-idem", value=b"%d" % i, partition=i % 3) for i in range(600)]
    p.flush()
    assert all(f.get(timeout=30).offset >= 0 for f in futures)
    assert p._transaction_manager.producer_id_and_epoch.producer_id >= 0
    p.close()
    assert_each_partition_holds(read_partitions(cluster, "kp-idem", 3), 3, 600)
    claimed = block_claims(cluster)
    assert claimed["version"] == 1 and claimed["block_start"] == "0" and claimed["block_end"] == "999"


def test_aiokafka_idempotent_producer(cluster_factory):
    aiokafka = pytest.importorskip("aiokafka")
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "aio-idem", 3, 3)

    async def produce():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                                      enable_idempotence=True)
        await p.start()
        try:
            sent = [await p.send("aio-idem", b"%d" % i, partition=i % 3) for i in range(300)]
            metas = await asyncio.gather(*sent)
        finally:
            await p.stop()
        return metas

    metas = asyncio.run(produce())
    assert len({(m.partition, m.offset) for m in metas}) == 300
    assert_each_partition_holds(read_partitions(cluster, "aio-idem", 3), 3, 300)


def test_confluent_kafka_idempotent_producer_through_a_leader_kill(cluster_factory):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    partitions, n = 6, 200_000
    create_topic(cluster, "ck-idem", partitions, 3)
    producer = confluent_kafka.Producer({
        "bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
        "linger.ms": 5, "message.timeout.ms": 300000})
    acked, failed = {}, []
    lock = threading.Lock()

    def delivered(err, msg):
        with lock:
            if err is not None:
                failed.append((int(msg.value()), str(err)))
            else:
                acked[int(msg.value())] = (msg.partition(), msg.offset())

    victim = read_states(cluster, "ck-idem")[0].leader
    for i in range(n):
        if i == n // 3:
            # (delivery callbacks run only inside poll)
            cluster.wait_until(lambda: producer.poll(0.1) >= 0 and len(acked) >= n // 6, timeout=120,
                               message="production did not get going")
            cluster.kill(victim)
        while True:
            try:
                producer.produce("ck-idem", value=b"%d" % i, partition=i % partitions,
                                 on_delivery=delivered)
                break
            except BufferError:        # the local queue is full while the leader moves
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(300) == 0
    assert not failed, f"{len(failed)} failed deliveries, e.g. {failed[:3]}"
    cluster.start_broker(victim)
    records = read_partitions(cluster, "ck-idem", partitions)
    history = judge(records, n, acked)
    assert_intact(history, retried={})            # no duplicate at all: idempotence
    assert not history.lost, f"{len(history.lost)} acknowledged records lost"
    assert_each_partition_holds(records, partitions, n)   # no gap either


def test_bad_idempotent_input_gets_kafkas_errors_and_the_broker_stays_up(cluster_factory):
    from kafka_ha.protocol.api import ApiKey
    from kafka_ha.protocol.connection import BrokerConnection
    from kafka_ha.records.builder import Record, build_legacy_message_set, build_v2_batch

    cluster = cluster_factory(brokers=1)
    create_topic(cluster, "bad-idem", 1, 1)
    conn = BrokerConnection("127.0.0.1", cluster.port(1), "bad", 30)

    def init(transactional_id=None):
        r = conn.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": transactional_id,
                                                      "transaction_timeout_ms": 60000})
        return r["error_code"], r["producer_id"]

    def produce(records, version=7, transactional_id=None):
        r = conn.request(ApiKey.PRODUCE, version, {
            "transactional_id": transactional_id, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": "bad-idem", "partition_data": [{"index": 0, "records": records}]}]})
        part = r["responses"][0]["partition_responses"][0]
        return part["error_code"], part["base_offset"]

    def batch(pid, seq, epoch=0):
        return build_v2_batch([Record(None, b"%d" % seq)], producer=(pid, epoch, seq))

    error, pid = init()
    assert error == 0 and pid >= 0
    assert init()[1] == pid + 1
    assert init("tx")[0] == 53                                  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(batch(pid, 0)) == (0, 0)
    assert produce(batch(pid, 0)) == (0, 0)                     # a retry: its offset, not stored again
    assert produce(batch(pid, 5))[0] == 45                      # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(batch(pid + 500, 3))[0] == 59                # UNKNOWN_PRODUCER_ID
    assert produce(build_legacy_message_set([Record(None, b"v")], magic=1), version=3)[0] == 87
    assert produce(batch(pid, 1), transactional_id="tx")[0] == 53
    assert produce(batch(pid, 1)) == (0, 1)
    conn.close()
    assert cluster.broker_alive(1)
    # A clean restart writes the producer state beside the log, and the restarted
    # leader starts from it: the last batch's retry is still recognized.
    cluster.restart(1)
    partition_dir = os.path.join(cluster.data_dir(1), "bad-idem-0")
    assert [f for f in os.listdir(partition_dir) if f.endswith(".snapshot")] == [f"{2:020d}.snapshot"]
    conn = BrokerConnection("127.0.0.1", cluster.port(1), "bad", 30)
    cluster.wait_until(lambda: produce(batch(pid, 1)) == (0, 1), timeout=60,
                       message="the restarted broker did not answer the retry with its offset")
    assert produce(batch(pid, 2)) == (0, 2)
    conn.close()
