"""ElectLeaders and the KIP-455 reassignment APIs on a real 3-broker cluster, through
unmodified kafka-python and confluent-kafka admin clients and the bin/ tools.

One cluster for the module (tests run in file order and build on each other's
topics).  Broker ``X`` (not the controller) is every test topic's preferred
leader; one controlled restart of X leaves all of them led elsewhere, so each
client has its own topic to elect.  confluent-kafka 2.16's AdminClient has no
partition-reassignment methods, so reassignments go through kafka-python.
"""

import json
import logging

import pytest
from confluent_kafka import ElectionType, TopicPartition as CkTP
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, TopicPartition as KpTP
from kafka import errors as kp_errors

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode
from tests.harness.cluster import ClusterFixture
from tests.harness.kafka import create_topic, read_assignment, read_states, run_tool

pytestmark = pytest.mark.system
ELECT_TOPICS = ("elect-kp", "elect-ck", "elect-tool")


class Env:
    def __init__(self, cluster):
        self.cluster = cluster
        self.controller = cluster.controller()
        others = [b for b in cluster.broker_ids if b != self.controller]
        self.x, self.y = others   # x: the preferred leader of the election topics; y: moves
        self.kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers,
                                   client_id="election-test", request_timeout_ms=30000)
        self.ck = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def leader(self, topic, partition=0):
        return read_states(self.cluster, topic)[partition].leader

    def request(self, broker, key, version, body):
        conn = BrokerConnection("127.0.0.1", self.cluster.port(broker), "raw-test", timeout_s=30)
        try:
            return conn.request(key, version, body)
        finally:
            conn.close()


@pytest.fixture(scope="module")
def env(request, zk_ensemble):
    cluster = ClusterFixture(3, {"auto.leader.rebalance.enable": False}, ensemble=zk_ensemble,
                             session_timeout_ms=6000).start()
    request.addfinalizer(cluster.stop)
    cluster.wait_until(lambda: cluster.controller() is not None, message="no controller")
    e = Env(cluster)
    request.addfinalizer(e.kp.close)
    order = ":".join(str(b) for b in (e.x, e.y, e.controller))
    for topic in ELECT_TOPICS:
        create_topic(cluster, topic, 1, 3, "--replica-assignment", order)
    create_topic(cluster, "moves", 2, 2, "--replica-assignment",
                 f"{e.controller}:{e.x},{e.controller}:{e.x}")
    for topic in (*ELECT_TOPICS, "moves"):
        cluster.wait_until(lambda t=topic: all(s.leader >= 0 and len(s.isr) == len(
            read_assignment(cluster, t).partitions[p]) for p, s in read_states(cluster, t).items()),
            timeout=30, message=f"{topic} not fully in sync")
    return e


def test_only_the_controller_serves_them(env):
    elect = env.request(env.x, ApiKey.ELECT_LEADERS, 1, {
        "election_type": 0, "topic_partitions": [{"topic": "elect-kp", "partitions": [0]}],
        "timeout_ms": 1000})
    assert elect["error_code"] == ErrorCode.NOT_CONTROLLER
    listed = env.request(env.y, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                         {"timeout_ms": 1000, "topics": None})
    assert (listed["error_code"], listed["topics"]) == (ErrorCode.NOT_CONTROLLER, [])
    altered = env.request(env.x, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": [
        {"name": "moves", "partitions": [{"partition_index": 0, "replicas": [env.y]}]}]})
    assert altered["error_code"] == ErrorCode.NOT_CONTROLLER
    assert read_assignment(env.cluster, "moves").partitions[0] == (env.controller, env.x)
    # ApiVersions advertises them, so the clients use them.
    versions = env.request(env.x, ApiKey.API_VERSIONS, 3, {
        "client_software_name": "kafka-ha-tests", "client_software_version": "1.0"})
    advertised = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}
    assert advertised[43] == (0, 2) and advertised[45] == (0, 0) and advertised[46] == (0, 0)
    # librdkafka asks ApiVersions v3 first and gets its answer at v3 (no fallback).
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("election-test.rdkafka")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    probe = AdminClient({"bootstrap.servers": env.cluster.bootstrap_of([env.x]), "debug": "protocol",
                         "logger": logger})
    probe.list_topics(timeout=10)
    probe.poll(0)
    logger.removeHandler(handler)
    assert any("Sent ApiVersionRequest (v3" in line for line in lines), lines[:20]
    assert any("Received ApiVersionResponse (v3" in line for line in lines), lines[:20]
    sent = [line for line in lines if "Sent ApiVersionRequest" in line]
    assert all("(v3," in line for line in sent), sent     # no retry at a lower version
    # Unclean elections are refused as a whole.
    unclean = env.request(env.controller, ApiKey.ELECT_LEADERS, 1, {
        "election_type": 1, "topic_partitions": None, "timeout_ms": 1000})
    assert unclean["error_code"] == ErrorCode.INVALID_REQUEST


def test_elections_when_not_needed_and_unknown(env):
    results = env.kp.elect_leaders(0, {"elect-kp": [0, 5]}, raise_errors=False)
    codes = {(r.topic, p.partition_id): p.error_code
             for r in results.replica_election_results for p in r.partition_result}
    assert codes == {("elect-kp", 0): ErrorCode.ELECTION_NOT_NEEDED,
                     ("elect-kp", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    answer = env.ck.elect_leaders(ElectionType.PREFERRED, [CkTP("elect-ck", 0)]).result(timeout=30)
    [(tp, error)] = answer.items()
    assert (tp.topic, tp.partition) == ("elect-ck", 0)
    assert error.code() == ErrorCode.ELECTION_NOT_NEEDED   # a KafkaError


def test_preferred_elections_move_leadership_back(env, tmp_path):
    env.cluster.restart(env.x)   # controlled shutdown: x leads nothing afterwards
    env.cluster.wait_until(lambda: all(len(read_states(env.cluster, t)[0].isr) == 3 for t in ELECT_TOPICS),
                           timeout=60, message=f"broker {env.x} did not rejoin the ISRs")
    assert all(env.leader(t) != env.x for t in ELECT_TOPICS)
    # kafka-python (ElectLeaders v2: flexible)
    results = env.kp.elect_leaders(0, {"elect-kp": [0]})
    [[partition]] = [r.partition_result for r in results.replica_election_results]
    assert partition.error_code == ErrorCode.NONE
    assert env.leader("elect-kp") == env.x
    # confluent-kafka
    answer = env.ck.elect_leaders(ElectionType.PREFERRED, [CkTP("elect-ck", 0)]).result(timeout=30)
    assert list(answer.values()) == [None]
    assert env.leader("elect-ck") == env.x
    # kafka-leader-election.sh --bootstrap-server
    rc, out, err = run_tool("kafka-leader-election.sh", "--bootstrap-server",
                            env.cluster.bootstrap_servers, "--election-type", "preferred",
                            "--topic", "elect-tool", "--partition", "0")
    assert rc == 0, err
    assert "Successfully completed leader election (PREFERRED) for partitions elect-tool-0" in out
    assert env.leader("elect-tool") == env.x
    rc, out, err = run_tool("kafka-leader-election.sh", "--bootstrap-server",
                            env.cluster.bootstrap_servers, "--election-type", "preferred",
                            "--all-topic-partitions")
    assert rc == 0, err
    assert "Valid replica already elected for partitions" in out
    assert all(f"{t}-0" in out for t in ELECT_TOPICS)
    elect_file = tmp_path / "elect.json"
    elect_file.write_text('{"partitions": [{"topic": "elect-kp", "partition": 0}, {"topic": "nope", "partition": 0}]}')
    rc, out, err = run_tool("kafka-leader-election.sh", "--bootstrap-server",
                            env.cluster.bootstrap_servers, "--election-type", "preferred",
                            "--path-to-json-file", str(elect_file))
    assert rc == 1
    assert out.splitlines() == [
        "Valid replica already elected for partitions elect-kp-0",
        "Error completing leader election (PREFERRED) for partition: nope-0: "
        "UNKNOWN_TOPIC_OR_PARTITION: nope-0 does not exist"]


def test_reassignment_listed_while_it_runs_then_completes(env):
    c, x, y = env.controller, env.x, env.y
    tp = KpTP("moves", 0)
    # y stopped: the move to [c, y] starts and cannot finish until y fetches.
    env.cluster.sigstop(y)
    try:
        assert env.kp.alter_partition_reassignments({tp: [c, y]}) == {tp: None}
        listed = env.kp.list_partition_reassignments()
        assert listed == {tp: {"replicas": [c, y, x], "adding_replicas": [y], "removing_replicas": [x]}}
        assert env.kp.list_partition_reassignments([KpTP("moves", 1)]) == {}
        again = env.kp.alter_partition_reassignments({
            tp: [c, y],                    # the same target: accepted
            KpTP("moves", 1): None,        # nothing to cancel
            KpTP("moves", 7): [c],         # no such partition
        })
        assert again == {tp: None, KpTP("moves", 1): kp_errors.NoReassignmentInProgressError,
                         KpTP("moves", 7): kp_errors.UnknownTopicOrPartitionError}
        refused = env.kp.alter_partition_reassignments({tp: None})   # cancel: cannot revert
        assert refused == {tp: kp_errors.ReassignmentInProgressError}
        bad = env.kp.alter_partition_reassignments({KpTP("moves", 1): [c, c], tp: [x]})
        assert bad == {KpTP("moves", 1): kp_errors.InvalidReplicationAssignmentError,
                       tp: kp_errors.ReassignmentInProgressError}
    finally:
        env.cluster.sigcont(y)
    env.cluster.wait_until(lambda: not env.kp.list_partition_reassignments(), timeout=60,
                           message="the reassignment did not complete")
    assert read_assignment(env.cluster, "moves").partitions[0] == (c, y)
    env.cluster.wait_until(lambda: set(read_states(env.cluster, "moves")[0].isr) == {c, y}, timeout=30)
    assert not env.cluster.zk.exists("/admin/reassign_partitions")


def test_reassign_tool_over_bootstrap_server(env, tmp_path):
    c, x, y = env.controller, env.x, env.y
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moves", "partition": 1, "replicas": [y, c]}]}))
    bootstrap = env.cluster.bootstrap_servers
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics": [{"topic": "moves"}], "version": 1}')
    rc, out, err = run_tool("kafka-reassign-partitions.sh", "--bootstrap-server", bootstrap,
                            "--topics-to-move-json-file", str(topics), "--broker-list", f"{x},{y}",
                            "--generate")
    assert rc == 0, err
    current, proposed = (json.loads(line) for line in out.splitlines() if line.startswith("{"))
    assert [(p["partition"], p["replicas"]) for p in current["partitions"]] == [(0, [c, y]), (1, [c, x])]
    assert {p["partition"]: sorted(p["replicas"]) for p in proposed["partitions"]} == {0: sorted([x, y]),
                                                                                     1: sorted([x, y])}
    rc, out, err = run_tool("kafka-reassign-partitions.sh", "--bootstrap-server", bootstrap,
                            "--reassignment-json-file", str(plan), "--execute")
    assert rc == 0, err
    assert "Successfully started partition reassignment for moves-1" in out, out
    env.cluster.wait_until(lambda: read_assignment(env.cluster, "moves").partitions[1] == (y, c),
                           timeout=60, message="the tool's reassignment did not complete")
    rc, out, err = run_tool("kafka-reassign-partitions.sh", "--bootstrap-server", bootstrap,
                            "--reassignment-json-file", str(plan), "--verify")
    assert rc == 0, err
    assert "Reassignment of partition [moves,1] completed successfully" in out
    # Nothing moves any more: the controller lists nothing.
    assert env.kp.list_partition_reassignments() == {}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moves", "partition": 0, "replicas": [x, 99]}]}))
    rc, out, err = run_tool("kafka-reassign-partitions.sh", "--bootstrap-server", bootstrap,
                            "--reassignment-json-file", str(bad), "--execute")
    assert rc == 1
    assert "Error reassigning partition moves-0: INVALID_REPLICA_ASSIGNMENT: brokers [99] are not alive" in out
