"""Broker registration (kafka_ha/broker/registration.py) on a store that is not connected."""

import pytest

from kafka_ha.broker.registration import BrokerRegistration
from kafka_ha.model import BrokerInfo
from kafka_ha.zk.errors import ZkConnectionLost


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
