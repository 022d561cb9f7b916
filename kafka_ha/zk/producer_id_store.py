"""Claiming blocks of producer ids through ``/latest_producer_id_block`` (InitProducerId).

As Kafka's ProducerIdManager: read the last claimed block and its znode
version, write the next block with a write conditional on that version, and
start over when another broker wrote first (ZkBadVersion).  Every broker may
claim blocks, so ids stay unique across the cluster without a coordinator.
"""
from __future__ import annotations

import logging

from kazoo.client import KazooClient

from kafka_ha.zk.errors import ZkBadVersion, ZkNodeExists, ZkNoNode
from kafka_ha.zk.mapped_client import MappedClient
from kafka_ha.zk.producer_id_znodes import (PRODUCER_ID_BLOCK_SIZE, ProducerIdBlock,
                                            ProducerIdBlockZNode, next_block)

log = logging.getLogger(__name__)
MAX_CLAIM_ATTEMPTS = 50   # conflicts mean other brokers claim at the same time: each try is one round trip


class ProducerIdBlockStore:
    def __init__(self, client: KazooClient | MappedClient) -> None:
        self.zk = client if isinstance(client, MappedClient) else MappedClient(client)

    def claim_next_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """Claim the block after the last one claimed; raises ZkError (ZooKeeper),
        MalformedZnode (the node holds something else) or ValueError (ids exhausted)."""
        path = ProducerIdBlockZNode.PATH
        for _ in range(MAX_CLAIM_ATTEMPTS):
            try:
                data, stat = self.zk.get(path)
            except ZkNoNode:
                block = next_block(None, broker_id, size)
                try:
                    self.zk.create(path, ProducerIdBlockZNode.encode(block), makepath=True)
                except ZkNodeExists:
                    continue
                return self._claimed(block, 0)
            block = next_block(ProducerIdBlockZNode.decode(data, path), broker_id, size)
            try:
                written = self.zk.set(path, ProducerIdBlockZNode.encode(block), version=stat.version)
            except ZkBadVersion:
                log.debug("Another broker claimed a producer id block first; reading %s again", path)
                continue
            return self._claimed(block, written.version)
        raise ZkBadVersion(f"{path}: no block claimed after {MAX_CLAIM_ATTEMPTS} conflicting writes")

    @staticmethod
    def _claimed(block: ProducerIdBlock, version: int) -> ProducerIdBlock:
        # Kafka's ProducerIdManager logs the same line.
        log.info("Acquired new producerId block (brokerId:%d,blockStartProducerId:%d,"
                 "blockEndProducerId:%d) by writing to Zk with path version %d", block.broker_id,
                 block.first, block.last, version)
        return block
