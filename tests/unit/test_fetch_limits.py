"""Fetch requests that must not cost a broker its loop or its memory (issue: hostile input).

A real leader Partition over a real Log behind the DataApis, no network.
"""
import gevent
import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.protocol.errors import ErrorCode
from tests.harness.leader_setup import TP, batch, leader, open_log


@pytest.fixture
def plane(tmp_path):
    log_ = open_log(tmp_path)
    p = leader(log_, (1,))
    for i in range(20):
        p.append_as_leader(batch(b"x" * 1000), acks=1)
    yield DataApis(HostedPartitions({TP: p}, lambda tp: tp.topic == TP.topic), lambda t: 1000012,
                   fetch_max_bytes=10_000)
    log_.close()


def fetch(plane, partitions, version=4, max_bytes=10**6, max_wait_ms=0, min_bytes=0):
    request = {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
               "max_bytes": max_bytes, "isolation_level": 0,
               "topics": [{"topic": TP.topic, "partitions": [
                   {"partition": TP.partition, "fetch_offset": offset, "partition_max_bytes": limit}
                   for offset, limit in partitions]}]}
    response = plane.fetch(request, version)
    return [(e["error_code"], len(e["records"] or b"")) for t in response["responses"]
            for e in t["partitions"]]


def test_a_partition_listed_twice_is_an_invalid_request_answered_once(plane):
    assert fetch(plane, [(0, 10**6)] * 200) == [(ErrorCode.INVALID_REQUEST, 0)]


@pytest.mark.parametrize("limit", [-1, -2**31])
def test_a_negative_partition_max_bytes_is_an_invalid_request(plane, limit):
    assert fetch(plane, [(0, limit)]) == [(ErrorCode.INVALID_REQUEST, 0)]


@pytest.mark.parametrize("field", ["max_bytes", "max_wait_ms", "min_bytes"])
def test_negative_request_sizes_are_invalid(plane, field):
    assert fetch(plane, [(0, 1000)], **{field: -1}) == [(ErrorCode.INVALID_REQUEST, 0)]


@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_the_broker_caps_every_answer_at_fetch_max_bytes(plane, version):
    """fetch.max.bytes bounds what one fetch returns, whatever the request asks for
    (and Fetch v0-2 cannot ask for less); the first entry still goes out whole."""
    (error, size), = fetch(plane, [(0, 2**31 - 1)], version=version, max_bytes=2**31 - 1)
    assert error == ErrorCode.NONE and 0 < size <= 12_000


def test_many_partitions_are_read_with_yields_to_the_hub(tmp_path, monkeypatch):
    """A fetch of many partitions gives other greenlets a turn between them (every
    SLICE_MS of reading; zero here, so that the test does not depend on speed)."""
    from kafka_ha import cooperative
    from kafka_ha.model import TopicPartition

    monkeypatch.setattr(cooperative, "SLICE_MS", 0)
    logs, partitions = [], {}
    for i in range(300):
        tp = TopicPartition("t", i)
        log_ = open_log(tmp_path, tp)
        logs.append(log_)
        p = leader(log_, (1,))
        p.append_as_leader(batch(b"x" * 100), acks=1)
        partitions[tp] = p
    plane = DataApis(HostedPartitions(partitions, lambda t: True), lambda t: 1000012, fetch_max_bytes=10**8)
    ticks = []
    ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0)) for _ in range(10**6)])
    gevent.sleep(0)
    before = len(ticks)
    request = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 10**8,
               "isolation_level": 0, "topics": [{"topic": "t", "partitions": [
                   {"partition": i, "fetch_offset": 0, "partition_max_bytes": 10**6}
                   for i in range(300)]}]}
    plane.fetch(request, 4)
    ticker.kill()
    for log_ in logs:
        log_.close()
    assert len(ticks) - before >= 299


@pytest.mark.parametrize("version", [0, 2, 3])
def test_an_old_reader_gets_at_most_a_small_converted_answer(tmp_path, version):
    """Down-conversion for Fetch v0-3 runs record by record on the loop: the broker reads
    (and converts) at most DOWN_CONVERT_MAX_BYTES for such a reader, whatever it asks."""
    from kafka_ha.broker.data_apis import DOWN_CONVERT_MAX_BYTES

    log_ = open_log(tmp_path)
    p = leader(log_, (1,))
    for _ in range(40):
        p.append_as_leader(batch(*[b"x" * 100] * 1000), acks=1)     # ~4.4 MB stored
    big = DataApis(HostedPartitions({TP: p}, lambda t: True), lambda t: 1000012)
    (error, size), = fetch(big, [(0, 2**31 - 1)], version=version, max_bytes=2**31 - 1)
    log_.close()
    assert error == ErrorCode.NONE and 0 < size <= 2 * DOWN_CONVERT_MAX_BYTES
