"""kafka-reassign-partitions.sh, kafka-preferred-replica-election.sh and kafka-configs.sh
against the real ZooKeeper ensemble, without brokers.

Each test gets a fresh chroot with topics written straight into
``/brokers/topics/<t>``; the tools run as subprocesses through ``bin/`` and the
tests check the intent znodes they write (exact bytes, schema) and their output
line for line.  Where the controller would react, the test plays its part.
"""

import json
import threading
import uuid

import pytest
from kazoo.client import KazooClient

from kafka_ha.model import TopicAssignment, TopicPartition as TP
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.schemas import validate_znode
from tests.harness.kafka import run_tool

pytestmark = pytest.mark.system
REASSIGN = zn.REASSIGN_PARTITIONS_PATH
ELECTION = zn.PREFERRED_REPLICA_ELECTION_PATH


class Env:
    def __init__(self, zk, connect, tmp_path):
        self.zk = zk
        self.connect = connect
        self.tmp_path = tmp_path

    def topic(self, name, partitions, config=None):
        self.zk.create(zn.TopicZNode.path(name),
                       zn.TopicZNode.encode(TopicAssignment(name, partitions)), makepath=True)
        if config is not None:
            self.zk.create(azn.TopicConfigZNode.path(name), azn.TopicConfigZNode.encode(config),
                           makepath=True)

    def file(self, content):
        path = self.tmp_path / f"{uuid.uuid4().hex[:8]}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return str(path)

    def tool(self, script, *args, timeout_s=30):
        return run_tool(script, "--zookeeper", self.connect, *args, timeout_s=timeout_s)

    def get(self, path):
        return self.zk.get(path)[0]

    def later(self, delay_s, action):
        timer = threading.Timer(delay_s, action)
        timer.start()
        return timer


@pytest.fixture
def env(zk_ensemble, tmp_path):
    chroot = f"/admin-tools-{uuid.uuid4().hex[:10]}"
    root = KazooClient(hosts=zk_ensemble.connect_string, timeout=10)
    root.start(timeout=30)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    zk = KazooClient(hosts=zk_ensemble.connect_string + chroot, timeout=10)
    zk.start(timeout=30)
    yield Env(zk, zk_ensemble.connect_string + chroot, tmp_path)
    zk.stop()
    zk.close()


# ---- kafka-reassign-partitions.sh ----------------------------------------------------


def test_generate_prints_current_and_round_robin_proposal(env):
    env.topic("foo", {0: (1, 2), 1: (2, 1), 2: (1, 2)})
    env.topic("bar", {0: (1,)})
    topics = env.file('{"topics": [{"topic": "foo"}, {"topic": "nope"}, {"topic": "bar"}], '
                      '"version": 1}')
    code, out, err = env.tool("kafka-reassign-partitions.sh", "--generate", "--broker-list",
                              "3,2,4", "--topics-to-move-json-file", topics)
    assert code == 0, (out, err)
    assert out == (
        "Current partition replica assignment\n"
        "\n"
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]},'
        '{"topic":"foo","partition":1,"replicas":[2,1]},'
        '{"topic":"foo","partition":2,"replicas":[1,2]},'
        '{"topic":"bar","partition":0,"replicas":[1]}]}\n'
        "Proposed partition reassignment configuration\n"
        "\n"
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3]},'
        '{"topic":"foo","partition":1,"replicas":[3,4]},'
        '{"topic":"foo","partition":2,"replicas":[4,2]},'
        '{"topic":"bar","partition":0,"replicas":[2]}]}\n')
    assert not env.zk.exists(REASSIGN), "--generate writes nothing"
    code, out, _ = env.tool("kafka-reassign-partitions.sh", "--generate", "--broker-list", "3",
                            "--topics-to-move-json-file", topics)
    assert (code, out) == (1, "Partitions reassignment failed due to replication factor: 2 "
                              "larger than available brokers: 1\n")


def test_execute_writes_existing_partitions_and_prints_rollback(env):
    env.topic("foo", {0: (1, 2), 1: (2, 1)})
    # Another tool's layout: spaces, sorted keys, version last, log_dirs.
    request = env.file(
        '{"partitions": [{"log_dirs": ["any", "any"], "partition": 1, "replicas": [3, 2], '
        '"topic": "foo"}, {"partition": 0, "replicas": [1, 2], "topic": "foo"}, '
        '{"partition": 7, "replicas": [1], "topic": "foo"}, '
        '{"partition": 0, "replicas": [1], "topic": "ghost"}], "version": 1}')
    code, out, err = env.tool("kafka-reassign-partitions.sh", "--execute",
                              "--reassignment-json-file", request)
    assert code == 0, (out, err)
    assert out == (
        "Current partition replica assignment\n"
        "\n"
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]},'
        '{"topic":"foo","partition":1,"replicas":[2,1]}]}\n'
        "\n"
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Successfully started reassignment of partitions "
        '{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[3,2]},'
        '{"topic":"foo","partition":0,"replicas":[1,2]},'
        '{"topic":"foo","partition":7,"replicas":[1]},'
        '{"topic":"ghost","partition":0,"replicas":[1]}]}\n')
    assert err.splitlines() == [
        "Skipping reassignment of partition [foo,7] since it doesn't exist",
        "Skipping reassignment of partition [ghost,0] since topic ghost doesn't exist",
    ]
    data = env.get(REASSIGN)
    assert data == (b'{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[3,2]},'
                    b'{"topic":"foo","partition":0,"replicas":[1,2]}]}')
    validate_znode("reassign_partitions", data)


def test_execute_refuses_while_a_reassignment_is_in_progress(env):
    env.topic("foo", {0: (1, 2)})
    pending = b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3]}]}'
    env.zk.create(REASSIGN, pending, makepath=True)
    request = env.file({"version": 1, "partitions": [{"topic": "foo", "partition": 0,
                                                      "replicas": [3, 1]}]})
    code, out, _ = env.tool("kafka-reassign-partitions.sh", "--execute",
                            "--reassignment-json-file", request)
    assert code == 1
    assert out.splitlines()[-1] == ("Partitions reassignment failed due to Partition reassignment "
                                    "currently in progress for Map([foo,0] -> List(2, 3)). "
                                    "Aborting operation")
    assert out.startswith("Current partition replica assignment\n\n"), "rollback info first"
    assert "Successfully" not in out
    assert env.get(REASSIGN) == pending


def test_execute_rejects_duplicates_without_writing(env):
    env.topic("foo", {0: (1, 2)})
    request = env.file('{"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]},'
                       '{"topic":"foo","partition":0,"replicas":[2,1]}]}')
    code, out, _ = env.tool("kafka-reassign-partitions.sh", "--execute",
                            "--reassignment-json-file", request)
    assert (code, out) == (1, "Partitions reassignment failed due to Partition reassignment "
                              "contains duplicate topic partitions: [foo,0]\n")
    assert not env.zk.exists(REASSIGN)


def test_requests_naming_no_existing_partition_write_nothing(env):
    env.topic("foo", {0: (1, 2)})
    request = env.file({"partitions": [{"topic": "foo", "partition": 3, "replicas": [1]},
                                       {"topic": "a/b", "partition": 0, "replicas": [1]}]})
    code, out, err = env.tool("kafka-reassign-partitions.sh", "--execute",
                              "--reassignment-json-file", request)
    assert code == 0, (out, err)
    assert out.splitlines() == [
        "Current partition replica assignment", "",
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}', "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started reassignment of partitions "
        '{"version":1,"partitions":[{"topic":"foo","partition":3,"replicas":[1]},'
        '{"topic":"a/b","partition":0,"replicas":[1]}]}']
    assert len(err.splitlines()) == 2
    assert not env.zk.exists(REASSIGN)
    request = env.file({"partitions": [{"topic": "bar", "partition": 0}]})
    code, out, err = env.tool("kafka-preferred-replica-election.sh", "--path-to-json-file",
                              request, "--wait", "--timeout", "5")
    assert (code, out) == (0, "Successfully started preferred replica election for partitions "
                              "Set([bar,0])\n"), err
    assert not env.zk.exists(ELECTION)


def test_verify_reports_each_partition(env):
    env.topic("foo", {0: (1, 2), 1: (2, 3), 2: (2, 1)})
    env.zk.create(REASSIGN, b'{"partitions": [{"topic": "foo", "partition": 0, '
                            b'"replicas": [3, 1]}]}', makepath=True)
    request = env.file({"version": 1, "partitions": [
        {"topic": "foo", "partition": 0, "replicas": [3, 1]},
        {"topic": "foo", "partition": 1, "replicas": [2, 3]},
        {"topic": "foo", "partition": 2, "replicas": [1, 2]},  # same set, other order: failed
        {"topic": "gone", "partition": 0, "replicas": [1]}]})
    code, out, err = env.tool("kafka-reassign-partitions.sh", "--verify",
                              "--reassignment-json-file", request)
    assert code == 0, (out, err)
    assert out.splitlines() == [
        "Status of partition reassignment:",
        "ERROR: Assigned replicas (2,1) don't match the list of replicas for reassignment (1,2) "
        "for partition [foo,2]",
        "ERROR: Assigned replicas () don't match the list of replicas for reassignment (1) "
        "for partition [gone,0]",
        "Reassignment of partition [foo,0] is still in progress",
        "Reassignment of partition [foo,1] completed successfully",
        "Reassignment of partition [foo,2] failed",
        "Reassignment of partition [gone,0] failed",
    ]
    # --wait is decisive at once when nothing is in progress; a failure gives rc 1.
    env.zk.delete(REASSIGN)
    code, out, err = env.tool("kafka-reassign-partitions.sh", "--verify", "--wait",
                              "--reassignment-json-file", request)
    assert code == 1
    assert err.splitlines() == ["4/4 partitions done"]
    assert "Reassignment of partition [foo,0] failed" in out.splitlines()


def test_verify_wait_follows_the_controller_to_completion(env):
    env.topic("foo", {0: (1, 2), 1: (1, 2)})
    target = {0: (2, 3), 1: (3, 2)}
    env.zk.create(REASSIGN, azn.ReassignPartitionsZNode.encode(
        {TP("foo", p): r for p, r in target.items()}), makepath=True)
    request = env.file({"version": 1, "partitions": [
        {"topic": "foo", "partition": p, "replicas": list(r)} for p, r in target.items()]})

    def controller_finishes_partition_0():
        env.zk.set(zn.TopicZNode.path("foo"),
                   zn.TopicZNode.encode(TopicAssignment("foo", {0: (2, 3), 1: (1, 2)})))
        env.zk.set(REASSIGN, azn.ReassignPartitionsZNode.encode({TP("foo", 1): (3, 2)}))

    def controller_finishes_partition_1():
        env.zk.set(zn.TopicZNode.path("foo"),
                   zn.TopicZNode.encode(TopicAssignment("foo", target)))
        env.zk.delete(REASSIGN)

    timers = [env.later(0.8, controller_finishes_partition_0),
              env.later(1.6, controller_finishes_partition_1)]
    try:
        code, out, err = env.tool("kafka-reassign-partitions.sh", "--verify", "--wait",
                                  "--timeout", "20", "--reassignment-json-file", request)
    finally:
        for t in timers:
            t.join()
    assert code == 0, (out, err)
    assert err.splitlines() == ["0/2 partitions done", "1/2 partitions done",
                                "2/2 partitions done"]
    assert out.splitlines() == ["Status of partition reassignment:",
                                "Reassignment of partition [foo,0] completed successfully",
                                "Reassignment of partition [foo,1] completed successfully"]


def test_verify_wait_times_out(env):
    env.topic("foo", {0: (1, 2)})
    env.zk.create(REASSIGN, azn.ReassignPartitionsZNode.encode({TP("foo", 0): (2, 1)}),
                  makepath=True)
    request = env.file({"partitions": [{"topic": "foo", "partition": 0, "replicas": [2, 1]}]})
    code, out, err = env.tool("kafka-reassign-partitions.sh", "--verify", "--wait", "--timeout",
                              "0.5", "--reassignment-json-file", request)
    assert code == 1
    assert out.splitlines() == ["Status of partition reassignment:",
                                "Reassignment of partition [foo,0] is still in progress"]
    assert err.splitlines() == ["0/1 partitions done", "Timed out after 0.5 s waiting for the "
                                "reassignment: 0/1 partitions done"]


# ---- kafka-preferred-replica-election.sh -----------------------------------------------


def test_election_of_all_partitions(env):
    env.topic("b", {0: (1, 2), 1: (2, 1)})
    env.topic("a", {0: (3,)})
    code, out, err = env.tool("kafka-preferred-replica-election.sh")
    assert code == 0, (out, err)
    assert out == ("Successfully started preferred replica election for partitions "
                   "Set([a,0], [b,0], [b,1])\n")
    data = env.get(ELECTION)
    assert data == (b'{"version":1,"partitions":[{"topic":"a","partition":0},'
                    b'{"topic":"b","partition":0},{"topic":"b","partition":1}]}')
    validate_znode("preferred_replica_election", data)
    # The controller has not finished: a second request is refused, the first one stays.
    code, out, _ = env.tool("kafka-preferred-replica-election.sh")
    assert code == 1
    assert out == ("Failed to start preferred replica election\n"
                   "Preferred replica leader election currently in progress for "
                   "Set([a,0], [b,0], [b,1]). Aborting operation\n")
    assert env.get(ELECTION) == data


def test_election_from_file_skips_missing_partitions(env):
    env.topic("foo", {0: (1, 2), 1: (2, 1)})
    request = env.file('{"partitions":\n\t[{"partition": 1, "topic": "foo"},\n\t'
                       '{"topic": "foo", "partition": 5}, {"topic": "foobar", "partition": 2}]\n}')
    code, out, err = env.tool("kafka-preferred-replica-election.sh", "--path-to-json-file",
                              request)
    assert code == 0, (out, err)
    assert out == ("Successfully started preferred replica election for partitions "
                   "Set([foo,1], [foo,5], [foobar,2])\n")
    assert err.splitlines() == [
        "Skipping preferred replica leader election for partition [foo,5] since it doesn't exist",
        "Skipping preferred replica leader election for partition [foobar,2] since topic foobar "
        "doesn't exist",
    ]
    assert env.get(ELECTION) == b'{"version":1,"partitions":[{"topic":"foo","partition":1}]}'


def test_election_wait_until_the_controller_deletes_the_request(env):
    env.topic("foo", {0: (1, 2)})
    timer = env.later(1.0, lambda: env.zk.delete(ELECTION))
    try:
        code, out, err = env.tool("kafka-preferred-replica-election.sh", "--wait",
                                  "--timeout", "20")
    finally:
        timer.join()
    assert code == 0, (out, err)
    assert out == "Successfully started preferred replica election for partitions Set([foo,0])\n"
    assert err.splitlines()[-1] == "Preferred replica election completed"
    assert not env.zk.exists(ELECTION)
    code, out, err = env.tool("kafka-preferred-replica-election.sh", "--wait", "--timeout", "0.5")
    assert code == 1
    assert err.splitlines() == ["Timed out after 0.5 s waiting for the preferred replica "
                                "election to complete"]
    assert env.zk.exists(ELECTION)


# ---- kafka-configs.sh ----------------------------------------------------------------


def config_changes(env):
    try:
        names = sorted(env.zk.get_children(zn.CONFIG_CHANGES_PATH))
    except Exception:
        return []
    return [(n, env.get(f"{zn.CONFIG_CHANGES_PATH}/{n}")) for n in names]


def test_alter_and_describe_topic_config(env):
    env.topic("foo", {0: (1,)}, config={"flush.ms": "10"})
    env.topic("bar", {0: (1,)})
    code, out, err = env.tool("kafka-configs.sh", "--entity-type", "topics", "--entity-name",
                              "foo", "--alter", "--add-config",
                              "retention.ms=1000,cleanup.policy=[delete]")
    assert (code, out) == (0, "Completed Updating config for entity: topic 'foo'.\n"), err
    data = env.get(azn.TopicConfigZNode.path("foo"))
    assert data == (b'{"version":1,"config":{"flush.ms":"10","retention.ms":"1000",'
                    b'"cleanup.policy":"delete"}}')
    validate_znode("topic_config", data)
    changes = config_changes(env)
    assert [c[1] for c in changes] == [b'{"version":2,"entity_path":"topics/foo"}']
    assert changes[0][0].startswith("config_change_") and len(changes[0][0]) == 24
    validate_znode("config_change_notification", changes[0][1])

    code, out, _ = env.tool("kafka-configs.sh", "--entity-type", "topics", "--entity-name", "foo",
                            "--alter", "--delete-config", "flush.ms,cleanup.policy")
    assert (code, out) == (0, "Completed Updating config for entity: topic 'foo'.\n")
    assert env.get(azn.TopicConfigZNode.path("foo")) == \
        b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert len(config_changes(env)) == 2

    code, out, _ = env.tool("kafka-configs.sh", "--entity-type", "topics", "--entity-name", "foo",
                            "--describe")
    assert (code, out) == (0, "Configs for topic 'foo' are retention.ms=1000\n")
    code, out, _ = env.tool("kafka-configs.sh", "--entity-type", "topics", "--describe")
    assert (code, out) == (0, "Configs for topic 'bar' are \n"
                              "Configs for topic 'foo' are retention.ms=1000\n")


@pytest.mark.parametrize("args, message", [
    (["--entity-name", "foo", "--alter", "--add-config", "retention.mss=1"],
     'requirement failed: Unknown configuration "retention.mss".'),
    (["--entity-name", "foo", "--alter", "--add-config", "retention.ms=soon"],
     "Invalid value soon for configuration retention.ms"),
    (["--entity-name", "foo", "--alter", "--delete-config", "retention.ms"],
     "Invalid config(s): retention.ms"),
    (["--entity-name", "nope", "--alter", "--add-config", "retention.ms=1"],
     'Topic "nope" does not exist.'),
    (["--entity-name", "nope", "--describe"], 'Topic "nope" does not exist.'),
])
def test_config_errors_write_nothing(env, args, message):
    env.topic("foo", {0: (1,)}, config={"flush.ms": "10"})
    code, out, _ = env.tool("kafka-configs.sh", "--entity-type", "topics", *args)
    assert code == 1
    assert out.startswith(f"Error while executing config command : {message}"), out
    assert env.get(azn.TopicConfigZNode.path("foo")) == b'{"version":1,"config":{"flush.ms":"10"}}'
    assert config_changes(env) == []
    assert not env.zk.exists(azn.TopicConfigZNode.path("nope"))


# ---- kafka-topics.sh ----------------------------------------------------------------


def test_describe_into_a_closed_pipe_stops_quietly(env):
    import os
    import subprocess
    import sys

    from tests.harness.kafka import ROOT

    # ~150 KB of output: more than a pipe holds, so writes go on after `head` has exited.
    env.topic("wide", {p: (1,) for p in range(3000)})
    done = subprocess.run(
        f'"{ROOT}/bin/kafka-topics.sh" --zookeeper "{env.connect}" --describe --topic wide '
        f"| head -2; exit ${{PIPESTATUS[0]}}", shell=True, executable="/bin/bash",
        capture_output=True, text=True, timeout=60, env=dict(os.environ, KAFKA_HA_PYTHON=sys.executable))
    assert done.stdout.splitlines()[0].startswith("Topic:wide\tPartitionCount:3000")
    assert done.returncode == 0 and "Traceback" not in done.stderr and "Broken" not in done.stderr, \
        done.stderr
