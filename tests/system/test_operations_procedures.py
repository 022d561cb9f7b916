"""docs/operations.md's procedures, run as written under acks=all load (issue 20).

The guide writes each procedure as one shell block (```` ```sh procedure=NAME ````); these tests
extract that block and run it with bash against real brokers, so the guide cannot drift from
what is tested.  The brokers are the harness's, started through ``bin/kafka-server-start.sh``
with config files of their own, so the guide's ``kafka-server-stop.sh CONFIG`` and
``kafka-server-start.sh -daemon CONFIG`` stop and start them as they would an operator's.

One cluster for the module: brokers 1-3 run from the start, broker 4 is the one the
add-broker procedure brings in.  A producer writes with acks=all through each procedure; at the
end everything is read back and judged against what was acknowledged.
"""

import json
import time

import pytest

from tests.harness.cluster import SESSION_MS, ClusterFixture
from tests.harness.doc_procedures import ROOT, broker_pid_of, run_procedure
from tests.harness.kafka import create_topic, log_text, read_assignment, read_states, run_tool
from tests.harness.load import BackgroundProducer, assert_intact
from tests.harness.zk import CLIENT_JVMFLAGS

pytestmark = pytest.mark.system

FIRST = [1, 2, 3]
PARTITIONS = 6
# Between chunks of 50 records: at most ~5,000 records/s, so that the brokers, not the
# producer, have the machine's two cores, and the read-back at the end stays short.
PAUSE_S = 0.01


@pytest.fixture(scope="module")
def cluster(request, zk_ensemble):
    # No automatic rebalance: leadership moves only by what the procedures do.
    c = ClusterFixture(4, {"auto.leader.rebalance.enable": False}, ensemble=zk_ensemble,
                       session_timeout_ms=SESSION_MS)
    request.addfinalizer(c.stop)
    return c.start(brokers=FIRST)


def procedure_env(cluster, **more):
    # CLIENT_JVMFLAGS: a small quick-starting JVM for zkCli.sh, as the harness uses.
    return {"Z": cluster.connect_string, "CLIENT_JVMFLAGS": CLIENT_JVMFLAGS, **more}


def adopt(cluster, ids):
    """Let the fixture stop the brokers the procedure started (-daemon), also after a failure."""
    for i in ids:
        pid = broker_pid_of(cluster.config_path(i))
        if pid is not None:
            cluster.adopt_broker(i, pid)


def leaders(cluster, topic):
    return {p: s.leader for p, s in read_states(cluster, topic).items()}


def judge_history(cluster, load, record_property, what, seconds):
    """Read everything back: no acknowledged record lost, none corrupt or out of order, no
    duplicate beyond the producer's retries; report the numbers first."""
    history = load.history(cluster, PARTITIONS)
    report(record_property, what, load, history, seconds)
    assert load.acked, "nothing was acknowledged"
    assert not history.lost, (f"{len(history.lost)} acknowledged records lost, "
                              f"e.g. {list(history.lost.items())[:5]}")
    assert_intact(history, load.retries.retried)


def report(record_property, what, load, history, seconds):
    """Print the numbers and put them in the JUnit report (CI keeps it): the acceptance asks
    for the producer's error count, which is reported, not asserted."""
    numbers = {"sent": load.sent, "acked": len(load.acked), "lost": len(history.lost),
               "producer_errors": len(load.failed),
               "records_sent_again": sum(load.retries.retried.values()),
               "procedure_seconds": round(seconds, 1)}
    for key, value in numbers.items():
        record_property(f"{what}.{key}", value)
    print(f"{what}: " + ", ".join(f"{k}={v}" for k, v in numbers.items())
          + (f"; first errors: {load.failed[:3]}" if load.failed else ""))


def test_rolling_restart_as_written_loses_no_acknowledged_record(cluster, tmp_path,
                                                                 record_property):
    topic = "rolling"
    create_topic(cluster, topic, PARTITIONS, 3, "--config", "min.insync.replicas=2")
    preferred = {p: a[0] for p, a in read_assignment(cluster, topic).partitions.items()}
    cluster.wait_until(lambda: leaders(cluster, topic) == preferred, timeout=30,
                       message="the new topic's leaders are not its preferred replicas")
    controller = cluster.wait_until(cluster.controller, message="no controller")
    old_pids = {i: cluster.broker_pid(i) for i in FIRST}
    configs = " ".join(str(cluster.config_path(i)) for i in FIRST)

    with BackgroundProducer(cluster, topic, pause_s=PAUSE_S) as load:
        load.wait_progress(300, what="production before the restart")
        started = time.monotonic()
        try:
            rc, out = run_procedure("rolling-restart",
                                    procedure_env(cluster, BROKER_CONFIGS=configs),
                                    ROOT, timeout_s=300, scratch=tmp_path)
        finally:
            adopt(cluster, FIRST)
        seconds = time.monotonic() - started
        print(out)
        assert rc == 0, out
        load.wait_progress(300, what="production after the restart")

    order = [int(line.split("restarting broker ")[1].split()[0])
             for line in out.splitlines() if "restarting broker " in line]
    assert sorted(order) == FIRST and order[-1] == controller, (order, controller, out)
    for i in FIRST:
        assert cluster.broker_pid(i) not in (None, old_pids[i]), f"broker {i} was not restarted"
        assert f"Controlled shutdown of broker {i} succeeded" in log_text(cluster, i, "server.log")
    assert "Successfully started preferred replica election" in out, out
    cluster.wait_until(lambda: all(len(s.isr) == 3 for s in read_states(cluster, topic).values()),
                       timeout=30, message="an ISR is not whole after the procedure")
    cluster.wait_until(lambda: leaders(cluster, topic) == preferred, timeout=30,
                       message="the election at the end did not restore the preferred leaders")

    judge_history(cluster, load, record_property, "rolling-restart", seconds)


def test_adding_a_broker_as_written_moves_load_onto_it_and_loses_nothing(cluster, tmp_path,
                                                                         record_property):
    topic, new = "growing", 4
    create_topic(cluster, topic, PARTITIONS, 3, "--config", "min.insync.replicas=2")
    before = read_assignment(cluster, topic).partitions
    new_config = cluster.cluster.write_config(new)   # step 1 of the guide: the new broker's file

    with BackgroundProducer(cluster, topic, pause_s=PAUSE_S) as load:
        load.wait_progress(300, what="production before the move")
        started = time.monotonic()
        try:
            rc, out = run_procedure("add-broker", procedure_env(
                cluster, NEW_CONFIG=str(new_config), TOPICS=topic, PLAN_DIR=str(tmp_path)),
                ROOT, timeout_s=300, scratch=tmp_path)
        finally:
            adopt(cluster, [new])
        seconds = time.monotonic() - started
        print(out)
        assert rc == 0, out
        load.wait_progress(300, what="production after the move")

    assert f"broker {new} registered" in out, out
    brokers = out.split("(brokers ", 1)[1].split(")", 1)[0]
    assert sorted(int(b) for b in brokers.split(",")) == FIRST + [new], out
    plan = {p["partition"]: tuple(p["replicas"])
            for p in json.loads((tmp_path / "reassign.json").read_text())["partitions"]}
    rollback = {p["partition"]: tuple(p["replicas"])
                for p in json.loads((tmp_path / "rollback.json").read_text())["partitions"]}
    assert rollback == before, "the way back must be the assignment before the move"
    assert sorted(plan) == list(range(PARTITIONS)) and any(new in r for r in plan.values()), plan
    for p in range(PARTITIONS):
        assert f"Reassignment of partition [{topic},{p}] completed successfully" in out, out
    assert read_assignment(cluster, topic).partitions == plan
    assert not cluster.zk.exists("/admin/reassign_partitions")
    cluster.wait_until(lambda: all(set(s.isr) == set(plan[p])
                                   for p, s in read_states(cluster, topic).items()),
                       timeout=30, message="the ISRs are not the planned replicas")
    assert leaders(cluster, topic) == {p: r[0] for p, r in plan.items()}
    assert new in leaders(cluster, topic).values(), "the new broker leads none of its share"
    moved_away = [(b, p) for p in plan for b in set(before[p]) - set(plan[p])]
    cluster.wait_until(lambda: not [1 for b, p in moved_away
                                    if (cluster.data_dir(b) / f"{topic}-{p}").exists()],
                       timeout=30, message=f"replicas moved away were not deleted: {moved_away}")

    judge_history(cluster, load, record_property, "add-broker", seconds)
    rc, out, err = run_tool("kafka-replica-verification.sh", "--broker-list",
                            cluster.bootstrap_servers, "--topic-white-list", topic,
                            "--time", "-2", "--once", timeout_s=120)
    assert rc == 0, out + err
