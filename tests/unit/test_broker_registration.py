"""Broker registration (kafka_ha/broker/registration.py) against stand-in stores."""

from dataclasses import replace

import pytest

from kafka_ha.broker.registration import BrokerRegistration, DuplicateBrokerId
from kafka_ha.clock import now_ms
from kafka_ha.model import BrokerInfo
from kafka_ha.zk.broker_store import Registration
from kafka_ha.zk.errors import ZkConnectionLost, ZkNodeExists


class DisconnectedStore:
    """A BrokerStore between two connections: no current session."""

    session_id = None
    connected = False

    def on_connected(self, callback):
        pass

    def create_registration(self, info):
        raise AssertionError("a registration needs a session to belong to")


def test_registering_while_disconnected_is_a_connection_loss():
    """A connection loss is what the controller's registration call sends again once
    reconnected (this used to be a TypeError, which ended the controller's event)."""
    registration = BrokerRegistration(DisconnectedStore(), BrokerInfo(1, "h", 9092), 6000)
    with pytest.raises(ZkConnectionLost, match="broker 1"):
        registration.register()


# ---- a registration another session still holds (issue 18, defect 19) ----------------
#
# A broker killed and started again at once finds its previous process's registration,
# held by a session that lives until it times out.  That one is deleted at once; one
# with our address written since this process started (another live process of this
# broker) is waited out, and one with another address is a duplicate id.

OURS, OTHER = 0xA, 0xB
CZXID = 0x1234
ME = BrokerInfo(3, "127.0.0.1", 9093)


class OneRegistration:
    """The BrokerStore calls registration makes, holding ``/brokers/ids/3`` only.  A watch
    on a node held by another session stands for that session's expiry: the node goes."""

    session_id = OURS
    connected = True

    def __init__(self, info=None, owner=OTHER):
        self.node = None if info is None else (info, owner)
        self.deleted_owners, self.expired_owners = [], []

    def on_connected(self, callback):
        pass

    def create_registration(self, info):
        if self.node is not None:
            raise ZkNodeExists("/brokers/ids/3")
        self.node = (replace(info, epoch=CZXID), OURS)   # read back with the node's czxid

    def registration(self, broker_id):
        if self.node is None:
            return None
        return Registration(self.node[0], self.node[1], 0)

    def delete_registration(self, broker_id, version):
        self.deleted_owners.append(self.node[1])
        self.node = None

    def watch_registration(self, broker_id, watch):
        if self.node is not None and self.node[1] != OURS:
            self.expired_owners.append(self.node[1])
            self.node = None
            return False
        return self.node is not None


def test_the_registration_of_our_killed_previous_process_is_deleted_at_once():
    store = OneRegistration(replace(ME, timestamp_ms=now_ms() - 2000))
    BrokerRegistration(store, ME, 6000).register()
    assert store.deleted_owners == [OTHER], "waited for the dead process's session to expire"
    assert store.expired_owners == []
    assert store.node[1] == OURS


def test_one_with_our_address_written_since_we_started_is_waited_out_not_deleted():
    store = OneRegistration()
    reg = BrokerRegistration(store, ME, 6000)
    store.node = (replace(ME, timestamp_ms=now_ms() + 1000), OTHER)
    reg.register()
    assert store.deleted_owners == []
    assert store.expired_owners == [OTHER]
    assert store.node[1] == OURS


def test_one_with_another_address_is_a_second_broker_with_our_id():
    store = OneRegistration(BrokerInfo(3, "10.0.0.9", ME.port, timestamp_ms=now_ms() - 2000))
    with pytest.raises(DuplicateBrokerId):
        BrokerRegistration(store, ME, 6000).register()
    assert store.deleted_owners == []


def test_the_broker_epoch_is_the_czxid_of_our_registration_and_waits_for_it():
    """KIP-380: the broker's request guard compares the broker epoch a controller request
    names with this one; until the broker has registered there is none."""
    reg = BrokerRegistration(OneRegistration(), ME, 6000)
    assert reg.wait_for_epoch(0.01) is None
    reg.register()
    assert reg.wait_for_epoch(0) == CZXID
