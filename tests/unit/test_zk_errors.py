"""The project's ZooKeeper errors (kafka_ha/zk/errors.py): what each of the client
library's errors becomes, the names log lines print, and the controller's retry of the
broker registration, which the broker's store fails with the project's errors."""

from types import SimpleNamespace

import pytest
from kazoo.exceptions import (BadVersionError, ConnectionClosedError, ConnectionLoss,
                              DataInconsistency, KazooException, NodeExistsError, NoNodeError,
                              NotEmptyError, OperationTimeoutError, RolledBackError,
                              RuntimeInconsistency, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError

from kafka_ha.admin.cli import error_message
from kafka_ha.zk.errors import (ZkBadVersion, ZkConnectionLost, ZkError, ZkNodeExists, ZkNoNode,
                                ZkNotEmpty, ZkRolledBack, ZkSessionExpired, ZkTimeout,
                                ZkUnavailable, error_text, translated, translated_error)
from kafka_ha.zk.session_bound import SessionBoundClient


@pytest.mark.parametrize("theirs, ours", [
    (NoNodeError(), ZkNoNode), (NodeExistsError(), ZkNodeExists),
    (BadVersionError(), ZkBadVersion), (NotEmptyError(), ZkNotEmpty),
    (RolledBackError(), ZkRolledBack), (RuntimeInconsistency(), ZkRolledBack),
    (ConnectionLoss(), ZkConnectionLost), (SessionExpiredError(), ZkSessionExpired),
    (ConnectionClosedError("Connection has been closed"), ZkSessionExpired),
    (OperationTimeoutError(), ZkTimeout), (KazooTimeoutError("Connection time-out"), ZkTimeout),
    (DataInconsistency(), ZkError),
])
def test_each_client_error_becomes_the_projects_and_keeps_its_name(theirs, ours):
    with pytest.raises(ours) as raised:
        with translated():
            raise theirs
    assert type(raised.value) is ours and raised.value.__cause__ is theirs
    assert error_text(raised.value) == error_text(theirs)  # log lines read as before
    assert str(raised.value) == str(theirs)


def test_the_unavailable_ones_are_one_family_for_the_tools():
    for error in (ConnectionLoss(), SessionExpiredError(), KazooTimeoutError("x")):
        assert isinstance(translated_error(error), ZkUnavailable)
    assert not isinstance(translated_error(NoNodeError()), ZkUnavailable)
    assert error_message(translated_error(ConnectionLoss())) == \
        "ZooKeeper is unavailable (ConnectionLoss)"


def test_other_errors_pass_unchanged():
    error = ValueError("not ZooKeeper's")
    with pytest.raises(ValueError) as raised:
        with translated():
            raise error
    assert raised.value is error
    assert translated_error(translated_error(NoNodeError())).__class__ is ZkNoNode


def test_the_controller_runs_the_registration_again_after_its_connection_loss():
    """The controller runs the broker registration (BrokerStore requests) inside its
    SessionBoundClient, which sends again what failed with a lost connection."""
    client = SimpleNamespace(_session_id=7, handler=SimpleNamespace(sleep_func=lambda _s: None))
    attempts = []

    def register():
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise ZkConnectionLost()
        return "registered"
    assert SessionBoundClient(client).call("the broker registration", register) == "registered"
    assert attempts == [0, 1]


def test_the_projects_errors_are_not_the_client_librarys():
    """Nothing outside kafka_ha.zk catches kazoo's types, so nothing may depend on them."""
    for ours in (ZkNoNode, ZkNodeExists, ZkBadVersion, ZkNotEmpty, ZkRolledBack,
                 ZkConnectionLost, ZkSessionExpired, ZkTimeout):
        assert not issubclass(ours, (KazooException, KazooTimeoutError)), ours
