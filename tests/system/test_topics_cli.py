"""kafka-topics.sh against a running cluster: Kafka's output formats and error messages."""

import pytest

from tests.harness.kafka import create_topic, read_assignment, topics_cli

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def cluster(request, zk_ensemble):
    from tests.harness.cluster import ClusterFixture
    c = ClusterFixture(3, ensemble=zk_ensemble, session_timeout_ms=4000).start()
    request.addfinalizer(c.stop)
    return c


def test_create_describe_list(cluster):
    create_topic(cluster, "alpha", 3, 2, "--config", "retention.ms=1000")
    create_topic(cluster, "beta", 1, 1, "--replica-assignment", "3")
    rc, out, _ = topics_cli(cluster, "--describe", "--topic", "alpha")
    assert rc == 0
    assert out == ("Topic:alpha\tPartitionCount:3\tReplicationFactor:2\tConfigs:retention.ms=1000\n"
                   "\tTopic: alpha\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
                   "\tTopic: alpha\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2,3\n"
                   "\tTopic: alpha\tPartition: 2\tLeader: 3\tReplicas: 3,1\tIsr: 3,1\n")
    rc, out, _ = topics_cli(cluster, "--list")
    assert rc == 0 and out.splitlines()[:2] == ["alpha", "beta"]
    rc, out, _ = topics_cli(cluster, "--describe", "--topic", "nothing-like-it")
    assert rc == 0 and out == "", "0.8.2 prints nothing for a topic that does not exist"


def test_filters(cluster):
    create_topic(cluster, "gamma", 3, 3)
    rc, out, _ = topics_cli(cluster, "--describe", "--under-replicated-partitions")
    assert rc == 0 and out == ""
    rc, out, _ = topics_cli(cluster, "--describe", "--unavailable-partitions")
    assert rc == 0 and out == ""


def test_add_partitions(cluster):
    create_topic(cluster, "delta", 2, 2)
    rc, out, _ = topics_cli(cluster, "--alter", "--topic", "delta", "--partitions", "4")
    assert rc == 0 and out.endswith("Adding partitions succeeded!\n")
    assert read_assignment(cluster, "delta").partitions == {0: (1, 2), 1: (2, 3), 2: (3, 1), 3: (1, 2)}
    from tests.harness.kafka import read_states
    cluster.wait_until(lambda: len(read_states(cluster, "delta")) == 4,
                       message="the controller did not bring the added partitions online")


@pytest.mark.parametrize("args, message", [
    (["--create", "--topic", "x", "--partitions", "1", "--replication-factor", "4"],
     "replication factor: 4 larger than available brokers: 3"),
    (["--create", "--topic", "x", "--replica-assignment", "1:1"],
     "Partition replica lists may not contain duplicate entries: 1"),
    (["--create", "--topic", "x", "--replica-assignment", "1:2,3"],
     "Partition 1 has different replication factor: [3]"),
    (["--create", "--topic", "a/b", "--partitions", "1", "--replication-factor", "1"],
     "Topic name \"a/b\" is illegal"),
    (["--create", "--topic", "x", "--partitions", "0", "--replication-factor", "1"],
     "number of partitions must be larger than 0"),
    (["--create", "--topic", "x", "--partitions", "1"], 'Missing required argument "[replication-factor]"'),
    (["--create", "--topic", "x", "--partitions", "1", "--replication-factor", "1", "--config", "nope=1"],
     'Unknown configuration "nope"'),
    (["--alter", "--topic", "missing", "--partitions", "3"], "Topic missing does not exist on ZK path"),
])
def test_bad_input_gets_kafkas_message_and_rc_1(cluster, args, message):
    rc, out, err = topics_cli(cluster, *args)
    assert rc == 1, (out, err)
    assert out.startswith("Error while executing topic command : ") or "Missing" in out
    assert message in out, out
    assert not cluster.zk.exists("/brokers/topics/x"), "bad input must write nothing"


def test_existing_topic_and_action_errors(cluster):
    create_topic(cluster, "epsilon", 1, 1)
    rc, out, _ = topics_cli(cluster, "--create", "--topic", "epsilon", "--partitions", "1",
                            "--replication-factor", "1")
    assert rc == 1 and 'Topic "epsilon" already exists.' in out
    rc, out, _ = topics_cli(cluster, "--list", "--describe")
    assert rc == 1 and "Command must include exactly one action" in out
    from tests.harness.kafka import run_tool
    rc, out, _ = run_tool("kafka-topics.sh", "--list")
    assert rc == 1 and 'Missing required argument "[zookeeper]"' in out


def test_broker_api_versions_tool(cluster):
    """kafka-broker-api-versions.sh (joins this module's cluster): Kafka's output, per broker,
    with the Kafka 2.1 ranges the brokers advertise."""
    import re

    from tests.harness.kafka import run_tool
    rc, out, err = run_tool("kafka-broker-api-versions.sh", "--bootstrap-server",
                            cluster.bootstrap_servers.split(",")[0])
    assert rc == 0, err
    blocks = re.findall(r"^(\S+):(\d+) \(id: (\d+) rack: null\) -> \(\n((?:\t.*\n)+)\)$", out, re.M)
    assert sorted(int(b[2]) for b in blocks) == [1, 2, 3], out
    assert sorted(f"{h}:{p}" for h, p, _, _ in blocks) == \
        sorted(cluster.bootstrap_servers.split(",")), out
    for _, _, _, body in blocks:
        lines = [line.strip().rstrip(",") for line in body.splitlines()]
        for expected in ("Produce(0): 0 to 7 [usable: 7]", "Fetch(1): 0 to 10 [usable: 10]",
                         "Metadata(3): 0 to 7 [usable: 7]", "OffsetCommit(8): 0 to 6 [usable: 6]",
                         "OffsetFetch(9): 0 to 5 [usable: 5]", "JoinGroup(11): 0 to 3 [usable: 3]",
                         "StopReplica(5): 0 to 1 [usable: 1]", "InitProducerId(22): 0 to 1 [usable: 1]",
                         "OffsetForLeaderEpoch(23): 0 to 2 [usable: 2]",
                         "DeleteGroups(42): 0 to 1 [usable: 1]"):
            assert expected in lines, (expected, lines)
        keys = [int(re.match(r"\w+\((\d+)\)", line).group(1)) for line in lines]
        assert keys == sorted(keys)
    rc, _, err = run_tool("kafka-broker-api-versions.sh")
    assert rc == 1 and "--bootstrap-server" in err
