"""Producer id blocks claimed through /latest_producer_id_block (in-memory ZooKeeper)."""
import pytest

from kafka_ha.zk.errors import MalformedZnode
from kafka_ha.zk.producer_id_store import ProducerIdBlockStore
from kafka_ha.zk.producer_id_znodes import ProducerIdBlock, ProducerIdBlockZNode
from kafka_ha.zk.schemas import validate_znode
from kafka_ha.zk.znodes import LATEST_PRODUCER_ID_BLOCK_PATH as PATH
from tests.harness.fake_kazoo import FakeKazooClient
from tests.harness.fake_zookeeper import FakeZooKeeper


def test_blocks_follow_each_other_across_brokers_from_an_empty_node():
    zk = FakeZooKeeper()
    one, two = FakeKazooClient.on(zk), FakeKazooClient.on(zk)
    one.ensure_path(PATH)                                  # as every broker creates it, empty
    assert ProducerIdBlockStore(one).claim_next_block(1) == ProducerIdBlock(1, 0, 999)
    assert ProducerIdBlockStore(two).claim_next_block(2) == ProducerIdBlock(2, 1000, 1999)
    data, _ = one.get(PATH)
    assert data == b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    validate_znode("producer_id_block", data)


def test_a_missing_node_is_created():
    client = FakeKazooClient.on(FakeZooKeeper())
    assert ProducerIdBlockStore(client).claim_next_block(3) == ProducerIdBlock(3, 0, 999)


def test_a_conflicting_write_is_retried_on_what_the_other_broker_wrote():
    zk = FakeZooKeeper()
    client, other = FakeKazooClient.on(zk), FakeKazooClient.on(zk)
    client.ensure_path(PATH)
    store = ProducerIdBlockStore(client)
    real_get = store.zk.get
    raced = []

    def get_then_lose_the_race(path, watch=None):
        got = real_get(path, watch)
        if not raced:          # another broker claims a block between our read and our write
            raced.append(1)
            other.set(PATH, ProducerIdBlockZNode.encode(ProducerIdBlock(2, 0, 999)))
        return got
    store.zk.get = get_then_lose_the_race
    assert store.claim_next_block(1) == ProducerIdBlock(1, 1000, 1999)


def test_a_malformed_block_is_a_clear_error():
    client = FakeKazooClient.on(FakeZooKeeper())
    client.create(PATH, b'{"version":1,"broker":1,"block_start":0,"block_end":"999"}')
    with pytest.raises(MalformedZnode, match="block_start"):
        ProducerIdBlockStore(client).claim_next_block(1)
