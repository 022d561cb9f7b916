"""ElectLeaders and the KIP-455 reassignment APIs on a real 3-broker cluster, through
unmodified kafka-python and confluent-kafka admin clients and the bin/ tools; then, on
the same cluster, replication throttles (KIP-73) around a reassignment, dynamic broker
configs (KIP-226) and rack-aware assignment (its brokers are on two racks).

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
RACKS = {1: "rack-a", 2: "rack-a", 3: "rack-b"}


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
                             session_timeout_ms=6000)
    for broker, rack in RACKS.items():    # two racks, for the rack-aware assignment at the end
        cluster.set_broker_config(broker, {"broker.rack": rack})
    cluster.start()
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
        bad = env.kp.alter_partition_reassignments({KpTP("moves", 1): [c, c], tp: [x]})
        assert bad == {KpTP("moves", 1): kp_errors.InvalidReplicationAssignmentError,
                       tp: kp_errors.ReassignmentInProgressError}
        # KIP-455's cancel reverts: y (stopped, never caught up) leaves the replicas again.
        assert env.kp.alter_partition_reassignments({tp: None}) == {tp: None}
        env.cluster.wait_until(lambda: read_assignment(env.cluster, "moves").partitions[0] == (c, x),
                               timeout=30, message="the cancel did not revert the move")
        assert env.kp.list_partition_reassignments() == {}
        assert env.kp.alter_partition_reassignments({tp: [c, y]}) == {tp: None}   # again, to finish
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


# ---- replication throttles, dynamic broker configs, racks ------------------------------

RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def znode_config(cluster, path):
    try:
        return json.loads(cluster.zk.get(path)[0])["config"]
    except Exception:   # absent
        return {}


def replica_bytes(cluster, broker, topic, partition=0):
    folder = cluster.data_dir(broker) / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in folder.glob("*.log")) if folder.exists() else 0


def fill(cluster, topic, megabytes):
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1,
                         "linger.ms": 20})
    for _ in range(megabytes * 1024):
        producer.produce(topic, b"r" * 1024)
        producer.poll(0)
    assert producer.flush(30) == 0


def test_a_throttled_reassignment_and_verify_removing_the_throttle(env, tmp_path):
    c, x, y = env.controller, env.x, env.y
    zk_connect = env.cluster.connect_string
    create_topic(env.cluster, "throttled", 1, 1, "--replica-assignment", str(x))
    fill(env.cluster, "throttled", 2)
    leader_bytes = replica_bytes(env.cluster, x, "throttled")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "throttled", "partition": 0, "replicas": [x, y]}]}))
    rc, out, err = run_tool("kafka-reassign-partitions.sh", "--zookeeper", zk_connect,
                            "--reassignment-json-file", plan, "--execute", "--throttle", 50000)
    assert rc == 0, (out, err)
    assert "Warning: You must run Verify periodically" in out
    assert "The inter-broker throttle limit was set to 50000 B/s" in out
    # What Kafka's command writes: the rates on both brokers, the replicas on the topic.
    for broker in (x, y):
        assert znode_config(env.cluster, f"/config/brokers/{broker}") == {
            key: "50000" for key in RATE_KEYS}
    assert znode_config(env.cluster, "/config/brokers/" + str(c)) == {}
    assert znode_config(env.cluster, "/config/topics/throttled") == {
        "leader.replication.throttled.replicas": f"0:{x}",
        "follower.replication.throttled.replicas": f"0:{y}"}
    # The throttled follower fetches, held back: --verify sees the move in progress and
    # leaves the throttle in place.
    env.cluster.wait_until(lambda: replica_bytes(env.cluster, y, "throttled") > 0, timeout=30,
                           message="the throttled follower never fetched")
    rc, out, err = run_tool("kafka-reassign-partitions.sh", "--zookeeper", zk_connect,
                            "--reassignment-json-file", plan, "--verify")
    assert "Reassignment of partition [throttled,0] is still in progress" in out, (out, err)
    assert "Throttle was removed." not in out
    assert replica_bytes(env.cluster, y, "throttled") < leader_bytes
    # Both brokers applied the dynamic rate (their DescribeConfigs says so) ...
    bootstrap = env.cluster.bootstrap_servers
    rc, out, err = run_tool("kafka-configs.sh", "--bootstrap-server", bootstrap, "--describe",
                            "--entity-type", "brokers", "--entity-name", y)
    assert rc == 0 and f"Configs for broker '{y}' are " in out, (out, err)
    assert "follower.replication.throttled.rate=50000" in out
    # ... and a higher one through each path lets the move finish.
    rc, out, err = run_tool("kafka-configs.sh", "--bootstrap-server", bootstrap, "--alter",
                            "--entity-type", "brokers", "--entity-name", y,
                            "--add-config", "follower.replication.throttled.rate=1000000000")
    assert rc == 0 and f"Completed updating config for broker '{y}'." in out, (out, err)
    rc, out, err = run_tool("kafka-configs.sh", "--zookeeper", zk_connect, "--alter",
                            "--entity-type", "brokers", "--entity-name", x,
                            "--add-config", "leader.replication.throttled.rate=1000000000")
    assert rc == 0 and f"Completed Updating config for entity: broker '{x}'." in out, (out, err)
    rc, out, err = run_tool("kafka-reassign-partitions.sh", "--zookeeper", zk_connect,
                            "--reassignment-json-file", plan, "--verify", "--wait", "--timeout", 120)
    assert rc == 0, (out, err)
    assert "Reassignment of partition [throttled,0] completed successfully" in out
    assert "Throttle was removed." in out
    for broker in env.cluster.broker_ids:
        assert not set(RATE_KEYS) & set(znode_config(env.cluster, f"/config/brokers/{broker}"))
    assert znode_config(env.cluster, "/config/topics/throttled") == {}
    assert replica_bytes(env.cluster, y, "throttled") == leader_bytes
    rc, out, err = run_tool("kafka-configs.sh", "--zookeeper", zk_connect, "--alter",
                            "--entity-type", "brokers", "--entity-name", x,
                            "--add-config", "num.partitions=3")
    assert rc == 1 and "Cannot update these configs dynamically: num.partitions" in out


def test_cancel_reverts_a_throttled_move_and_removes_the_throttle(env, tmp_path):
    x, y = env.x, env.y
    bootstrap = env.cluster.bootstrap_servers
    create_topic(env.cluster, "cancelled", 1, 1, "--replica-assignment", str(x))
    fill(env.cluster, "cancelled", 2)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "cancelled", "partition": 0, "replicas": [y]}]}))
    rc, out, err = run_tool("kafka-reassign-partitions.sh", "--bootstrap-server", bootstrap,
                            "--reassignment-json-file", plan, "--execute", "--throttle", 20000)
    assert rc == 0 and "The inter-broker throttle limit was set to 20000 B/s" in out, (out, err)
    assert znode_config(env.cluster, "/config/topics/cancelled")[
        "follower.replication.throttled.replicas"] == f"0:{y}"
    env.cluster.wait_until(lambda: read_assignment(env.cluster, "cancelled").partitions[0] == (x, y),
                           timeout=30, message="the move did not start")
    rc, out, err = run_tool("kafka-reassign-partitions.sh", "--bootstrap-server", bootstrap,
                            "--reassignment-json-file", plan, "--cancel")
    assert rc == 0, (out, err)
    assert "Successfully cancelled partition reassignment(s) for: cancelled-0" in out
    assert "Throttle was removed." in out
    env.cluster.wait_until(lambda: read_assignment(env.cluster, "cancelled").partitions[0] == (x,),
                           timeout=60, message="the cancel did not revert the move")
    env.cluster.wait_until(lambda: not (env.cluster.data_dir(y) / "cancelled-0").exists(),
                           timeout=30, message="the added replica was not deleted")
    assert read_states(env.cluster, "cancelled")[0].isr == (x,)
    assert znode_config(env.cluster, "/config/topics/cancelled") == {}
    assert not env.cluster.zk.exists("/admin/reassign_partitions")


def test_racks_in_registration_metadata_and_assignment(env):
    from kafka_ha.client.cluster import ClusterMetadata
    for broker, rack in RACKS.items():
        registration = json.loads(env.cluster.zk.get(f"/brokers/ids/{broker}")[0])
        assert registration["rack"] == rack and registration["version"] == 3
    with ClusterMetadata(env.cluster.bootstrap_servers, client_id="rack-test") as client:
        env.cluster.wait_until(lambda: {b: m.rack for b, m in client.refresh().brokers.items()} == RACKS,
                               timeout=30, message="Metadata does not carry the racks")
    rc, out, err = run_tool("kafka-broker-api-versions.sh", "--bootstrap-server",
                            env.cluster.bootstrap_servers)
    assert rc == 0, err
    for broker, rack in RACKS.items():
        assert f":{env.cluster.port(broker)} (id: {broker} rack: {rack}) -> (" in out, out
    # Rack-aware: every partition has a replica on each rack; round robin over 1, 2, 3
    # would put partitions 0 and 3 on rack-a alone.
    assignment = create_topic(env.cluster, "racked", 6, 2)
    for replicas in assignment.partitions.values():
        assert {RACKS[b] for b in replicas} == {"rack-a", "rack-b"}, assignment.partitions
    rc, out, err = run_tool("kafka-configs.sh", "--bootstrap-server", env.cluster.bootstrap_servers,
                            "--describe", "--entity-type", "brokers", "--entity-default")
    assert rc == 0 and "Configs for default broker are" in out, (out, err)
    described = env.request(env.x, ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
        {"resource_type": 4, "resource_name": str(env.x), "configuration_keys": ["broker.rack"]}],
        "include_synonyms": False})["results"][0]
    assert [(e["name"], e["value"], e["read_only"]) for e in described["configs"]] == [
        ("broker.rack", RACKS[env.x], True)]
