"""The producer and cluster metadata against the in-memory fake cluster (real sockets)."""
from __future__ import annotations

import time

import gevent
import gevent.event
import pytest

from kafka_ha.client.cluster import ClusterMetadata
from kafka_ha.client.errors import (FatalError, KafkaConnectionError, KafkaTimeoutError,
                                    NoBrokersAvailable, RetriableError)
from tests.harness.fake_cluster import FakeCluster
from kafka_ha.client.partitioner import murmur2, to_positive
from kafka_ha.client.producer import Producer, parse_acks
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode

E = ErrorCode


@pytest.fixture
def cluster():
    fake = FakeCluster((1, 2)).start()
    yield fake
    fake.stop()


@pytest.fixture
def make_producer(cluster):
    made = []

    def make(**kwargs):
        kwargs.setdefault("linger_ms", 5)
        kwargs.setdefault("retry_backoff_ms", 10)
        producer = Producer(cluster.bootstrap, **kwargs)
        made.append(producer)
        return producer

    yield make
    for producer in made:
        producer.close()


def values(cluster, tp):
    return [r.value for r in cluster.records(tp)]


# -- metadata --------------------------------------------------------------------------


def test_metadata_refresh_reads_brokers_leaders_and_controller(cluster):
    cluster.create_topic("t", 2, assignment=[[1, 2], [2, 1]])
    with ClusterMetadata(cluster.bootstrap) as meta:
        snap = meta.refresh()
    assert sorted(snap.brokers) == [1, 2] and snap.controller_id == 1
    assert snap.partitions_for("t") == (0, 1)
    p1 = snap.partition(TopicPartition("t", 1))
    assert (p1.leader, p1.replicas, p1.isr) == (2, (2, 1), (2, 1))
    assert snap.leader_for(TopicPartition("t", 0)) == 1


def test_unreachable_cluster_names_every_server_tried():
    with ClusterMetadata("127.0.0.1:1,localhost:2") as meta:
        with pytest.raises(NoBrokersAvailable) as info:
            meta.refresh()
    assert info.value.servers == ["127.0.0.1:1", "localhost:2"]
    assert "127.0.0.1:1, localhost:2" in str(info.value)
    assert not info.value.retriable


def test_bad_bootstrap_string_is_a_value_error():
    with pytest.raises(ValueError, match="expected host:port"):
        Producer("localhost")


def test_unknown_topic_waits_then_fails_with_a_timeout(cluster, make_producer):
    producer = make_producer(max_block_ms=200)
    future = producer.send("missing", b"v")
    with pytest.raises(KafkaTimeoutError, match="missing"):
        future.get(5)


# -- partitioning and batching -------------------------------------------------------------


def test_keys_land_on_the_murmur2_partition(cluster, make_producer):
    cluster.create_topic("t", 5)
    producer = make_producer()
    keys = [b"21", b"foobar", b"abc", b"k1", b"k2", b"k3"]
    futures = {key: producer.send("t", b"v", key=key) for key in keys}
    producer.flush()
    for key, future in futures.items():
        assert future.get().partition == to_positive(murmur2(key)) % 5


def test_explicit_partition_and_offsets_in_order(cluster, make_producer):
    cluster.create_topic("t", 2)
    producer = make_producer()
    futures = [producer.send("t", b"%d" % i, partition=1) for i in range(5)]
    assert [f.get(5) for f in futures] == [(1, i) for i in range(5)]
    assert values(cluster, TopicPartition("t", 1)) == [b"0", b"1", b"2", b"3", b"4"]


def test_partition_out_of_range_fails_the_future(cluster, make_producer):
    cluster.create_topic("t", 2)
    future = make_producer().send("t", b"v", partition=7)
    with pytest.raises(FatalError, match="no partition 7"):
        future.get(1)


def test_one_produce_request_per_leader_broker_carries_all_its_partitions(cluster, make_producer):
    cluster.create_topic("t", 4, assignment=[[1], [2], [1], [2]])
    cluster.create_topic("u", 2, assignment=[[1], [2]])
    producer = make_producer(linger_ms=50)
    for p in range(4):
        producer.send("t", b"t%d" % p, partition=p)
    for p in range(2):
        producer.send("u", b"u%d" % p, partition=p)
    producer.flush()
    produces = cluster.requests_of(ApiKey.PRODUCE)
    assert sorted(broker for broker, _ in produces) == [1, 2]
    carried = {broker: sorted((t["name"], pd["index"]) for t in body["topic_data"]
                              for pd in t["partition_data"]) for broker, body in produces}
    assert carried == {1: [("t", 0), ("t", 2), ("u", 0)], 2: [("t", 1), ("t", 3), ("u", 1)]}


def test_records_sent_in_a_loop_are_batched(cluster, make_producer):
    cluster.create_topic("t", 1)
    producer = make_producer(linger_ms=20)
    futures = [producer.send("t", b"x" * 10, partition=0) for _ in range(100)]
    producer.flush()
    assert [f.get().offset for f in futures] == list(range(100))
    assert len(cluster.requests_of(ApiKey.PRODUCE)) == 1


def test_gzip_batches_round_trip(cluster, make_producer):
    cluster.create_topic("t", 1)
    producer = make_producer(compression="gzip")
    producer.send("t", b"hello" * 100, key=b"k", partition=0)
    producer.flush()
    (record,) = cluster.records(TopicPartition("t", 0))
    assert (record.key, record.value) == (b"k", b"hello" * 100)


def test_acks_zero_sends_without_waiting_and_offsets_are_unknown(cluster, make_producer):
    cluster.create_topic("t", 1)
    producer = make_producer(acks=0)
    future = producer.send("t", b"v", partition=0)
    assert future.get(5) == (0, -1)                # resolved once written to the socket
    deadline = time.monotonic() + 5
    while not cluster.requests_of(ApiKey.PRODUCE) and time.monotonic() < deadline:
        gevent.sleep(0.01)
    assert cluster.requests_of(ApiKey.PRODUCE)[0][1]["acks"] == 0
    assert values(cluster, TopicPartition("t", 0)) == [b"v"]


@pytest.mark.parametrize("acks, wire", [("all", -1), (-1, -1), ("1", 1), (0, 0)])
def test_acks_values(acks, wire):
    assert parse_acks(acks) == wire


def test_invalid_acks_rejected():
    with pytest.raises(ValueError):
        parse_acks(2)


# -- retries ----------------------------------------------------------------------------


def test_not_leader_refreshes_metadata_and_retries_on_the_new_leader(cluster, make_producer):
    cluster.create_topic("t", 1, assignment=[[1, 2]])
    tp = TopicPartition("t", 0)
    producer = make_producer()
    assert producer.send("t", b"a", partition=0).get(5) == (0, 0)
    cluster.set_leader(tp, 2)                      # the producer's metadata is now stale
    metadata_before = len(cluster.requests_of(ApiKey.METADATA))
    assert producer.send("t", b"b", partition=0).get(5) == (0, 1)
    produces = [broker for broker, _ in cluster.requests_of(ApiKey.PRODUCE)]
    assert produces == [1, 1, 2]                   # refused by 1, retried on 2
    assert len(cluster.requests_of(ApiKey.METADATA)) > metadata_before
    assert values(cluster, tp) == [b"a", b"b"]


@pytest.mark.parametrize("code", [E.NOT_LEADER_FOR_PARTITION, E.LEADER_NOT_AVAILABLE,
                                  E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                                  E.REQUEST_TIMED_OUT])
def test_retriable_errors_are_retried(cluster, make_producer, code):
    cluster.create_topic("t", 1)
    cluster.fail(ApiKey.PRODUCE, code, times=2)
    assert make_producer().send("t", b"v", partition=0).get(5) == (0, 0)
    assert len(cluster.requests_of(ApiKey.PRODUCE)) == 3


def test_dropped_connection_is_retried(cluster, make_producer):
    cluster.create_topic("t", 1)
    producer = make_producer()
    producer.partitions_for("t")
    cluster.fail(ApiKey.PRODUCE, None)             # close the connection instead of answering
    assert producer.send("t", b"v", partition=0).get(5) == (0, 0)
    assert values(cluster, TopicPartition("t", 0)) == [b"v"]


def test_retries_exhausted_fail_the_future_with_the_last_error(cluster, make_producer):
    cluster.create_topic("t", 1)
    cluster.fail(ApiKey.PRODUCE, E.NOT_ENOUGH_REPLICAS, times=10)
    future = make_producer(retries=2).send("t", b"v", partition=0)
    with pytest.raises(RetriableError) as info:
        future.get(5)
    assert info.value.code == E.NOT_ENOUGH_REPLICAS
    assert len(cluster.requests_of(ApiKey.PRODUCE)) == 3


def test_fatal_errors_are_not_retried(cluster, make_producer):
    cluster.create_topic("t", 1)
    cluster.fail(ApiKey.PRODUCE, E.MESSAGE_TOO_LARGE)
    future = make_producer().send("t", b"v", partition=0)
    with pytest.raises(FatalError) as info:
        future.get(5)
    assert info.value.code == E.MESSAGE_TOO_LARGE
    assert len(cluster.requests_of(ApiKey.PRODUCE)) == 1


def test_with_one_request_in_flight_retries_never_reorder_records(cluster, make_producer):
    cluster.create_topic("t", 1)
    producer = make_producer(batch_size=200, linger_ms=0, max_in_flight_requests_per_connection=1)
    cluster.fail(ApiKey.PRODUCE, E.NOT_LEADER_FOR_PARTITION, times=3)
    futures = [producer.send("t", b"%03d" % i + b"x" * 50, partition=0) for i in range(30)]
    producer.flush()
    assert [f.get().offset for f in futures] == list(range(30))
    assert [v[:3] for v in values(cluster, TopicPartition("t", 0))] == [b"%03d" % i for i in range(30)]


def _max_concurrent_produce_requests(producer) -> list[int]:
    """Wrap the producer's cluster.request; the returned list ends up holding the most
    Produce requests that were in flight at once."""
    request, state = producer.cluster.request, {"now": 0}
    peak = [0]

    def counting(node, api_key, *args, **kwargs):
        if api_key != ApiKey.PRODUCE:
            return request(node, api_key, *args, **kwargs)
        state["now"] += 1
        peak[0] = max(peak[0], state["now"])
        try:
            gevent.sleep(0.02)          # a slow broker: the next batches are ready meanwhile
            return request(node, api_key, *args, **kwargs)
        finally:
            state["now"] -= 1

    producer.cluster.request = counting
    return peak


@pytest.mark.parametrize("max_in_flight", [1, 3])
def test_requests_to_a_broker_are_pipelined_up_to_max_in_flight(cluster, make_producer,
                                                                 max_in_flight):
    cluster.create_topic("t", 1)
    producer = make_producer(batch_size=200, linger_ms=0,
                             max_in_flight_requests_per_connection=max_in_flight)
    peak = _max_concurrent_produce_requests(producer)
    futures = [producer.send("t", b"%03d" % i + b"x" * 50, partition=0) for i in range(60)]
    producer.flush()
    assert peak[0] == max_in_flight
    assert [f.get().offset for f in futures] == list(range(60))


def test_pipelined_batches_that_fail_together_are_retried_in_order(cluster, make_producer):
    cluster.create_topic("t", 1)
    producer = make_producer(batch_size=200, linger_ms=0, max_in_flight_requests_per_connection=5)
    peak = _max_concurrent_produce_requests(producer)
    # The broker hangs up on the first request: every request pipelined behind it
    # on that connection fails as well, and all of them come back for a retry.
    cluster.fail(ApiKey.PRODUCE, None, times=1)
    futures = [producer.send("t", b"%03d" % i + b"x" * 50, partition=0) for i in range(30)]
    producer.flush()
    assert peak[0] > 1
    assert [f.get().offset for f in futures] == list(range(30))
    assert [v[:3] for v in values(cluster, TopicPartition("t", 0))] == [b"%03d" % i for i in range(30)]


def test_a_batch_drained_before_its_connection_dropped_is_never_sent_on_the_next(
        cluster, make_producer):
    # Batches drained for a connection live and die with it, as in Kafka's sender. Here the
    # requests for batches 3 and 4 reach the socket only after the first request's failure
    # dropped it: sent on a fresh connection they would be written ahead of the retried
    # batches 0-2.
    cluster.create_topic("t", 1)
    producer = make_producer(batch_size=200, linger_ms=0, max_in_flight_requests_per_connection=5)
    request, calls, first_failed = producer.cluster.request, [0], gevent.event.Event()

    def late_for_some(node, api_key, *args, **kwargs):
        if api_key != ApiKey.PRODUCE:
            return request(node, api_key, *args, **kwargs)
        call, calls[0] = calls[0], calls[0] + 1
        if call in (3, 4):
            first_failed.wait()
        try:
            return request(node, api_key, *args, **kwargs)
        finally:
            if call == 0:
                first_failed.set()

    producer.cluster.request = late_for_some
    cluster.fail(ApiKey.PRODUCE, None, times=1)
    futures = [producer.send("t", b"%03d" % i, partition=0) for i in range(10)]
    producer.flush()
    assert calls[0] > 5
    assert [v[:3] for v in values(cluster, TopicPartition("t", 0))] == [b"%03d" % i for i in range(10)]
    assert [f.get().offset for f in futures] == list(range(10))


def test_max_in_flight_must_be_positive(cluster):
    with pytest.raises(ValueError, match="max.in.flight.requests.per.connection"):
        Producer(cluster.bootstrap, max_in_flight_requests_per_connection=0)


def test_a_dead_cluster_fails_records_after_the_delivery_timeout(cluster, make_producer):
    cluster.create_topic("t", 1)
    producer = make_producer(retries=1, delivery_timeout_ms=500)
    producer.partitions_for("t")
    cluster.stop()
    future = producer.send("t", b"v", partition=0)
    with pytest.raises((KafkaConnectionError, KafkaTimeoutError)):
        future.get(10)


# -- lifecycle -------------------------------------------------------------------------------


def test_callbacks_run_and_may_send_again(cluster, make_producer):
    cluster.create_topic("t", 1)
    producer = make_producer()
    chained = []
    first = producer.send("t", b"first", partition=0)
    first.add_done_callback(lambda f: chained.append(producer.send("t", b"second", partition=0)))
    producer.flush()
    producer.flush()
    assert chained[0].get(5) == (0, 1)


def test_close_flushes_and_rejects_later_sends(cluster):
    cluster.create_topic("t", 1)
    producer = Producer(cluster.bootstrap, linger_ms=10000)
    future = producer.send("t", b"v", partition=0)
    producer.close()
    assert future.get(0) == (0, 0)
    with pytest.raises(Exception, match="closed"):
        producer.send("t", b"w")


def test_send_rejects_non_bytes(cluster, make_producer):
    with pytest.raises(TypeError):
        make_producer().send("t", "text")


def test_refused_connections_do_not_use_up_retries_during_a_failover(cluster, make_producer):
    cluster.create_topic("t", 1, assignment=[[1, 2]])
    # One retry: the first send after the crash finds the old socket closed (a sent request,
    # so it counts); the refused reconnects after it must not count.
    producer = make_producer(retries=1)
    assert producer.send("t", b"a", partition=0).get(5) == (0, 0)
    cluster.kill(1)
    future = producer.send("t", b"b", partition=0)
    gevent.sleep(0.5)                               # several refused reconnects meanwhile
    assert not future.done()
    cluster.set_leader(TopicPartition("t", 0), 2)   # broker 2 takes over
    assert future.get(5) == (0, 1)
    assert values(cluster, TopicPartition("t", 0)) == [b"a", b"b"]


def test_a_callback_may_wait_for_another_send_to_the_same_broker(cluster, make_producer):
    cluster.create_topic("t", 1)
    producer = make_producer()
    chained = []
    producer.send("t", b"first", partition=0).add_done_callback(
        lambda f: chained.append(producer.send("t", b"second", partition=0).get(5)))
    producer.flush()
    gevent.sleep(0.1)
    assert chained == [(0, 1)]


def test_a_send_to_an_idle_sender_goes_out_after_the_linger(cluster, make_producer):
    cluster.create_topic("t", 1)
    producer = make_producer(linger_ms=20)
    assert producer.send("t", b"a", partition=0).get(5) == (0, 0)
    gevent.sleep(0.1)                              # the sender has nothing to do and sleeps
    start = time.monotonic()
    assert producer.send("t", b"b", partition=0).get(5) == (0, 1)
    assert time.monotonic() - start < 1.0


def test_each_partition_of_one_request_gets_its_own_offsets(cluster, make_producer):
    """Regression: the futures of every batch in a response got the last batch's base offset."""
    cluster.create_topic("w", 2, assignment=[[1], [1]])
    producer = make_producer(linger_ms=50)
    first = [producer.send("w", b"a", partition=0) for _ in range(3)]
    producer.flush()
    both = [producer.send("w", b"b", partition=p) for p in (0, 1) for _ in range(2)]
    producer.flush()
    assert [f.get().offset for f in first] == [0, 1, 2]
    assert [(f.get().partition, f.get().offset) for f in both] == [(0, 3), (0, 4), (1, 0), (1, 1)]
