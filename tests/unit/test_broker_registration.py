"""Registering over a registration that another session still holds (issue 18, defect 19).

A broker killed and started again at once finds its previous process's registration,
held by a session that lives until it times out.  That one is deleted at once;
one with our address written since this process started (another live process of
this broker) is waited out, and one with another address is a duplicate id.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from kazoo.exceptions import NodeExistsError, NoNodeError

from kafka_ha.broker.registration import BrokerRegistration, DuplicateBrokerId
from kafka_ha.clock import now_ms
from kafka_ha.model import BrokerInfo
from kafka_ha.zk import znodes as zn

OURS, OTHER = 0xA, 0xB
ME = BrokerInfo(3, "127.0.0.1", 9093)


class OneZnode:
    """The part of kazoo that registration uses, holding ``/brokers/ids/3`` only.  A watch on
    a node held by another session stands for that session's expiry: the node goes."""

    def __init__(self, data: bytes | None, owner: int = OTHER) -> None:
        self.node = None if data is None else (data, owner)
        self.client_id = (OURS, b"")
        self.deleted_owners: list[int] = []
        self.expired_owners: list[int] = []

    def add_listener(self, listener) -> None:
        pass

    def create(self, path, data, ephemeral=False):
        if self.node is not None:
            raise NodeExistsError()
        self.node = (data, OURS)

    def get(self, path):
        if self.node is None:
            raise NoNodeError()
        return self.node[0], SimpleNamespace(ephemeralOwner=self.node[1], version=0)

    def delete(self, path, version=-1):
        self.deleted_owners.append(self.node[1])
        self.node = None

    def exists(self, path, watch=None):
        if self.node is not None and self.node[1] != OURS and watch is not None:
            self.expired_owners.append(self.node[1])
            self.node = None
            return None
        return None if self.node is None else SimpleNamespace(ephemeralOwner=self.node[1])


def registration(host: str, port: int, timestamp_ms: int) -> bytes:
    return zn.BrokerIdZNode.encode(BrokerInfo(3, host, port, timestamp_ms=timestamp_ms))


def test_the_registration_of_our_killed_previous_process_is_deleted_at_once():
    zk = OneZnode(registration(ME.host, ME.port, now_ms() - 2000))
    BrokerRegistration(zk, ME, 6000).register()
    assert zk.deleted_owners == [OTHER], "waited for the dead process's session to expire"
    assert zk.expired_owners == []
    assert zk.node[1] == OURS


def test_one_with_our_address_written_since_we_started_is_waited_out_not_deleted():
    zk = OneZnode(None)
    reg = BrokerRegistration(zk, ME, 6000)
    zk.node = (registration(ME.host, ME.port, now_ms() + 1000), OTHER)
    reg.register()
    assert zk.deleted_owners == []
    assert zk.expired_owners == [OTHER]
    assert zk.node[1] == OURS


def test_one_with_another_address_is_a_second_broker_with_our_id():
    zk = OneZnode(registration("10.0.0.9", ME.port, now_ms() - 2000))
    with pytest.raises(DuplicateBrokerId):
        BrokerRegistration(zk, ME, 6000).register()
    assert zk.deleted_owners == []
