"""Produce v3+ and InitProducerId on a leader: a real Partition over a real Log behind
the DataApis, no network."""
import pytest

from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.hosted_partitions import HostedPartitions
from kafka_ha.broker.producer_ids import InitProducerIdApi, ProducerIdManager
from kafka_ha.protocol.api import REQUEST_SCHEMAS, RESPONSE_SCHEMAS, ApiKey
from kafka_ha.protocol.deferred import resolved
from kafka_ha.protocol.errors import ErrorCode as E
from kafka_ha.records import Record, build_v2_batch
from kafka_ha.records.builder import build_legacy_message_set
from kafka_ha.records.format import TRANSACTIONAL_MASK, V2_ATTRIBUTES_OFFSET
from kafka_ha.zk.errors import ZkConnectionLost
from kafka_ha.zk.producer_id_znodes import ProducerIdBlock, next_block
from tests.harness.leader_setup import TP, leader, open_log


@pytest.fixture
def plane(tmp_path):
    log_ = open_log(tmp_path)
    p = leader(log_, isr=(1,))
    yield DataApis(HostedPartitions({TP: p}, lambda t: True), lambda t: 1000012), p
    log_.close()


def produce(plane, records, version=7, transactional_id=None, acks=-1):
    """One Produce request through its wire schema; the partition's answer."""
    request = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 5000,
               "topic_data": [{"name": TP.topic, "partition_data": [{"index": 0, "records": records}]}]}
    schema = REQUEST_SCHEMAS[(ApiKey.PRODUCE, version)]
    response = resolved(plane.produce(schema.from_bytes(schema.to_bytes(request)), version))
    RESPONSE_SCHEMAS[(ApiKey.PRODUCE, version)].to_bytes(response)     # encodes at its version
    return response["responses"][0]["partition_responses"][0]


def batch(seq, n=3, pid=1000, epoch=0):
    return build_v2_batch([Record(None, b"%d" % (seq + i)) for i in range(n)], producer=(pid, epoch, seq))


def test_a_retried_batch_is_answered_with_its_first_offset_and_not_appended(plane):
    apis, partition = plane
    assert produce(apis, batch(0))["base_offset"] == 0
    assert produce(apis, batch(3))["base_offset"] == 3
    retry = produce(apis, batch(0))
    assert (retry["error_code"], retry["base_offset"]) == (E.NONE, 0)
    assert partition.log.log_end_offset == 6


def test_a_damaged_retry_is_refused_not_taken_for_the_batch_it_repeats(plane):
    apis, partition = plane
    assert produce(apis, batch(0))["error_code"] == E.NONE
    damaged = bytearray(batch(0))
    damaged[-1] ^= 0xFF                                  # a record byte: the CRC no longer matches
    assert produce(apis, bytes(damaged))["error_code"] == E.CORRUPT_MESSAGE
    assert partition.log.log_end_offset == 3


def test_a_sequence_gap_an_unknown_producer_and_a_fenced_epoch_get_their_errors(plane):
    apis, partition = plane
    assert produce(apis, batch(0, epoch=1))["error_code"] == E.NONE
    gap = produce(apis, batch(7, epoch=1))
    assert gap["error_code"] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert gap["log_start_offset"] == 0          # v5+: given with the error too
    assert produce(apis, batch(5, pid=2000))["error_code"] == E.UNKNOWN_PRODUCER_ID
    assert produce(apis, batch(3, epoch=0))["error_code"] == E.INVALID_PRODUCER_EPOCH
    assert partition.log.log_end_offset == 3


def test_produce_v3_takes_exactly_one_magic_2_batch(plane):
    apis, partition = plane
    legacy = build_legacy_message_set([Record(None, b"v")], magic=1)
    assert produce(apis, legacy, version=3)["error_code"] == E.INVALID_RECORD
    assert produce(apis, batch(0) + batch(3), version=3)["error_code"] == E.INVALID_RECORD
    assert produce(apis, legacy, version=2)["error_code"] == E.NONE      # converted, as before
    assert partition.log.log_end_offset == 1


def test_transactional_writes_are_refused(plane):
    apis, partition = plane
    assert produce(apis, batch(0), transactional_id="tx")["error_code"] == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    transactional = bytearray(batch(0))
    transactional[V2_ATTRIBUTES_OFFSET + 1] |= TRANSACTIONAL_MASK    # (the CRC is not checked first)
    assert produce(apis, bytes(transactional))["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert partition.log.log_end_offset == 0


@pytest.mark.parametrize("version", range(0, 8))
def test_every_produce_version_round_trips_its_answer(plane, version):
    apis, _ = plane
    records = batch(0) if version >= 3 else build_v2_batch([Record(None, b"v")])
    answer = produce(apis, records, version=version)
    assert answer["error_code"] == E.NONE
    assert ("log_start_offset" in answer) == (version >= 5)


# ---- InitProducerId ----------------------------------------------------------------


class Blocks:
    """Claims blocks as ZooKeeper would hand them out, or fails as told."""

    def __init__(self, size=3):
        self.last, self.size, self.failure = None, size, None

    def claim(self, broker_id):
        if self.failure:
            raise self.failure
        self.last = next_block(self.last, broker_id, self.size)
        return self.last


def init(api, transactional_id=None):
    schema = REQUEST_SCHEMAS[(ApiKey.INIT_PRODUCER_ID, 1)]
    request = schema.from_bytes(schema.to_bytes({"transactional_id": transactional_id,
                                                 "transaction_timeout_ms": 60000}))
    response = api.handle(request, 1)
    RESPONSE_SCHEMAS[(ApiKey.INIT_PRODUCER_ID, 1)].to_bytes(response)
    return response["error_code"], response["producer_id"], response["producer_epoch"]


def test_init_producer_id_hands_out_ids_block_by_block():
    blocks = Blocks(size=3)
    api = InitProducerIdApi(ProducerIdManager(1, blocks.claim))
    assert [init(api) for _ in range(4)] == [(E.NONE, i, 0) for i in range(4)]
    assert blocks.last == ProducerIdBlock(1, 3, 5)


def test_init_producer_id_errors():
    blocks = Blocks()
    api = InitProducerIdApi(ProducerIdManager(1, blocks.claim))
    assert init(api, "tx") == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
    assert init(api, "") == (E.INVALID_REQUEST, -1, -1)
    blocks.failure = ZkConnectionLost("connection lost")
    assert init(api) == (E.COORDINATOR_NOT_AVAILABLE, -1, -1)
    blocks.failure = ValueError("producer ids are exhausted")
    assert init(api) == (E.UNKNOWN_SERVER_ERROR, -1, -1)
    blocks.failure = None
    assert init(api) == (E.NONE, 0, 0)
