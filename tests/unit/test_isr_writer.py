"""IsrWriter against a fake of the broker's store: writes whose outcome is unknown (defect 4) and
writes that belong to an earlier leader epoch (defect 13), with a real Partition and Log."""
import gevent
import pytest
from gevent.event import Event

from kafka_ha.broker.isr_writer import IsrWriter
from kafka_ha.model import LeaderAndIsr
from kafka_ha.protocol.errors import ErrorCode, KafkaProtocolError
from kafka_ha.zk.errors import ZkBadVersion, ZkConnectionLost, ZkNoNode
from tests.harness.leader_setup import LEADER, TP, batch, leader, open_log, state

NOW = 10_000


class FakeStateStore:
    """The part of BrokerStore that IsrWriter uses, over one dict of partition states.

    ``lose_connection`` ("before" or "after" applying) makes the next write raise
    ZkConnectionLost, as the store does when the connection drops with the request in
    flight; the connection then stays down until ``reconnect()``.  With
    ``hold_responses``, each write is applied but answers only when the test
    ``release()``s it.
    """

    def __init__(self):
        self.states = {}             # tp -> LeaderAndIsr, with its znode version
        self.connected = True
        self.lose_connection = None
        self.hold_responses = False
        self.held = []               # Events of the held answers, oldest first
        self.writes = []             # (tp, LeaderAndIsr) of every applied write
        self.notifications = []

    def put(self, tp, value: LeaderAndIsr):
        """Someone else (the controller) writes the state."""
        version = self.states[tp].zk_version + 1 if tp in self.states else 0
        self.states[tp] = value.with_zk_version(version)

    def read(self, tp):
        return self.states[tp]

    def reconnect(self):
        self.connected = True

    def release(self):
        self.held.pop(0).set()

    def write_partition_state(self, tp, value: LeaderAndIsr, version: int) -> int:
        if not self.connected:
            raise ZkConnectionLost()
        fault, self.lose_connection = self.lose_connection, None
        if fault == "before":
            self.connected = False
            raise ZkConnectionLost()
        if tp not in self.states:
            raise ZkNoNode()
        current = self.states[tp].zk_version
        if version != current:
            raise ZkBadVersion()
        self.states[tp] = value.with_zk_version(current + 1)
        self.writes.append((tp, self.states[tp]))
        if fault == "after":
            self.connected = False
            raise ZkConnectionLost()
        if self.hold_responses:
            answered = Event()
            self.held.append(answered)
            answered.wait()
        return current + 1

    def partition_state(self, tp) -> LeaderAndIsr:
        if not self.connected:
            raise ZkConnectionLost()
        if tp not in self.states:
            raise ZkNoNode()
        return self.states[tp]

    def notify_isr_change(self, partitions):
        self.notifications.append(list(partitions))
        return "/isr_change_notification/isr_change_0000000000"


@pytest.fixture
def log_(tmp_path):
    lg = open_log(tmp_path)
    yield lg
    lg.close()


@pytest.fixture
def store():
    return FakeStateStore()


@pytest.fixture
def writer(store):
    w = IsrWriter(store, LEADER)
    yield w
    w.stop()


def led(log_, store, writer, isr=(1, 2, 3), epoch=1, zk_version=0):
    """Broker 1 leads TP at ``epoch`` with ``isr``, as the controller wrote it at ``zk_version``."""
    store.states.pop(TP, None)
    for _ in range(zk_version + 1):
        store.put(TP, LeaderAndIsr(LEADER, epoch, isr, 1))
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
        log_, store, writer):
    """The ISR change went through, the answer was lost: once reconnected, the writer
    reads the znode, finds its own write and adopts its version, so the next change
    does not conflict with it (it used to, until the next LeaderAndIsr)."""
    p = led(log_, store, writer)
    store.lose_connection = "after"
    assert not writer.remove(p, [3], "follower 3 lags")
    assert store.read(TP).isr == (1, 2) and p.zk_version == 0
    store.reconnect()
    eventually(lambda: p.zk_version == 1)
    assert p.isr == (1, 2)
    assert writer.remove(p, [2], "follower 2 lags")
    assert (store.read(TP).isr, store.read(TP).zk_version, p.isr, p.zk_version) == ((1,), 2, (1,), 2)


def test_while_the_outcome_is_unknown_no_write_goes_out(log_, store, writer):
    """Until the znode could be read again, a write conditional on the cached version
    would only conflict: the next change reads first, and waits for the connection."""
    p = led(log_, store, writer)
    store.lose_connection = "after"
    writer.remove(p, [3], "follower 3 lags")
    assert not writer.remove(p, [2], "follower 2 lags")
    assert len(store.writes) == 1
    store.reconnect()
    assert writer.remove(p, [2], "follower 2 lags")
    assert (store.read(TP).isr, p.isr, p.zk_version) == ((1,), (1,), 2)


def test_a_write_lost_before_it_was_applied_is_retried_as_it_was(log_, store, writer):
    p = led(log_, store, writer)
    store.lose_connection = "before"
    assert not writer.remove(p, [3], "follower 3 lags")
    store.reconnect()
    assert writer.remove(p, [3], "follower 3 lags")
    assert (store.read(TP).isr, p.isr, p.zk_version) == ((1, 2), (1, 2), 1)


def test_a_znode_the_controller_changed_meanwhile_is_not_adopted(log_, store, writer):
    """After the loss the controller wrote a new leadership: the leader keeps what it has
    and waits for the controller's LeaderAndIsr, as on any version conflict."""
    p = led(log_, store, writer)
    store.lose_connection = "after"
    writer.remove(p, [3], "follower 3 lags")
    store.put(TP, LeaderAndIsr(2, 2, (2, 3), 1))
    store.reconnect()
    assert not writer.remove(p, [2], "follower 2 lags")
    assert (p.isr, p.zk_version) == ((1, 2, 3), 0)
    assert store.read(TP).leader == 2


def test_a_follower_whose_expansion_is_in_doubt_keeps_counting_for_the_hw(log_, store, writer):
    """ZooKeeper may list follower 3 in the ISR already (an election could pick it), so the
    HW must not pass what 3 holds until the re-read tells: it stays in ``joining``."""
    p = led(log_, store, writer, isr=(1, 2))
    p.append_as_leader(batch(), acks=1)
    store.lose_connection = "after"
    p.on_follower_fetch(3, 0, NOW)
    eventually(lambda: store.writes)
    gevent.sleep(0.05)
    p.on_follower_fetch(2, p.log.log_end_offset, NOW + 1)
    assert p.joining == {3} and p.high_watermark == 0
    store.reconnect()
    eventually(lambda: p.isr == (1, 2, 3))
    assert not p.joining and p.zk_version == 1


# ---- writes of an earlier leader epoch (defect 13) ----------------------------------------

def test_a_write_answered_after_a_new_leader_epoch_does_not_set_the_isr(log_, store, writer):
    """The leader's shrink went through, then the controller bumped the epoch (it dropped
    broker 2) and its LeaderAndIsr arrived before the write's answer: the partition keeps
    the ISR and zkVersion of its current epoch."""
    p = led(log_, store, writer)
    store.hold_responses = True
    shrink = gevent.spawn(writer.remove, p, [3], "follower 3 lags")
    eventually(lambda: store.held)
    store.put(TP, LeaderAndIsr(LEADER, 2, (1,), 1))
    p.make_leader(state((1,), epoch=2, zk_version=2))
    store.release()
    shrink.get()
    assert (p.leader_epoch, p.isr, p.zk_version) == (2, (1,), 2)


def test_an_expansion_decided_in_an_earlier_epoch_is_not_written(log_, store, writer):
    """Follower 3 caught up at epoch 1; before the write ran, epoch 2 began with ISR {1}:
    3's epoch-1 position says nothing about epoch 2 (and 2 is not in the ISR any more)."""
    p = led(log_, store, writer, isr=(1, 2))
    p.append_as_leader(batch(), acks=1)
    p.on_follower_fetch(3, p.log.log_end_offset, NOW)
    store.put(TP, LeaderAndIsr(LEADER, 2, (1,), 1))
    p.make_leader(state((1,), epoch=2, zk_version=1))
    gevent.sleep(0.05)
    assert store.writes == [] and (p.isr, p.zk_version) == ((1,), 1)


def test_an_earlier_epochs_expansion_does_not_end_this_epochs(log_, store, writer):
    """Follower 3 joins at epoch 1 (write in flight), then again at epoch 2: the end of the
    epoch-1 write must not take 3 out of the joining set while the epoch-2 write is still
    in flight, or the HW could pass what 3 holds before it is in the ISR."""
    p = led(log_, store, writer, isr=(1, 2))
    store.hold_responses = True
    p.on_follower_fetch(3, 0, NOW)
    eventually(lambda: store.held)
    store.put(TP, LeaderAndIsr(LEADER, 2, (1, 2), 1))
    p.make_leader(state((1, 2), epoch=2, zk_version=2))
    p.on_follower_fetch(3, 0, NOW + 1)
    assert p.joining == {3}
    store.release()                      # the epoch-1 write ends
    eventually(lambda: len(store.held) == 1)   # the epoch-2 write is in flight
    assert p.joining == {3}
    store.release()
    eventually(lambda: p.isr == (1, 2, 3))
    assert not p.joining and p.zk_version == 3 and store.read(TP).leader_epoch == 2


def test_set_isr_ignores_an_earlier_epoch(log_, store, writer):
    p = led(log_, store, writer)
    p.make_leader(state((1, 2), epoch=2, zk_version=4))
    assert not p.set_isr((1, 2, 3), 1, leader_epoch=1)
    assert (p.isr, p.zk_version) == ((1, 2), 4)
    assert p.set_isr((1,), 5, leader_epoch=2)
    assert (p.isr, p.zk_version) == ((1,), 5)


# ---- a leadership that ends while the writer waits for ZooKeeper (found by the simulation) ----

def test_a_leadership_lost_during_the_doubt_re_read_writes_nothing(log_, store, writer):
    """Seed 5467: the write first re-reads a partition in doubt; while that read waits, a
    LeaderAndIsr makes this broker a follower.  The write must not go out afterwards: it
    would name this broker leader in ZooKeeper at the new epoch's version."""
    p = led(log_, store, writer)
    store.lose_connection = "after"
    writer.remove(p, [3], "follower 3 lags")
    store.reconnect()
    read = store.partition_state

    def read_while_leadership_moves(tp):
        stored = read(tp)
        store.put(TP, LeaderAndIsr(2, 2, (2, 3), 1))
        p.make_follower(state((2, 3), epoch=2, leader=2, zk_version=store.read(TP).zk_version))
        return stored

    store.partition_state = read_while_leadership_moves
    assert not writer.remove(p, [2], "follower 2 lags")
    assert len(store.writes) == 1 and store.read(TP).leader == 2


def test_a_leader_that_reads_a_newer_epoch_stops_acknowledging(log_, store, writer):
    """Seed 657: an expansion's answer is lost, and the re-read shows that the controller
    has moved leadership on.  Until its LeaderAndIsr arrives, the deposed leader must not
    advance its HW over the ISR it still caches, nor acknowledge acks=all writes."""
    p = led(log_, store, writer, isr=(1, 2))
    appended = p.append_as_leader(batch(), acks=-1)
    store.lose_connection = "after"
    p.on_follower_fetch(3, p.log.log_end_offset, NOW)
    eventually(lambda: store.writes)
    store.put(TP, LeaderAndIsr(3, 2, (3,), 1))     # the controller elected 3 alone
    store.reconnect()
    eventually(lambda: not writer._in_doubt)
    p.on_follower_fetch(2, p.log.log_end_offset, NOW + 1)
    assert p.high_watermark == 0
    assert p.wait_for_acks(appended, 0.01) == ErrorCode.NOT_LEADER_FOR_PARTITION


def test_a_leadership_lost_during_the_re_read_of_a_write_in_doubt_writes_nothing(
        log_, store, writer):
    """Found by the replication simulation (seed 1039): the change was checked against the
    leadership, then waited for the re-read of an earlier write in doubt; meanwhile a
    LeaderAndIsr made this broker a follower in epoch 2.  Writing on would put this broker
    in the znode as leader of epoch 2 over the real leader 2, at the version the follower
    was handed, so the write must not go out."""
    p = led(log_, store, writer)
    store.lose_connection = "after"
    writer.remove(p, [3], "follower 3 lags")               # applied, answer lost: in doubt
    store.reconnect()
    read_held, read_answered = Event(), Event()
    plain_read = store.partition_state

    def held_read(tp):
        read_held.set()
        read_answered.wait()
        return plain_read(tp)
    store.partition_state = held_read
    shrink = gevent.spawn(writer.remove, p, [2], "follower 2 lags")
    eventually(read_held.is_set)
    store.put(TP, LeaderAndIsr(2, 2, (2, 1), 1))           # the controller moves leadership (v2)
    p.make_follower(state((2, 1), epoch=2, leader=2, zk_version=2))
    read_answered.set()
    assert shrink.get() is False
    assert (store.read(TP).leader, store.read(TP).leader_epoch, store.read(TP).isr) == (2, 2, (2, 1))
    assert len(store.writes) == 1 and (p.isr, p.zk_version) == ((2, 1), 2)


def test_a_follower_whose_expansion_may_be_in_zookeeper_keeps_counting_until_the_next_leadership(
        log_, store, writer):
    """Found by the replication simulation (seed 657): the expansion to {1, 2, 3} was applied,
    its answer lost; then the controller wrote a new leadership, elected from that ISR (3 was
    in it).  The re-read cannot tell whether 3 ever was in the ISR, so 3 must keep counting
    for this (deposed) leader's HW until a LeaderAndIsr comes: dropping it let the HW pass
    records 3 lacks, acknowledged and then lost with the new leadership."""
    p = led(log_, store, writer, isr=(1, 2))
    p.append_as_leader(batch(), acks=1)
    store.lose_connection = "after"
    p.on_follower_fetch(3, 0, NOW)
    eventually(lambda: store.writes)
    store.put(TP, LeaderAndIsr(3, 2, (3,), 1))     # the controller: 3 leads epoch 2
    store.reconnect()
    eventually(lambda: TP not in [q.tp for q in writer._in_doubt])
    p.on_follower_fetch(2, p.log.log_end_offset, NOW + 1)
    assert p.joining == {3} and p.high_watermark == 0
    p.make_leader(state((1, 2), epoch=3, zk_version=2))   # the next LeaderAndIsr starts afresh
    assert not p.joining


def test_a_pending_acks_all_wait_ends_when_a_failed_isr_write_shows_a_new_leader(log_, store, writer):
    """Issue 23: an acks=all wait that began before the leader learns it was deposed is
    answered NOT_LEADER_FOR_PARTITION as soon as its ISR write's conflict shows the new
    leadership, not at its timeout; and nothing more is appended there."""
    p = led(log_, store, writer, isr=(1, 2))
    appended = p.append_as_leader(batch(), acks=-1)
    waiting = gevent.spawn(p.wait_for_acks, appended, 30.0)
    gevent.sleep(0.01)
    store.put(TP, LeaderAndIsr(2, 2, (2,), 1))     # the controller elected 2
    assert not writer.remove(p, [2], "follower 2 lags")
    with gevent.Timeout(2):
        assert waiting.get() == ErrorCode.NOT_LEADER_FOR_PARTITION
    end = p.log.log_end_offset
    for acks in (1, -1):
        with pytest.raises(KafkaProtocolError) as refused:
            p.append_as_leader(batch(), acks)
        assert refused.value.code == ErrorCode.NOT_LEADER_FOR_PARTITION
    assert p.log.log_end_offset == end
