"""IsrWriter against a fake ZooKeeper client: writes whose outcome is unknown (defect 4) and
writes that belong to an earlier leader epoch (defect 13), with a real Partition and Log."""
import types

import gevent
import pytest
from gevent.event import Event
from kazoo.exceptions import BadVersionError, ConnectionLoss, NoNodeError

from kafka_ha.broker.isr_writer import IsrWriter
from kafka_ha.model import LeaderAndIsr
from kafka_ha.zk import znodes as zn
from tests.harness.leader_setup import LEADER, TP, batch, leader, open_log, state

PATH = zn.TopicPartitionStateZNode.path(*TP)
NOW = 10_000


class FakeZk:
    """The calls IsrWriter makes on a KazooClient, over one dict of znodes.

    ``lose_connection`` ("before" or "after" applying) makes the next ``set`` raise
    ConnectionLoss, as kazoo does when the connection drops with the request in flight;
    the connection then stays down until ``reconnect()``.  With ``hold_responses``,
    each ``set`` is applied but answers only when the test ``release()``s it.
    """

    def __init__(self):
        self.nodes = {}              # path -> (data, version)
        self.connected = True
        self.lose_connection = None
        self.hold_responses = False
        self.held = []               # Events of the held answers, oldest first
        self.writes = []             # (path, LeaderAndIsr) of every applied set
        self.notifications = []

    def put(self, path, value: LeaderAndIsr):
        """Someone else (the controller) writes the znode."""
        _, version = self.nodes.get(path, (b"", -1))
        self.nodes[path] = (zn.TopicPartitionStateZNode.encode(value), version + 1)

    def read(self, path):
        data, version = self.nodes[path]
        return zn.TopicPartitionStateZNode.decode(data, path, version)

    def reconnect(self):
        self.connected = True

    def release(self):
        self.held.pop(0).set()

    def set(self, path, value, version=-1):
        if not self.connected:
            raise ConnectionLoss()
        fault, self.lose_connection = self.lose_connection, None
        if fault == "before":
            self.connected = False
            raise ConnectionLoss()
        if path not in self.nodes:
            raise NoNodeError()
        _, current = self.nodes[path]
        if version != -1 and version != current:
            raise BadVersionError()
        self.nodes[path] = (value, current + 1)
        self.writes.append((path, zn.TopicPartitionStateZNode.decode(value, path, current + 1)))
        if fault == "after":
            self.connected = False
            raise ConnectionLoss()
        if self.hold_responses:
            answered = Event()
            self.held.append(answered)
            answered.wait()
        return types.SimpleNamespace(version=current + 1)

    def get(self, path):
        if not self.connected:
            raise ConnectionLoss()
        if path not in self.nodes:
            raise NoNodeError()
        data, version = self.nodes[path]
        return data, types.SimpleNamespace(version=version)

    def create(self, path, value=b"", sequence=False, makepath=False):
        self.notifications.append(value)
        return path


@pytest.fixture
def log_(tmp_path):
    lg = open_log(tmp_path)
    yield lg
    lg.close()


@pytest.fixture
def zk():
    return FakeZk()


@pytest.fixture
def writer(zk):
    w = IsrWriter(zk, LEADER)
    yield w
    w.stop()


def led(log_, zk, writer, isr=(1, 2, 3), epoch=1, zk_version=0):
    """Broker 1 leads TP at ``epoch`` with ``isr``, as the controller wrote it at ``zk_version``."""
    zk.nodes.pop(PATH, None)
    for _ in range(zk_version + 1):
        zk.put(PATH, LeaderAndIsr(LEADER, epoch, isr, 1))
    p = leader(log_, isr, writer=writer, epoch=epoch)
    assert p.zk_version == zk_version
    return p


def eventually(condition, timeout_s=10.0):
    """Let the writer's greenlets run until ``condition()`` holds."""
    with gevent.Timeout(timeout_s, AssertionError("condition not met")):
        while not condition():
            gevent.sleep(0.01)


# ---- a write whose outcome is unknown (defect 4) ------------------------------------------

def test_a_write_applied_before_a_connection_loss_is_adopted_when_the_connection_is_back(
        log_, zk, writer):
    """The ISR change went through, the answer was lost: once reconnected, the writer
    reads the znode, finds its own write and adopts its version, so the next change
    does not conflict with it (it used to, until the next LeaderAndIsr)."""
    p = led(log_, zk, writer)
    zk.lose_connection = "after"
    assert not writer.remove(p, [3], "follower 3 lags")
    assert zk.read(PATH).isr == (1, 2) and p.zk_version == 0
    zk.reconnect()
    eventually(lambda: p.zk_version == 1)
    assert p.isr == (1, 2)
    assert writer.remove(p, [2], "follower 2 lags")
    assert (zk.read(PATH).isr, zk.read(PATH).zk_version, p.isr, p.zk_version) == ((1,), 2, (1,), 2)


def test_while_the_outcome_is_unknown_no_write_goes_out(log_, zk, writer):
    """Until the znode could be read again, a write conditional on the cached version
    would only conflict: the next change reads first, and waits for the connection."""
    p = led(log_, zk, writer)
    zk.lose_connection = "after"
    writer.remove(p, [3], "follower 3 lags")
    assert not writer.remove(p, [2], "follower 2 lags")
    assert len(zk.writes) == 1
    zk.reconnect()
    assert writer.remove(p, [2], "follower 2 lags")
    assert (zk.read(PATH).isr, p.isr, p.zk_version) == ((1,), (1,), 2)


def test_a_write_lost_before_it_was_applied_is_retried_as_it_was(log_, zk, writer):
    p = led(log_, zk, writer)
    zk.lose_connection = "before"
    assert not writer.remove(p, [3], "follower 3 lags")
    zk.reconnect()
    assert writer.remove(p, [3], "follower 3 lags")
    assert (zk.read(PATH).isr, p.isr, p.zk_version) == ((1, 2), (1, 2), 1)


def test_a_znode_the_controller_changed_meanwhile_is_not_adopted(log_, zk, writer):
    """After the loss the controller wrote a new leadership: the leader keeps what it has
    and waits for the controller's LeaderAndIsr, as on any version conflict."""
    p = led(log_, zk, writer)
    zk.lose_connection = "after"
    writer.remove(p, [3], "follower 3 lags")
    zk.put(PATH, LeaderAndIsr(2, 2, (2, 3), 1))
    zk.reconnect()
    assert not writer.remove(p, [2], "follower 2 lags")
    assert (p.isr, p.zk_version) == ((1, 2, 3), 0)
    assert zk.read(PATH).leader == 2


def test_a_follower_whose_expansion_is_in_doubt_keeps_counting_for_the_hw(log_, zk, writer):
    """ZooKeeper may list follower 3 in the ISR already (an election could pick it), so the
    HW must not pass what 3 holds until the re-read tells: it stays in ``joining``."""
    p = led(log_, zk, writer, isr=(1, 2))
    p.append_as_leader(batch(), acks=1)
    zk.lose_connection = "after"
    p.on_follower_fetch(3, 0, NOW)
    eventually(lambda: zk.writes)
    gevent.sleep(0.05)
    p.on_follower_fetch(2, p.log.log_end_offset, NOW + 1)
    assert p.joining == {3} and p.high_watermark == 0
    zk.reconnect()
    eventually(lambda: p.isr == (1, 2, 3))
    assert not p.joining and p.zk_version == 1


# ---- writes of an earlier leader epoch (defect 13) ----------------------------------------

def test_a_write_answered_after_a_new_leader_epoch_does_not_set_the_isr(log_, zk, writer):
    """The leader's shrink went through, then the controller bumped the epoch (it dropped
    broker 2) and its LeaderAndIsr arrived before the write's answer: the partition keeps
    the ISR and zkVersion of its current epoch."""
    p = led(log_, zk, writer)
    zk.hold_responses = True
    shrink = gevent.spawn(writer.remove, p, [3], "follower 3 lags")
    eventually(lambda: zk.held)
    zk.put(PATH, LeaderAndIsr(LEADER, 2, (1,), 1))
    p.make_leader(state((1,), epoch=2, zk_version=2))
    zk.release()
    shrink.get()
    assert (p.leader_epoch, p.isr, p.zk_version) == (2, (1,), 2)


def test_an_expansion_decided_in_an_earlier_epoch_is_not_written(log_, zk, writer):
    """Follower 3 caught up at epoch 1; before the write ran, epoch 2 began with ISR {1}:
    3's epoch-1 position says nothing about epoch 2 (and 2 is not in the ISR any more)."""
    p = led(log_, zk, writer, isr=(1, 2))
    p.append_as_leader(batch(), acks=1)
    p.on_follower_fetch(3, p.log.log_end_offset, NOW)
    zk.put(PATH, LeaderAndIsr(LEADER, 2, (1,), 1))
    p.make_leader(state((1,), epoch=2, zk_version=1))
    gevent.sleep(0.05)
    assert zk.writes == [] and (p.isr, p.zk_version) == ((1,), 1)


def test_an_earlier_epochs_expansion_does_not_end_this_epochs(log_, zk, writer):
    """Follower 3 joins at epoch 1 (write in flight), then again at epoch 2: the end of the
    epoch-1 write must not take 3 out of the joining set while the epoch-2 write is still
    in flight, or the HW could pass what 3 holds before it is in the ISR."""
    p = led(log_, zk, writer, isr=(1, 2))
    zk.hold_responses = True
    p.on_follower_fetch(3, 0, NOW)
    eventually(lambda: zk.held)
    zk.put(PATH, LeaderAndIsr(LEADER, 2, (1, 2), 1))
    p.make_leader(state((1, 2), epoch=2, zk_version=2))
    p.on_follower_fetch(3, 0, NOW + 1)
    assert p.joining == {3}
    zk.release()                      # the epoch-1 write ends
    eventually(lambda: len(zk.held) == 1)   # the epoch-2 write is in flight
    assert p.joining == {3}
    zk.release()
    eventually(lambda: p.isr == (1, 2, 3))
    assert not p.joining and p.zk_version == 3 and zk.read(PATH).leader_epoch == 2


def test_set_isr_ignores_an_earlier_epoch(log_, zk, writer):
    p = led(log_, zk, writer)
    p.make_leader(state((1, 2), epoch=2, zk_version=4))
    assert not p.set_isr((1, 2, 3), 1, leader_epoch=1)
    assert (p.isr, p.zk_version) == ((1, 2), 4)
    assert p.set_isr((1,), 5, leader_epoch=2)
    assert (p.isr, p.zk_version) == ((1,), 5)
