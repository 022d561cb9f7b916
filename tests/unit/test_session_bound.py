"""The controller's ZooKeeper retries (kafka_ha/zk/session_bound.py) against a scripted client,
and the controller code that relies on them: a create sent again after a lost reply, and
the one-line report of an event cut short by a session expiry."""

import logging
from collections import deque
from types import SimpleNamespace

import pytest
from kazoo.exceptions import BadVersionError, ConnectionLoss, RolledBackError, SessionExpiredError

from kafka_ha.config import BrokerConfig
from kafka_ha.controller import events as ev
from kafka_ha.controller.context import ControllerContext
from kafka_ha.controller.controller import KafkaController
from kafka_ha.controller.partition_state_machine import PartitionStateMachine
from kafka_ha.controller.request_batch import RequestBatch
from kafka_ha.model import BrokerInfo, LeaderAndIsr, TopicPartition
from kafka_ha.zk.controller_store import ControllerStore
from kafka_ha.zk.errors import (ZkBadVersion, ZkConnectionLost, ZkNodeExists, ZkRolledBack,
                                ZkSessionExpired)
from kafka_ha.zk.mapped_client import SessionState
from kafka_ha.zk import session_bound
from kafka_ha.zk.session_bound import SessionBoundClient
from kafka_ha.zk.state_writes import WriteResult

SESSION = 0x1234


class Answer:
    """A kazoo async result that is already settled."""

    def __init__(self, outcome):
        self.outcome = outcome

    def get(self, block=True, timeout=None):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


class Silence:
    """Script entry: a request whose answer never comes (kazoo lost it); ``then`` runs at
    each wait that times out (to end the session, say)."""

    def __init__(self, then=lambda client: None):
        self.then = then

    def __call__(self, client):
        return self


class NeverAnswered:
    def __init__(self, client, silence):
        self.client, self.silence = client, silence

    def get(self, block=True, timeout=None):
        assert timeout is not None, "a wait without a bound would hang the controller"
        self.silence.then(self.client)
        raise TimeoutError


class ScriptedKazoo:
    """Answers requests from a script, in order; a callable entry runs first (to end the
    session, say) and its return value is the answer."""

    def __init__(self, *script):
        self._session_id = SESSION
        self.script = deque(script)
        self.sent = []
        self.sleeps = []
        self.listeners = []
        self.handler = SimpleNamespace(sleep_func=self.sleeps.append, timeout_exception=TimeoutError)
        self.connected = True

    def add_listener(self, listener):
        self.listeners.append(listener)

    def _answer(self, request):
        self.sent.append(request)
        outcome = self.script.popleft()
        if isinstance(outcome, Silence):
            return NeverAnswered(self, outcome)
        return Answer(outcome(self) if callable(outcome) else outcome)

    def get(self, path, watch=None):
        return self.get_async(path, watch).get()

    def get_async(self, path, watch=None):
        return self._answer(("get", path))

    def transaction(self):
        return ScriptedTransaction(self)


class ScriptedTransaction:
    def __init__(self, client):
        self.client = client
        self.operations = []

    def check(self, path, version):
        self.operations.append(("check", path, version))

    def set_data(self, path, value, version=-1):
        self.operations.append(("set", path, version))

    def commit_async(self):
        return self.client._answer(("multi", tuple(self.operations)))


def expire(client):
    """Script entry: the session ends (kazoo resets its id) and the request fails."""
    client._session_id = None
    return ConnectionLoss()


def test_a_request_lost_with_the_connection_is_sent_again_in_the_same_session():
    kazoo = ScriptedKazoo(ConnectionLoss(), ConnectionLoss(), (b"data", "stat"))
    zk = SessionBoundClient(kazoo)
    assert zk.get("/brokers/ids") == (b"data", "stat")
    assert kazoo.sent == [("get", "/brokers/ids")] * 3
    assert kazoo.sleeps == [0.05, 0.1]
    assert zk.retries == 2


def test_an_answer_that_never_comes_ends_with_the_session_instead_of_hanging(monkeypatch):
    """A request kazoo lost across a session change (seen as a controller whose failover
    never finished at 100k partitions): the wait is bounded and re-checks the session."""
    monkeypatch.setattr(session_bound, "ANSWER_WAIT_SLICE_S", 0.01)
    kazoo = ScriptedKazoo(Silence(then=lambda client: setattr(client, "_session_id", SESSION + 1)))
    with pytest.raises(ZkSessionExpired, match="0x1234"):
        SessionBoundClient(kazoo).get("/brokers/ids")
    kazoo = ScriptedKazoo(Silence(then=lambda client: setattr(client, "_session_id", None)))
    zk = SessionBoundClient(kazoo)
    pending = zk.get_async("/p")
    with pytest.raises(ZkSessionExpired):
        pending.get()


def test_an_answer_lost_in_a_live_session_is_asked_for_again(monkeypatch):
    monkeypatch.setattr(session_bound, "ANSWER_WAIT_SLICE_S", 0.01)
    monkeypatch.setattr(session_bound, "LOST_ANSWER_S", 0.03)
    kazoo = ScriptedKazoo(Silence(), (b"data", "stat"))
    zk = SessionBoundClient(kazoo)
    assert zk.get("/brokers/ids") == (b"data", "stat")
    assert kazoo.sent == [("get", "/brokers/ids")] * 2
    kazoo.script.extend([Silence(), "again"])
    assert zk.get_async("/p").get() == "again"


def test_a_request_is_not_sent_again_once_its_session_has_ended():
    kazoo = ScriptedKazoo(expire, (b"never", "read"))
    with pytest.raises(ZkSessionExpired, match="0x1234"):
        SessionBoundClient(kazoo).get("/brokers/ids")
    assert len(kazoo.sent) == 1


def test_a_session_expiry_reported_by_kazoo_is_not_retried():
    kazoo = ScriptedKazoo(SessionExpiredError(), (b"never", "read"))
    with pytest.raises(ZkSessionExpired):
        SessionBoundClient(kazoo).get("/x")
    assert len(kazoo.sent) == 1


def test_without_a_session_a_connection_loss_is_passed_on():
    kazoo = ScriptedKazoo(ConnectionLoss())
    kazoo._session_id = None
    with pytest.raises(ZkConnectionLost):
        SessionBoundClient(kazoo).get("/x")


def test_a_bound_term_refuses_requests_in_a_later_session_without_sending_them():
    kazoo = ScriptedKazoo((b"a", "s"))
    zk = SessionBoundClient(kazoo)
    zk.bind()
    assert zk.get("/controller") == (b"a", "s")
    kazoo._session_id = SESSION + 1  # kazoo reconnected after an expiry, in a new session
    with pytest.raises(ZkSessionExpired, match="controller's ZooKeeper session 0x1234"):
        zk.get("/controller")
    with pytest.raises(ZkSessionExpired):
        zk.get_async("/controller")
    assert len(kazoo.sent) == 1
    zk.unbind()  # the controller resigned: requests follow the current session again
    kazoo.script.append((b"b", "s"))
    assert zk.get("/controller") == (b"b", "s")


def test_pipelined_requests_all_go_out_before_any_answer_and_each_is_retried_alone():
    kazoo = ScriptedKazoo("one", ConnectionLoss(), "three", "two again")
    zk = SessionBoundClient(kazoo)
    pending = [zk.get_async(f"/p{i}") for i in (1, 2, 3)]
    assert kazoo.sent == [("get", "/p1"), ("get", "/p2"), ("get", "/p3")]
    assert [p.get() for p in pending] == ["one", "two again", "three"]
    assert kazoo.sent[-1] == ("get", "/p2")


def test_a_multi_is_sent_again_whole_as_a_fresh_transaction():
    landed = ["check result", "set result"]
    kazoo = ScriptedKazoo(ConnectionLoss(), landed)
    txn = SessionBoundClient(kazoo).transaction()
    txn.check("/controller_epoch", 4)
    txn.set_data("/brokers/topics/t/partitions/0/state", b"{}", version=7)
    assert txn.commit() == landed
    ops = (("check", "/controller_epoch", 4), ("set", "/brokers/topics/t/partitions/0/state", 7))
    assert kazoo.sent == [("multi", ops), ("multi", ops)]


def test_a_refused_op_of_a_multi_is_reported_as_the_projects_error():
    kazoo = ScriptedKazoo([BadVersionError(), RolledBackError()])
    txn = SessionBoundClient(kazoo).transaction()
    txn.check("/controller_epoch", 4)
    txn.set_data("/brokers/topics/t/partitions/0/state", b"{}", version=7)
    assert [type(r) for r in txn.commit()] == [ZkBadVersion, ZkRolledBack]


def test_session_listeners_hear_the_projects_states():
    heard = []
    kazoo = ScriptedKazoo()
    SessionBoundClient(kazoo).add_session_listener(heard.append)
    for state in ("SUSPENDED", "LOST", "CONNECTED"):  # as kazoo reports them
        kazoo.listeners[0](state)
    assert heard == [SessionState.SUSPENDED, SessionState.LOST, SessionState.CONNECTED]


# ---- the partition state machine: a create whose reply was lost ----------------------------

TP = TopicPartition("t", 0)
EPOCH = 3


class CreateConflictStore:
    """create_states reports a conflict (NodeExists on the resent create); the state read
    back afterwards is ``stored``."""

    def __init__(self, stored):
        self.stored = stored

    def create_states(self, creates):
        return WriteResult(conflicts=list(creates))

    def partition_states(self, partitions):
        return {tp: self.stored for tp in partitions}


def psm_with(stored):
    ctx = ControllerContext()
    ctx.set_assignment(TP, (1, 2))
    ctx.live_brokers = {b: BrokerInfo(b, "h", 9000 + b) for b in (1, 2)}
    return ctx, PartitionStateMachine(ctx, CreateConflictStore(stored), 1, EPOCH)


def test_a_create_that_landed_before_its_reply_was_lost_counts_as_ours():
    ours = LeaderAndIsr(1, 0, (1, 2), EPOCH, zk_version=0)
    ctx, psm = psm_with(ours)
    batch = RequestBatch(1, EPOCH, ctx.live_brokers)
    psm.create([TP], batch)
    assert ctx.states[TP] == ours
    assert {b: set(states) for b, states in batch.leader_and_isr.items()} == {1: {TP}, 2: {TP}}


def test_a_state_created_by_someone_else_is_adopted_without_requests():
    theirs = LeaderAndIsr(2, 0, (2, 1), EPOCH - 1, zk_version=0)
    ctx, psm = psm_with(theirs)
    batch = RequestBatch(1, EPOCH, ctx.live_brokers)
    psm.create([TP], batch)
    assert ctx.states[TP] == theirs
    assert not batch.leader_and_isr


# ---- the controller's report of an event cut short ----------------------------------------

@pytest.fixture
def controller():
    config = BrokerConfig({"broker.id": 1, "zookeeper.connect": "127.0.0.1:1"})
    return KafkaController(config, ControllerStore(ScriptedKazoo(), 1), register_broker=lambda: None)


def test_an_event_cut_short_by_session_expiry_logs_one_warning_without_traceback(controller, caplog):
    with caplog.at_level(logging.DEBUG, logger="kafka_ha.controller"):
        controller._on_error(ev.BrokerChange(), ZkSessionExpired())
    assert [(r.levelname, r.exc_info) for r in caplog.records] == [("WARNING", None)]
    assert "Abandoned BrokerChange: the ZooKeeper session ended" in caplog.text


def test_the_controller_queues_the_end_of_its_session_and_then_the_new_session():
    """A connection that comes back within the session changes nothing; an expiry resigns,
    and the connection after it (a new session) registers and elects again."""
    kazoo = ScriptedKazoo()
    controller = KafkaController(BrokerConfig({"broker.id": 1, "zookeeper.connect": "127.0.0.1:1"}),
                                 ControllerStore(kazoo, 1), register_broker=lambda: None)
    controller.store.add_session_listener(controller._session_listener)  # as start() does
    for state in ("SUSPENDED", "CONNECTED", "SUSPENDED", "LOST", "CONNECTED"):
        kazoo.listeners[0](state)
    queued = []
    while not controller.loop._queue.empty():
        queued.append(controller.loop._queue.get_nowait())
    assert queued == [ev.SessionExpired(), ev.NewSession()]


def test_other_errors_still_log_their_traceback(controller, caplog):
    with caplog.at_level(logging.DEBUG, logger="kafka_ha.controller"):
        controller._on_error(ev.TopicChange(), ZkNodeExists())
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert caplog.records[0].exc_info is not None


def test_the_event_loop_survives_an_error_handler_that_fails():
    from kafka_ha.controller.event_loop import EventLoop
    handled = []

    def fail(event):
        raise ZkConnectionLost()

    def on_error(event, error):
        raise ZkSessionExpired()  # e.g. re-electing after ControllerMoved, session gone

    loop = EventLoop({ev.BrokerChange: fail, ev.TopicChange: handled.append}, on_error)
    loop.start()
    loop.put(ev.BrokerChange())
    loop.put(ev.TopicChange())
    loop.stop()
    assert handled == [ev.TopicChange()] and loop.processed == 2
