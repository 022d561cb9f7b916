"""compression.type: the leader stores a topic's batches in the topic's codec (records.recompress,
Log.append_as_leader), the topic and broker configs parse as Kafka names them, and a consumer
below Fetch v10 is refused a topic stored in zstd (Kafka 2.1's rule)."""
import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.fetch_sessions import FetchSessionCache
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.config import ConfigError, validate_topic_config
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log import Log
from kafka_ha.protocol.errors import ErrorCode
import struct

from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.records.compression import available_codecs
from kafka_ha.records.errors import CorruptRecordError, RecordTooLargeError
from kafka_ha.records.format import (CODEC_MASK, CODEC_NAMES, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK,
                                     V2_ATTRIBUTES_OFFSET, V2_CRC_OFFSET, crc32c)
from kafka_ha.records.reader import decode_records
from kafka_ha.records.recompress import TOPIC_CODECS, recompress
from kafka_ha.records.shallow import iter_entries, validate_entry
from tests.harness.leader_setup import TP, leader

CODECS = sorted(available_codecs())
RECORDS = [Record(b"k1", b"a" * 300, 1000, headers=(("h", b"x"),)),
           Record(None, b"b" * 200, 1005), Record(b"k3", None, 1002)]


def facts(buf):
    """Everything a rewrite must keep, per batch and per record."""
    batches = [(e.first_offset, e.last_offset, e.partition_leader_epoch, e.max_timestamp,
                e.record_count, e.attributes & ~CODEC_MASK, e.producer_id, e.producer_epoch,
                e.base_sequence) for e in iter_entries(buf)]
    records = [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in decode_records(buf)]
    return batches, records


@pytest.mark.parametrize("target", CODECS, ids=lambda c: CODEC_NAMES[c])
@pytest.mark.parametrize("source", CODECS, ids=lambda c: CODEC_NAMES[c])
def test_a_rewrite_changes_the_codec_and_keeps_everything_else(source, target):
    batch = build_v2_batch(RECORDS, base_offset=5, compression=CODEC_NAMES[source],
                           partition_leader_epoch=3, producer=(77, 2, 41))
    out = recompress(batch, target, 1 << 20)
    assert [e.attributes & CODEC_MASK for e in iter_entries(out)] == [target]
    for entry in iter_entries(out):
        validate_entry(memoryview(out), entry)          # a CRC that covers the new bytes
    assert facts(out) == facts(batch)
    assert (out is batch) == (source == target)


def test_only_batches_in_another_codec_are_rewritten():
    plain = build_v2_batch(RECORDS[:1], compression="none")
    gz = build_v2_batch(RECORDS[1:], base_offset=1, compression="gzip")
    out = recompress(plain + gz, TOPIC_CODECS["gzip"], 1 << 20)
    assert out[len(out) - len(gz):] == gz
    assert [e.attributes & CODEC_MASK for e in iter_entries(out)] == [1, 1]
    assert recompress(plain + gz, None, 1 << 20) == plain + gz     # producer: as sent


def test_timestamp_type_and_transactional_bits_survive_a_rewrite():
    flagged = bytearray(build_v2_batch(RECORDS, compression="gzip"))
    flagged[V2_ATTRIBUTES_OFFSET + 1] |= TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK   # low byte
    struct.pack_into(">I", flagged, V2_CRC_OFFSET, crc32c(bytes(flagged[V2_ATTRIBUTES_OFFSET:])))
    out = recompress(bytes(flagged), TOPIC_CODECS["uncompressed"], 1 << 20)
    assert next(iter_entries(out)).attributes == TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK


def test_a_damaged_batch_is_refused_not_given_a_fresh_crc():
    batch = bytearray(build_v2_batch(RECORDS, compression="none"))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        recompress(bytes(batch), TOPIC_CODECS["gzip"], 1 << 20)


def test_a_batch_that_inflates_past_max_message_bytes_is_refused():
    bomb = build_v2_batch([Record(None, bytes(1 << 20))], compression="gzip")
    assert len(bomb) < 4096
    with pytest.raises(RecordTooLargeError):
        recompress(bomb, TOPIC_CODECS["uncompressed"], 64 * 1024)


def test_the_leaders_log_stores_the_topics_codec(tmp_path):
    gz = Log(str(tmp_path / "gz"), TP, LogConfig(compression_type="gzip"))
    as_sent = Log(str(tmp_path / "as-sent"), TP, LogConfig())
    try:
        for lg in (gz, as_sent):
            lg.append_as_leader(build_v2_batch(RECORDS, compression="none"), leader_epoch=1)
        stored = {name: lg.read(0, 1 << 20).to_bytes() for name, lg in (("gz", gz), ("as", as_sent))}
        assert [e.attributes & CODEC_MASK for e in iter_entries(stored["gz"])] == [1]
        assert [e.attributes & CODEC_MASK for e in iter_entries(stored["as"])] == [0]
        assert facts(stored["gz"]) == facts(stored["as"])
    finally:
        gz.close()
        as_sent.close()


def test_topic_and_broker_configs_take_kafkas_values():
    for value in TOPIC_CODECS:
        assert validate_topic_config({"compression.type": value}) == {"compression.type": value}
    with pytest.raises(ConfigError, match="String must be one of: uncompressed, zstd, lz4, snappy, "
                                          "gzip, producer"):
        validate_topic_config({"compression.type": "brotli"})
    with pytest.raises(ValueError):
        LogConfig(compression_type="brotli")


@pytest.mark.parametrize("version, error", [(4, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
                                            (9, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
                                            (10, ErrorCode.NONE)])
def test_a_consumer_below_fetch_v10_is_refused_a_zstd_topic(tmp_path, version, error):
    lg = Log(str(tmp_path / "z"), TP, LogConfig(compression_type="zstd"))
    try:
        p = leader(lg, (1,), replicas=(1, 2))
        p.append_as_leader(build_v2_batch(RECORDS), acks=1)
        plane = DataApis(HostedPartitions({TP: p}, lambda t: True), lambda t: 1000012, FetchSessionCache())
        partition = {"partition": TP.partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                     "log_start_offset": -1, "current_leader_epoch": -1}
        request = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24,
                   "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                   "forgotten_topics_data": [],
                   "topics": [{"topic": TP.topic, "partitions": [partition]}]}
        response = plane.fetch(request, version)
        entry = response["responses"][0]["partitions"][0]
        assert entry["error_code"] == error
        assert bool(entry["records"]) == (error == ErrorCode.NONE)
    finally:
        lg.close()
