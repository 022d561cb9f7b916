"""The failover loop against a real ensemble and real broker processes (kill -9, SIGSTOP)."""

import re
import time

import pytest

from kafka_ha.model import LeaderAndIsr
from tests.harness.cluster import SESSION_MS
from tests.harness.kafka import (controller_epoch, create_topic, log_size, log_text, read_states,
                                 received_leader_and_isr, run_tool)

pytestmark = pytest.mark.system


def leaders(states):
    return {p: s.leader for p, s in states.items()}


def test_kill_leader_broker_elects_from_isr_and_restart_gets_leader_and_isr(cluster_factory):
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "orders", 6, 3)
    before = read_states(cluster, "orders")
    victim = before[0].leader
    led = [p for p, s in before.items() if s.leader == victim]

    cluster.kill(victim)
    killed_at = time.monotonic()

    def failed_over():
        now = read_states(cluster, "orders")
        return all(now[p].leader not in (victim, -1) for p in led) and now

    after = cluster.wait_until(failed_over, timeout=SESSION_MS / 1000 + 20,
                               message=f"partitions led by {victim} did not fail over")
    elapsed = time.monotonic() - killed_at
    print(f"failover of {len(led)} partitions took {elapsed:.2f} s after kill -9 "
          f"(session timeout {SESSION_MS / 1000:.1f} s)")
    after = cluster.wait_until(lambda: (s := read_states(cluster, "orders")) and all(
        victim not in st.isr for st in s.values()) and s, timeout=10,
        message=f"broker {victim} still in an ISR")
    for p, old in before.items():
        new = after[p]
        assert victim not in new.isr
        assert new.leader_epoch == old.leader_epoch + 1, (p, old, new)
        assert new.leader in old.isr and new.leader in new.isr
        assert set(new.isr) == set(old.isr) - {victim}
    _, epoch_stat = controller_epoch(cluster)

    offset = log_size(cluster, victim, "state-change.log")
    cluster.start_broker(victim)
    cluster.wait_registered([victim])

    def got_current_states():
        seen = received_leader_and_isr(log_text(cluster, victim, "state-change.log", offset))
        return all(seen.get(("orders", p)) == s.leader_epoch for p, s in after.items()) and seen

    cluster.wait_until(got_current_states, timeout=20,
                       message=f"restarted broker {victim} did not get LeaderAndIsr for its replicas")


def test_kill_controller_new_controller_finishes_failover(cluster_factory):
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "events", 3, 3)
    old_controller = cluster.wait_until(cluster.controller, message="no controller")
    epoch, _ = controller_epoch(cluster)
    before = read_states(cluster, "events")
    led = [p for p, s in before.items() if s.leader == old_controller]
    assert led, "round-robin assignment gives every broker a partition to lead"

    cluster.kill(old_controller)
    new_controller = cluster.wait_until(
        lambda: (c := cluster.controller()) not in (None, old_controller) and c,
        timeout=SESSION_MS / 1000 + 20, message="no new controller")
    assert controller_epoch(cluster)[0] == epoch + 1
    after = cluster.wait_until(
        lambda: (s := read_states(cluster, "events")) and all(
            s[p].leader not in (old_controller, -1) for p in led) and s,
        timeout=20, message="partitions of the dead controller were not re-elected")
    for p in led:
        assert after[p].leader_epoch == before[p].leader_epoch + 1
        assert after[p].controller_epoch == epoch + 1
        assert old_controller not in after[p].isr
    assert new_controller != old_controller


def test_sigstopped_controller_is_fenced_and_resigns(cluster_factory):
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "fenced", 3, 3)
    zombie = cluster.wait_until(cluster.controller, message="no controller")
    epoch, _ = controller_epoch(cluster)

    cluster.sigstop(zombie)
    try:
        successor = cluster.wait_until(
            lambda: (c := cluster.controller()) not in (None, zombie) and c,
            timeout=SESSION_MS / 1000 + 20, message="no controller took over from the stopped one")
        new_epoch, epoch_stat = controller_epoch(cluster)
        assert new_epoch == epoch + 1
        cluster.wait_until(lambda: all(s.leader != zombie for s in read_states(cluster, "fenced").values()),
                           timeout=20, message="the stopped controller still leads partitions")
    finally:
        cluster.sigcont(zombie)

    cluster.wait_registered([zombie], timeout=30)
    cluster.wait_until(lambda: "resigns as controller" in log_text(cluster, zombie, "controller.log"),
                       timeout=20, message="the resumed controller did not resign")
    assert cluster.controller() == successor
    assert controller_epoch(cluster)[0] == new_epoch
    # Nothing written after the takeover carries the zombie's epoch.
    takeover_zxid = epoch_stat.mzxid
    for p in range(3):
        path = f"/brokers/topics/fenced/partitions/{p}/state"
        data, stat = cluster.zk.get(path)
        if stat.mzxid > takeover_zxid:
            assert b'"controller_epoch":%d' % new_epoch in data, (path, data)


def assert_unclean_election_of_2(cluster, offline):
    state = cluster.wait_until(lambda: (s := read_states(cluster, "last")[0]).leader == 2 and s,
                               timeout=20, message="no unclean election of broker 2")
    assert state.isr == (2,) and state.leader_epoch == offline.leader_epoch + 1
    controller = cluster.controller()
    assert "unclean election of 2" in log_text(cluster, controller, "state-change.log")
    assert "Unclean leader election for partition [last,0]" in log_text(cluster, controller, "controller.log")
    return controller


@pytest.mark.parametrize("unclean", ["off", "on", "enabled while offline"])
def test_last_isr_member_dies(cluster_factory, unclean):
    """#18 (off), #19 (on) and #20: unclean election enabled for the offline partition with
    kafka-configs.sh takes effect without a restart (Kafka 2.x)."""
    # Broker 4 holds no replica: it stays alive to act as the controller.
    cluster = cluster_factory(4, session_timeout_ms=SESSION_MS)
    extra = ["--config", "unclean.leader.election.enable=true"] if unclean == "on" else []
    create_topic(cluster, "last", 1, 3, "--replica-assignment", "1:2:3", *extra)
    for b in (2, 3):
        cluster.kill(b)
    cluster.wait_until(lambda: read_states(cluster, "last")[0].isr == (1,), timeout=20,
                       message="ISR did not shrink to [1]")
    cluster.kill(1)
    offline = cluster.wait_until(lambda: (s := read_states(cluster, "last")[0]).leader == -1 and s,
                                 timeout=20, message="partition did not go offline")
    assert offline.isr == (1,), "the ISR keeps its last member"

    cluster.start_broker(2)
    cluster.wait_registered([2])
    if unclean == "on":
        assert_unclean_election_of_2(cluster, offline)
        return
    time.sleep(2)  # give a wrong election every chance to happen
    state = read_states(cluster, "last")[0]
    assert (state.leader, state.isr) == (-1, (1,))
    if unclean == "enabled while offline":
        rc, out, err = run_tool("kafka-configs.sh", "--zookeeper", cluster.connect_string, "--entity-type",
                                "topics", "--entity-name", "last", "--alter", "--add-config",
                                "unclean.leader.election.enable=true")
        assert rc == 0, out + err
        controller = assert_unclean_election_of_2(cluster, offline)
        assert "Unclean leader election has been enabled for topic last" in log_text(
            cluster, controller, "controller.log")
        return
    cluster.start_broker(1)
    state = cluster.wait_until(lambda: (s := read_states(cluster, "last")[0]).leader == 1 and s,
                               timeout=20, message="the last ISR member did not lead again")
    # elected alone; live followers that catch up rejoin afterwards
    assert state.isr[0] == 1 and state.leader_epoch > offline.leader_epoch


def test_conflicting_writer_between_read_and_write(cluster_factory):
    """Someone rewrites a state znode behind the controller's back: the election uses what is
    in ZooKeeper, not the controller's cached copy (the read-write race itself is provoked
    deterministically in tests/contract/test_controller_store.py)."""
    cluster = cluster_factory(3, session_timeout_ms=SESSION_MS)
    create_topic(cluster, "raced", 3, 3)
    controller = cluster.wait_until(cluster.controller, message="no controller")
    # A partition the controller does not lead, so the controller survives the kill.
    p, state = next((p, s) for p, s in read_states(cluster, "raced").items() if s.leader != controller)
    path = f"/brokers/topics/raced/partitions/{p}/state"
    data, stat = cluster.zk.get(path)
    follower = [r for r in state.isr if r != state.leader][0]
    # A leader shrinking its ISR (as brokers do) bumps the version the controller cached.
    from kafka_ha.zk.znodes import TopicPartitionStateZNode
    shrunk = LeaderAndIsr(state.leader, state.leader_epoch, tuple(r for r in state.isr if r != follower),
                          state.controller_epoch)
    cluster.zk.set(path, TopicPartitionStateZNode.encode(shrunk), version=stat.version)

    cluster.kill(state.leader)
    final = cluster.wait_until(
        lambda: (s := read_states(cluster, "raced")[p]).leader not in (state.leader, -1) and s,
        timeout=SESSION_MS / 1000 + 20, message=f"partition {p} was not re-elected")
    # Elected from the ISR as re-read after the conflict, not the cached one.
    assert final.leader != follower, "the replica removed by the concurrent writer must not lead"
    assert final.leader in shrunk.isr
    assert final.leader_epoch == state.leader_epoch + 1
    assert cluster.controller() == controller


UPDATE_METADATA_CACHED = re.compile(r"cached UpdateMetadata correlation id \d+ from controller \d+ "
                                    r"epoch \d+: (\d+) partitions, live brokers \[([\d, ]*)\]")


def test_survivors_learn_the_broker_is_gone_before_its_partitions_move(cluster_factory):
    """Clients asking while the controller writes the elections see the dead broker's
    partitions without a leader, not led by it; librdkafka 2.16 forgets new leaders that
    come in the same Metadata answer as a broker's removal (docs/design.md §3)."""
    cluster = cluster_factory(3, {"logger.levels": "state.change.logger=DEBUG"},
                              session_timeout_ms=SESSION_MS)
    create_topic(cluster, "orders", 6, 3)
    controller = cluster.controller()
    before = read_states(cluster, "orders")
    # A leader that is not the controller: a new controller starts with a full UpdateMetadata.
    victim = next(s.leader for s in before.values() if s.leader != controller)
    survivor = next(b for b in (1, 2, 3) if b != victim)
    offset = log_size(cluster, survivor, "state-change.log")
    cluster.kill(victim)
    cluster.wait_until(lambda: all(s.leader != victim for s in read_states(cluster, "orders").values()),
                       timeout=SESSION_MS / 1000 + 20, message=f"partitions led by {victim} did not move")

    def updates_without_victim():
        text = log_text(cluster, survivor, "state-change.log", offset)
        seen = [(int(n), {int(b) for b in live.split(",") if b.strip()})
                for n, live in UPDATE_METADATA_CACHED.findall(text)]
        without = [n for n, live in seen if victim not in live]
        return any(n > 0 for n in without) and without
    counts = cluster.wait_until(updates_without_victim, timeout=20,
                                message=f"broker {survivor} got no new partition states after the kill")
    assert counts[0] == 0, (f"the first UpdateMetadata without broker {victim} already moved its "
                            f"partitions (partition states per UpdateMetadata: {counts})")
