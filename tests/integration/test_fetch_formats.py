"""Fetch format promises on the real leader code path (Partition + on-disk Log + DataApis, no network).

v0/v1 readers get magic 0, v2/v3 magic 1, v4 the stored magic 2 bytes
(what each Fetch version promises its readers); followers always get the stored bytes.  Also the
fetch-size rules that legacy readers depend on: below v3 the limit is hard
(an oversized first entry comes back cut, for RecordTooLargeError), from v3 a
partition whose first entry does not fit the remaining budget gets nothing.
"""

import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.partition import Partition
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.records.reader import decode_records
from kafka_ha.records.shallow import iter_entries
from tests.integration.leaders import NoIsrChanges

TPS = [TopicPartition("f", 0), TopicPartition("f", 1)]
MB = 1 << 20


@pytest.fixture
def plane(tmp_path):
    manager = LogManager([str(tmp_path)], LogConfig())
    partitions = {}
    for tp in TPS:
        p = Partition(tp, 1, manager.get_or_create_log(tp, LogConfig()), lambda: 1, NoIsrChanges())
        p.make_leader(PartitionStateInfo(tp, 1, 1, 0, (1, 2), 0, (1, 2)))
        partitions[tp] = p
    yield DataApis(HostedPartitions(partitions, lambda t: True), lambda t: 1000012)
    manager.close()


def produce(plane, tp, records, compression="none"):
    batch = build_v2_batch(records, compression=compression)
    response = plane.produce({"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": tp.topic, "partition_data": [{"index": tp.partition, "records": batch}]}]}, 2)
    assert response["responses"][0]["partition_responses"][0]["error_code"] == 0


def fetch(plane, version, offsets, replica_id=-1, partition_max_bytes=MB, max_bytes=64 * MB,
          isolation_level=0):
    request = {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "topics": [
        {"topic": "f", "partitions": [{"partition": tp.partition, "fetch_offset": off,
                                       "partition_max_bytes": partition_max_bytes}
                                      for tp, off in offsets.items()]}]}
    if version >= 3:
        request["max_bytes"] = max_bytes
    if version >= 4:
        request["isolation_level"] = isolation_level
    response = plane.fetch(request, version)
    assert ("throttle_time_ms" in response) == (version >= 1)
    return {TopicPartition(t["topic"], p["partition_index"]): p
            for t in response["responses"] for p in t["partitions"]}


def commit(plane):
    """Follower 2 fetches at the leader's LEO: the HW reaches it."""
    fetch(plane, 4, {tp: plane.replicas.get(tp).log.log_end_offset for tp in TPS}, replica_id=2)
    for tp in TPS:
        assert plane.replicas.get(tp).high_watermark == plane.replicas.get(tp).log.log_end_offset


def magics(data):
    return [bytes(data)[e.position + 16] for e in iter_entries(data)]


def content(data, offset=0):
    return [(r.offset, r.key, r.value) for r in decode_records(bytes(data), offset)]


def test_each_version_gets_its_promised_format(plane):
    tp = TPS[0]
    produce(plane, tp, [Record(b"a", b"1", 10), Record(None, b"2", 11)])
    produce(plane, tp, [Record(b"c", None, 12, (("h", b"x"),))] * 3, compression="gzip")
    commit(plane)
    stored = fetch(plane, 4, {tp: 0})[tp]["records"]
    assert magics(stored) == [2, 2]
    expected = content(stored)
    assert [o for o, _, _ in expected] == [0, 1, 2, 3, 4]
    for version, magic, count in [(0, 0, 3), (1, 0, 3), (2, 1, 3), (3, 1, 3)]:
        part = fetch(plane, version, {tp: 0})[tp]
        assert part["error_code"] == 0 and part["high_watermark"] == 5
        assert magics(part["records"]) == [magic] * count, f"Fetch v{version}"
        assert content(part["records"]) == expected
        assert "last_stable_offset" not in part
    v4 = fetch(plane, 4, {tp: 0})[tp]
    assert (v4["last_stable_offset"], v4["aborted_transactions"]) == (5, [])
    headers = [r.headers for r in decode_records(v4["records"])]
    assert headers[2:] == [(("h", b"x"),)] * 3          # v4 keeps headers; v0-v3 cannot carry them
    assert {r.headers for r in decode_records(fetch(plane, 3, {tp: 0})[tp]["records"])} == {()}


def test_followers_always_get_the_stored_bytes(plane):
    tp = TPS[0]
    produce(plane, tp, [Record(b"k", b"v", 1)] * 4)
    for version in (0, 3, 4):
        data = fetch(plane, version, {tp: 0}, replica_id=2)[tp]["records"]
        assert magics(data) == [2]
    commit(plane)
    # The debug consumer (-2) is a consumer: it gets the converted format.
    assert magics(fetch(plane, 3, {tp: 0}, replica_id=-2)[tp]["records"]) == [1] * 4


def test_uncompressed_batch_is_converted_from_the_fetch_offset(plane):
    tp = TPS[0]
    produce(plane, tp, [Record(None, b"v%d" % i, i) for i in range(5)])
    commit(plane)
    data = fetch(plane, 2, {tp: 3})[tp]["records"]
    assert [e.last_offset for e in iter_entries(data)] == [3, 4]


def test_isolation_levels(plane):
    tp = TPS[0]
    produce(plane, tp, [Record(None, b"x", 1)])
    commit(plane)
    a = fetch(plane, 4, {tp: 0}, isolation_level=0)[tp]
    b = fetch(plane, 4, {tp: 0}, isolation_level=1)[tp]
    assert a == b and a["error_code"] == 0 and a["records"]
    bad = fetch(plane, 4, {tp: 0, TPS[1]: 0}, isolation_level=2)
    assert {p["error_code"] for p in bad.values()} == {ErrorCode.INVALID_REQUEST}
    assert all(not p["records"] for p in bad.values())


def test_below_v3_an_oversized_first_entry_comes_back_cut(plane):
    """The pre-KIP-74 contract: the reader sees an incomplete entry and reports it too large."""
    tp = TPS[0]
    produce(plane, tp, [Record(None, b"x" * 1000, 1)])
    commit(plane)
    for version in (0, 1, 2):
        data = fetch(plane, version, {tp: 0}, partition_max_bytes=500)[tp]["records"]
        assert len(data) == 500 and list(iter_entries(data)) == []
        assert data[16] == 2          # the stored bytes, untouched: there is nothing whole to convert
    # KIP-74 (v3+): the first entry comes back whole, converted for v3.
    data = fetch(plane, 3, {tp: 0}, partition_max_bytes=500)[tp]["records"]
    assert magics(data) == [1] and content(data) == [(0, None, b"x" * 1000)]


def test_v3_partition_without_room_for_its_first_entry_gets_nothing(plane):
    produce(plane, TPS[0], [Record(None, b"a" * 600, 1)])
    produce(plane, TPS[1], [Record(None, b"b" * 600, 1)])
    commit(plane)
    for version in (3, 4):
        parts = fetch(plane, version, {TPS[0]: 0, TPS[1]: 0}, max_bytes=900)
        assert len(list(iter_entries(parts[TPS[0]]["records"]))) == 1
        assert parts[TPS[1]]["records"] == b"", "a lone partial entry would stop kafka-python"
        # With room to spare, the second partition's entry comes whole.
        parts = fetch(plane, version, {TPS[0]: 0, TPS[1]: 0}, max_bytes=2000)
        assert [len(list(iter_entries(parts[tp]["records"]))) for tp in TPS] == [1, 1]


def test_converted_data_keeps_within_the_fetch_limits(plane):
    """Legacy messages are larger than v2 records: the conversion is cut to the limits."""
    for tp in TPS:
        for i in range(10):
            produce(plane, tp, [Record(None, b"%d" % j, j) for j in range(50)])
    commit(plane)
    stored = fetch(plane, 4, {TPS[0]: 0}, partition_max_bytes=4000)[TPS[0]]["records"]
    for version in (1, 3):
        converted = fetch(plane, version, {TPS[0]: 0}, partition_max_bytes=4000)[TPS[0]]["records"]
        assert len(stored) < len(converted) <= 4000
        offsets = [r.offset for r in decode_records(converted)]
        assert offsets == list(range(len(offsets)))
    # max_bytes counts converted bytes across partitions.
    parts = fetch(plane, 3, {TPS[0]: 0, TPS[1]: 0}, partition_max_bytes=4000, max_bytes=6000)
    sizes = [len(parts[tp]["records"]) for tp in TPS]
    assert sum(sizes) <= 6000 and min(sizes) > 0
    # A small read is converted whole, even though it grows.
    small = fetch(plane, 3, {TPS[0]: 490})[TPS[0]]["records"]
    assert [r.offset for r in decode_records(small)] == list(range(490, 500))


def test_large_reads_go_out_by_sendfile_small_and_converted_ones_as_bytes(plane):
    from kafka_ha.protocol.file_region import SENDFILE_MIN_BYTES, FileRegions

    tp = TPS[0]
    for i in range(8):
        produce(plane, tp, [Record(b"k%d" % i, bytes([i]) * 1000, 10)] * 8)
    commit(plane)
    v4 = fetch(plane, 4, {tp: 0})[tp]["records"]
    assert isinstance(v4, FileRegions) and len(v4) >= SENDFILE_MIN_BYTES
    stored = v4.read()
    assert content(stored) == [(o, b"k%d" % (o // 8), bytes([o // 8]) * 1000) for o in range(64)]
    follower = fetch(plane, 4, {tp: 0}, replica_id=2)[tp]["records"]
    assert isinstance(follower, FileRegions) and follower.read() == stored
    small = fetch(plane, 4, {tp: 60})[tp]["records"]       # the last batch only: < 16 KiB
    assert isinstance(small, bytes) and content(small, 60) == content(stored, 60)
    v3 = fetch(plane, 3, {tp: 0})[tp]["records"]            # converted: always bytes
    assert isinstance(v3, bytes) and content(v3) == content(stored)
    for regions in (v4, follower):
        regions.close()
