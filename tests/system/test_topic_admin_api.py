"""The Admin API's CreateTopics, DeleteTopics and CreatePartitions against real brokers.

Unmodified kafka-python ``KafkaAdminClient`` and confluent-kafka ``AdminClient`` (they
find the controller in Metadata), a raw request to a broker that is not the
controller, and ``kafka-topics.sh --bootstrap-server``.  One 3-broker cluster for the
module: each test uses its own topic names.
"""
import json

import pytest

from kafka_ha.client.cluster import ClusterMetadata
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from tests.harness.kafka import read_assignment, run_tool

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def cluster(request, zk_ensemble):
    from tests.harness.cluster import ClusterFixture
    c = ClusterFixture(3, ensemble=zk_ensemble, session_timeout_ms=4000).start()
    request.addfinalizer(c.stop)
    c.wait_until(lambda: c.controller() is not None, message="no controller elected")
    return c


def topic_config(cluster, topic):
    data, _ = cluster.zk.get(f"/config/topics/{topic}")
    return json.loads(data)["config"]


def topic_exists(cluster, topic):
    return cluster.zk.exists(f"/brokers/topics/{topic}") is not None


def test_kafka_python_admin_client(cluster):
    from kafka.admin import KafkaAdminClient, NewPartitions
    from kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30000)
    try:
        # kafka-python 3's documented form (a list of NewTopic is deprecated); it sends the
        # counts along with the assignment to brokers older than 2.4.
        admin.create_topics({
            "kp-configs": {"num_partitions": 3, "replication_factor": 2,
                           "configs": {"retention.ms": "1000"}},
            "kp-assigned": {"num_partitions": 2, "replication_factor": 2,
                            "assignments": {0: [3, 1], 1: [2, 3]}}}, timeout_ms=20000)
        assert read_assignment(cluster, "kp-configs").partitions == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
        assert topic_config(cluster, "kp-configs") == {"retention.ms": "1000"}
        assert read_assignment(cluster, "kp-assigned").partitions == {0: (3, 1), 1: (2, 3)}
        # The answer came once the leaders were known: the metadata has them at once.
        described = {t["name"]: t for t in admin.describe_topics(["kp-configs", "kp-assigned"])}
        assert [p["leader_id"] for p in sorted(described["kp-assigned"]["partitions"],
                                               key=lambda p: p["partition_index"])] == [3, 2]

        admin.create_topics({"kp-validate": {"num_partitions": 2, "replication_factor": 2}},
                            validate_only=True)
        assert not topic_exists(cluster, "kp-validate"), "validate_only must write nothing"
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics({"kp-configs": {"num_partitions": 1, "replication_factor": 1}})
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics({"kp-rf4": {"num_partitions": 1, "replication_factor": 4}})
        assert not topic_exists(cluster, "kp-rf4")

        admin.create_partitions({"kp-configs": NewPartitions(5)}, timeout_ms=20000)
        assert len(read_assignment(cluster, "kp-configs").partitions) == 5

        admin.delete_topics(["kp-assigned"], timeout_ms=30000)
        cluster.wait_until(lambda: not topic_exists(cluster, "kp-assigned"),
                           message="kp-assigned was not deleted")
    finally:
        admin.close()


def test_confluent_kafka_admin_client(cluster):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def outcome(futures):
        errors = {}
        for name, future in futures.items():
            try:
                future.result(timeout=60)
                errors[name] = None
            except KafkaException as e:
                errors[name] = e.args[0].code()
        return errors

    assert outcome(admin.create_topics([
        NewTopic("cf-configs", num_partitions=2, replication_factor=3,
                 config={"cleanup.policy": "compact"}),
        NewTopic("cf-assigned", num_partitions=3, replica_assignment=[[1, 2], [2, 3], [3, 1]])],
        operation_timeout=20)) == {"cf-configs": None, "cf-assigned": None}
    assert topic_config(cluster, "cf-configs") == {"cleanup.policy": "compact"}
    assert read_assignment(cluster, "cf-assigned").partitions == {0: (1, 2), 1: (2, 3), 2: (3, 1)}

    assert outcome(admin.create_topics([NewTopic("cf-validate", 1, 1)], validate_only=True)) \
        == {"cf-validate": None}
    assert not topic_exists(cluster, "cf-validate")
    assert outcome(admin.create_topics([
        NewTopic("cf-configs", 1, 1),
        NewTopic("cf-rf9", num_partitions=1, replication_factor=9),
        NewTopic("cf-badconfig", 1, 1, config={"no.such.config": "1"}),
        NewTopic("cf-bad/name", 1, 1)])) == {
        "cf-configs": KafkaError.TOPIC_ALREADY_EXISTS,
        "cf-rf9": KafkaError.INVALID_REPLICATION_FACTOR,
        "cf-badconfig": KafkaError.INVALID_CONFIG,
        "cf-bad/name": KafkaError.TOPIC_EXCEPTION}
    assert not any(topic_exists(cluster, t) for t in ("cf-rf9", "cf-badconfig"))

    assert outcome(admin.create_partitions([NewPartitions("cf-configs", 4)],
                                           operation_timeout=20)) == {"cf-configs": None}
    assert len(read_assignment(cluster, "cf-configs").partitions) == 4
    assert outcome(admin.create_partitions([
        NewPartitions("cf-configs", 3), NewPartitions("cf-missing", 2),
        NewPartitions("cf-assigned", 4, replica_assignment=[[7, 1]])])) == {
        "cf-configs": KafkaError.INVALID_PARTITIONS,
        "cf-missing": KafkaError.UNKNOWN_TOPIC_OR_PART,
        "cf-assigned": KafkaError.INVALID_REPLICA_ASSIGNMENT}

    assert outcome(admin.delete_topics(["cf-assigned", "cf-missing"], operation_timeout=30)) == {
        "cf-assigned": None, "cf-missing": KafkaError.UNKNOWN_TOPIC_OR_PART}
    cluster.wait_until(lambda: not topic_exists(cluster, "cf-assigned"),
                       message="cf-assigned was not deleted")


def test_a_broker_that_is_not_the_controller_answers_not_controller(cluster):
    controller = cluster.controller()
    other = next(b for b in cluster.broker_ids if b != controller)
    with ClusterMetadata(cluster.bootstrap_servers) as client:
        meta = client.refresh()
        create = {"topics": [{"name": "raw-x", "num_partitions": 1, "replication_factor": 1,
                              "assignments": [], "configs": []}],
                  "timeout_ms": 5000, "validate_only": False}
        answer = client.request(other, ApiKey.CREATE_TOPICS, 2, create)
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == \
            [("raw-x", ErrorCode.NOT_CONTROLLER)]
        answer = client.request(other, ApiKey.DELETE_TOPICS, 1,
                                {"topic_names": ["raw-x"], "timeout_ms": 5000})
        assert answer["responses"] == [{"name": "raw-x", "error_code": ErrorCode.NOT_CONTROLLER}]
        # v0 of CreateTopics, straight to the controller: no error messages, same rules.
        answer = client.request(controller, ApiKey.CREATE_TOPICS, 0,
                                {**create, "topics": [{**create["topics"][0], "num_partitions": 0}]})
        assert answer["topics"] == [{"name": "raw-x", "error_code": ErrorCode.INVALID_PARTITIONS}]
        # timeout 0: created, but not waited for (Kafka's REQUEST_TIMED_OUT).
        answer = client.request(controller, ApiKey.CREATE_TOPICS, 1, {**create, "timeout_ms": 0})
        assert answer["topics"][0]["error_code"] == ErrorCode.REQUEST_TIMED_OUT
        assert topic_exists(cluster, "raw-x")
        assert meta.brokers, "metadata names the brokers"


def test_kafka_topics_sh_with_bootstrap_server(cluster):
    def topics(*args):
        return run_tool("kafka-topics.sh", "--bootstrap-server", cluster.bootstrap_servers, *args)

    rc, out, err = topics("--create", "--topic", "cli-a", "--partitions", "3",
                          "--replication-factor", "2", "--config", "retention.ms=5000")
    assert (rc, out) == (0, 'Created topic "cli-a".\n'), err
    assert topic_config(cluster, "cli-a") == {"retention.ms": "5000"}
    rc, out, _ = topics("--create", "--topic", "cli-b", "--replica-assignment", "2:3")
    assert rc == 0 and read_assignment(cluster, "cli-b").partitions == {0: (2, 3)}
    # The answer came once the leaders were known, so describe shows them at once.
    rc, out, _ = topics("--describe", "--topic", "cli-a")
    assert rc == 0 and out == (
        "Topic:cli-a\tPartitionCount:3\tReplicationFactor:2\tConfigs:\n"
        "\tTopic: cli-a\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
        "\tTopic: cli-a\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2,3\n"
        "\tTopic: cli-a\tPartition: 2\tLeader: 3\tReplicas: 3,1\tIsr: 3,1\n")
    rc, out, _ = topics("--list", "--topic", "cli-.*")
    assert (rc, out) == (0, "cli-a\ncli-b\n")

    rc, out, _ = topics("--alter", "--topic", "cli-a", "--partitions", "4")
    assert rc == 0 and out.endswith("Adding partitions succeeded!\n")
    assert read_assignment(cluster, "cli-a").partitions[3] == (1, 2)

    for args, message in [
            (("--create", "--topic", "cli-a", "--partitions", "1", "--replication-factor", "1"),
             'Topic "cli-a" already exists.'),
            (("--create", "--topic", "cli-x", "--partitions", "1", "--replication-factor", "4"),
             "INVALID_REPLICATION_FACTOR: replication factor: 4 larger than available brokers: 3"),
            (("--create", "--topic", "cli-x", "--partitions", "1", "--replication-factor", "1",
              "--config", "nope=1"), 'INVALID_CONFIG: requirement failed: Unknown configuration "nope"'),
            (("--alter", "--topic", "cli-a", "--partitions", "2"), "INVALID_PARTITIONS: "),
            (("--delete", "--topic", "no-such-topic"), "Topic no-such-topic does not exist")]:
        rc, out, _ = topics(*args)
        assert rc == 1 and f"Error while executing topic command : {message}" in out, (args, out)
    assert not topic_exists(cluster, "cli-x")

    rc, out, _ = topics("--delete", "--topic", "cli-b")
    assert (rc, out) == (0, "Topic cli-b is marked for deletion.\n")
    cluster.wait_until(lambda: not topic_exists(cluster, "cli-b"), message="cli-b was not deleted")
    rc, out, _ = run_tool("kafka-topics.sh", "--bootstrap-server", cluster.bootstrap_servers,
                          "--zookeeper", cluster.connect_string, "--list")
    assert rc == 1 and "Only one of --bootstrap-server or --zookeeper" in out

    # Last in the module: a dead broker's replicas stay listed (Metadata v1+), so describe
    # shows the real replication factor and finds the partitions it leaves under-replicated.
    cluster.kill(3)
    expected = ("\tTopic: cli-a\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2\n"
                "\tTopic: cli-a\tPartition: 2\tLeader: 1\tReplicas: 3,1\tIsr: 1\n")
    cluster.wait_until(lambda: topics("--describe", "--topic", "cli-a", "--under-replicated-partitions")[:2]
                       == (0, expected), timeout=60, message="describe never showed broker 3's partitions")
    rc, out, _ = topics("--describe", "--topic", "cli-a")
    assert rc == 0 and out.startswith("Topic:cli-a\tPartitionCount:4\tReplicationFactor:2\t"), out
