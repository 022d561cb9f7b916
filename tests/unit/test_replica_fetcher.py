"""The replica fetcher against a fake leader: real logs on disk, no network, no ZooKeeper.

The fake leader (tests/harness/fake_leader.py) answers OffsetsForLeaderEpoch and
Fetch from real Log objects, as the leader's data plane would, so what is checked is
the follower's conversation with it: where it truncates, and which partitions keep
moving when one fails.  Errors and lost connections: test_replica_fetcher_errors.py.
"""
import pytest

from kafka_ha.broker import replica_fetcher
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import TopicPartition
from tests.harness.fake_leader import (CONFIG, FOLLOWER, LEADER, FakeLeader, everything,
                                       follower_partition, open_log, same_bytes, start_fetcher,
                                       wait_for, write)

A, B = TopicPartition("a", 0), TopicPartition("b", 0)


@pytest.fixture
def leader(monkeypatch):
    fake = FakeLeader()
    monkeypatch.setattr(replica_fetcher, "BrokerConnection", fake.connect)
    yield fake
    for log in fake.logs.values():
        log.close()


def test_truncation_takes_as_many_rounds_as_the_epochs_need(tmp_path, leader):
    """Issue 18's example.  Leader: epochs {0: 0, 2: 4, 4: 10}, LEO 10.  Follower: {0: 0, 1: 6,
    3: 8}, LEO 9.  One round cut to 8 and kept the follower's offsets 4..7 (epochs 0 and 1)
    under the leader's epoch 2 records 8 and 9; two rounds cut to 4."""
    ours = open_log(tmp_path, LEADER, A)
    write(ours, 0, b"m0", b"m1", b"m2", b"m3")
    write(ours, 2, b"L4", b"L5", b"L6", b"L7", b"L8", b"L9")
    ours.assign_epoch_start_offset(4)
    leader.logs[A] = ours
    theirs = open_log(tmp_path, FOLLOWER, A)
    write(theirs, 0, b"m0", b"m1", b"m2", b"m3", b"F4", b"F5")
    write(theirs, 1, b"F6", b"F7")
    write(theirs, 3, b"F8")
    p = follower_partition(theirs)
    fetcher = start_fetcher([p])
    try:
        wait_for(lambda: A in fetcher.fetching and theirs.log_end_offset == 10, "the follower caught up")
        assert everything(theirs) == everything(ours)
        assert theirs.epoch_cache.entries() == [(0, 0), (2, 4)]
    finally:
        fetcher.stop()
        theirs.close()


def test_an_epoch_led_without_appending_does_not_stall_truncation(tmp_path, leader):
    """The follower led epoch 2 without appending (it starts at its LEO 5); the leader
    wrote epoch 1 at 5..6, and leads epoch 3 from 7.  Truncation must drop the empty
    epoch 2 although no record is cut (or ask for it forever), and the leader's epoch 1
    must be recorded when its records arrive."""
    ours = open_log(tmp_path, LEADER, A)
    write(ours, 0, b"m0", b"m1", b"m2", b"m3", b"m4")
    write(ours, 1, b"m5", b"m6")
    ours.assign_epoch_start_offset(3)
    leader.logs[A] = ours
    theirs = open_log(tmp_path, FOLLOWER, A)
    write(theirs, 0, b"m0", b"m1", b"m2", b"m3", b"m4")
    theirs.assign_epoch_start_offset(2)
    p = follower_partition(theirs)
    fetcher = start_fetcher([p])
    try:
        wait_for(lambda: A in fetcher.fetching and same_bytes(theirs, ours), "the follower caught up")
        assert theirs.epoch_cache.entries() == [(0, 0), (1, 5)]
    finally:
        fetcher.stop()
        theirs.close()


def test_one_corrupt_partition_is_marked_failed_and_the_others_keep_moving(tmp_path, leader):
    for tp in (A, B):
        leader.logs[tp] = open_log(tmp_path, LEADER, tp)
        write(leader.logs[tp], 0, b"v0", b"v1")
    leader.corrupt.add(A)          # fetched first: the partitions are fetched in sorted order
    logs = {tp: open_log(tmp_path, FOLLOWER, tp) for tp in (A, B)}
    fetcher = start_fetcher([follower_partition(log) for log in logs.values()])
    try:
        wait_for(lambda: same_bytes(logs[B], leader.logs[B]), "b-0 caught up")
        write(leader.logs[B], 0, b"v2", b"v3")
        wait_for(lambda: same_bytes(logs[B], leader.logs[B]), "b-0 caught up again")
        assert fetcher.failed_partitions == {A} and fetcher.fetching == {B} and not fetcher.needs_truncation
        assert logs[A].log_end_offset == 0
        assert leader.connections == 1, "the connection was closed for one partition's data"
        # The next LeaderAndIsr for a-0 (a new epoch) tries it again.
        leader.corrupt.clear()
        fetcher.add({A})
        assert not fetcher.failed_partitions
        wait_for(lambda: same_bytes(logs[A], leader.logs[A]), "a-0 caught up after the retry")
    finally:
        fetcher.stop()
        for log in logs.values():
            log.close()


def leader_and_isr(manager, epoch, *tps):
    return manager.leader_and_isr({
        "controller_id": 3, "controller_epoch": 1,
        "live_leaders": [{"id": LEADER, "host": "leader.invalid", "port": 9092}],
        "partition_states": [{"topic": tp.topic, "partition": tp.partition, "controller_epoch": 1,
                              "leader": LEADER, "leader_epoch": epoch, "isr": [LEADER, FOLLOWER],
                              "zk_version": 0, "replicas": [LEADER, FOLLOWER]} for tp in tps]}, 7)


def test_replica_manager_counts_failed_partitions_until_their_next_leader_and_isr(tmp_path, leader):
    for tp in (A, B):
        leader.logs[tp] = open_log(tmp_path, LEADER, tp)
        write(leader.logs[tp], 0, b"v0", b"v1")
    leader.corrupt.add(B)
    config = BrokerConfig({"broker.id": FOLLOWER, "zookeeper.connect": "127.0.0.1:1"})
    logs = LogManager([str(tmp_path / "broker2")], CONFIG)
    manager = ReplicaManager(config, logs, None, lambda topic: 1, lambda topic: CONFIG,
                             lambda broker: None)
    try:
        assert leader_and_isr(manager, 1, A, B)["error_code"] == 0
        wait_for(lambda: manager.failed_partition_count() == 1, "b-0 was marked failed")
        assert manager.failed_partitions == {B}
        wait_for(lambda: manager.partitions[A].log.log_end_offset == 2, "a-0 caught up")
        leader.corrupt.clear()
        leader_and_isr(manager, 2, B)
        assert manager.failed_partition_count() == 0
        wait_for(lambda: manager.partitions[B].log.log_end_offset == 2, "b-0 caught up after the retry")
    finally:
        manager.shutdown()


def test_applying_one_fetch_response_pauses_between_partitions(tmp_path, leader, monkeypatch):
    """A response for thousands of partitions is applied in slices, so the broker's loop
    serves requests and ZooKeeper pings in between (its first writes stalled it 1.6 s)."""
    from kafka_ha import cooperative
    tps = [TopicPartition("m", i) for i in range(6)]
    for tp in tps:
        leader.logs[tp] = open_log(tmp_path, LEADER, tp)
        write(leader.logs[tp], 0, b"a")
    followers = [follower_partition(open_log(tmp_path, FOLLOWER, tp)) for tp in tps]
    fetcher = start_fetcher(followers)
    wait_for(lambda: fetcher.fetching == set(tps), "truncation is done")
    for tp in tps:
        write(leader.logs[tp], 9, b"b")
    seen = []   # at each pause: how many partitions hold the new record
    monkeypatch.setattr(cooperative, "SLICE_MS", 0)
    monkeypatch.setattr(cooperative, "yield_to_io",
                        lambda: seen.append(sum(p.log.log_end_offset == 2 for p in followers)))
    wait_for(lambda: all(p.log.log_end_offset == 2 for p in followers), "every partition fetched")
    fetcher.stop()
    assert any(0 < n < len(tps) for n in seen), seen


def test_a_throttled_partition_waits_while_the_follower_quota_is_exceeded(tmp_path, leader):
    """KIP-73 on the follower: over its rate, a throttled partition that has not caught up
    is left out of the fetch request; the others go on, and it resumes when the bound goes."""
    import gevent
    from kafka_ha.broker.replication_quota import UNBOUNDED, ReplicationQuota
    from kafka_ha.model import BrokerEndpoint
    from tests.harness.fake_leader import FOLLOWER as ME
    for tp in (A, B):
        leader.logs[tp] = open_log(tmp_path, LEADER, tp)
        write(leader.logs[tp], 0, *[bytes([65 + i]) * 1000 for i in range(10)])
    quota = ReplicationQuota(ME, lambda topic: "0:2" if topic == "a" else "", bound=0,
                             samples=2, window_ms=1000, clock_ms=lambda: 0)   # time stands still
    logs = {tp: open_log(tmp_path, FOLLOWER, tp) for tp in (A, B)}
    parts = {tp: follower_partition(lg) for tp, lg in logs.items()}
    fetcher = replica_fetcher.ReplicaFetcher(ME, BrokerEndpoint(LEADER, "leader.invalid", 9092),
                                             parts.get, 50, 1, 1500, 5.0, quota=quota)
    fetcher.add(set(parts))
    try:
        wait_for(lambda: same_bytes(logs[B], leader.logs[B]), "the unthrottled partition caught up")
        gevent.sleep(0.3)
        assert 0 < logs[A].log_end_offset < 10, "A fetched once, then held back"
        assert quota.rate() > 0
        quota.set_bound(UNBOUNDED)
        wait_for(lambda: same_bytes(logs[A], leader.logs[A]), "A resumed")
    finally:
        fetcher.stop()
        for lg in logs.values():
            lg.close()


def test_an_idle_round_computes_no_partitions_position(tmp_path, leader):
    """A follower of 6,666 partitions built every partition's position for each fetch, two
    fetches a second per leader with no traffic: two thirds of an idle broker's CPU once
    its leaders had stopped reading idle partitions.  A position is computed again only
    when this fetcher moved it (an answer for the partition, a truncation) or was told."""
    leader.sessions = True
    tps = [TopicPartition("i", n) for n in range(4)]
    for tp in tps:
        leader.logs[tp] = open_log(tmp_path, LEADER, tp)
        write(leader.logs[tp], 9, b"a")
    followers = {tp: follower_partition(open_log(tmp_path, FOLLOWER, tp)) for tp in tps}
    looked_up = []

    def partition_of(tp):
        looked_up.append(tp)
        return followers.get(tp)
    fetcher = start_fetcher(list(followers.values()), partition_of)
    try:
        wait_for(lambda: fetcher.fetching == set(tps)
                 and all(p.log.log_end_offset == 1 for p in followers.values()), "caught up")
        rounds = len(leader.fetches)
        wait_for(lambda: len(leader.fetches) >= rounds + 2, "the answers to the last moves")
        looked_up.clear()
        rounds = len(leader.fetches)
        wait_for(lambda: len(leader.fetches) >= rounds + 3, "three idle rounds")
        assert looked_up == []
        fetcher.positions_changed({tps[2]})               # e.g. retention moved its log start
        rounds = len(leader.fetches)
        wait_for(lambda: len(leader.fetches) >= rounds + 2, "two more rounds")
        assert looked_up == [tps[2]]
    finally:
        fetcher.stop()
        for p in followers.values():
            p.log.close()
