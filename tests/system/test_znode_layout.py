"""What an operator sees with zkCli.sh, and that every znode written matches its schema."""

import json
import re

import pytest

from kafka_ha.zk.schemas import validate_znode
from tests.harness.kafka import create_topic, topics_cli
from tests.harness.zk import zkcli

pytestmark = pytest.mark.system

# path pattern -> schema family, for every znode kafka-ha writes
FAMILIES = [
    (r"/controller", "controller"),
    (r"/controller_epoch", "controller_epoch"),
    (r"/brokers/ids/\d+", "broker_registration"),
    (r"/brokers/topics/[^/]+", "topic_assignment"),
    (r"/brokers/topics/[^/]+/partitions/\d+/state", "partition_state"),
    (r"/config/topics/[^/]+", "topic_config"),
    (r"/config/changes/config_change_\d{10}", "config_change_notification"),
    (r"/admin/delete_topics/[^/]+", "delete_topic_marker"),
    (r"/cluster/id", "cluster_id"),
]
# data-less parents and ensured paths
PARENTS = re.compile(r"/(brokers|brokers/ids|brokers/topics|brokers/seqid|brokers/topics/[^/]+/partitions"
                     r"|brokers/topics/[^/]+/partitions/\d+|config|config/\w+|admin|admin/\w+"
                     r"|consumers|isr_change_notification|log_dir_event_notification"
                     r"|latest_producer_id_block|cluster)")


def walk(zk, path="/"):
    for child in zk.get_children(path):
        full = f"{path.rstrip('/')}/{child}"
        yield full
        yield from walk(zk, full)


def test_every_znode_matches_its_schema_and_zkcli_shows_kafka_json(cluster_factory):
    cluster = cluster_factory(3, session_timeout_ms=4000)
    create_topic(cluster, "layout", 3, 3, "--config", "retention.ms=1000")
    rc, out, err = topics_cli(cluster, "--alter", "--topic", "layout", "--config", "retention.ms=2000")
    assert rc == 0, (out, err)
    checked = set()
    for path in walk(cluster.zk):
        data, _ = cluster.zk.get(path)
        family = next((f for pattern, f in FAMILIES if re.fullmatch(pattern, path)), None)
        if family is None:
            assert PARENTS.fullmatch(path), f"unexpected znode {path}"
            assert not data, f"parent {path} should carry no data"
            continue
        validate_znode(family, data)  # raises jsonschema.ValidationError
        checked.add(family)
    assert {"controller", "controller_epoch", "broker_registration", "topic_assignment",
            "partition_state", "topic_config", "config_change_notification", "cluster_id"} <= checked

    connect = cluster.connect_string
    rc, out, _ = zkcli(connect, "get", "/brokers/topics/layout/partitions/0/state")
    assert rc == 0
    state = json.loads(out.strip())
    assert set(state) == {"controller_epoch", "leader", "version", "leader_epoch", "isr"}
    assert state["version"] == 1 and state["leader_epoch"] == 0 and state["isr"][0] == state["leader"]
    assert " " not in out.strip(), "Kafka writes compact JSON"
    rc, out, _ = zkcli(connect, "get", "/controller_epoch")
    assert out.strip() == "1"
    rc, out, _ = zkcli(connect, "get", "/brokers/ids/2")
    broker = json.loads(out.strip())
    assert broker["host"] == "127.0.0.1" and broker["port"] == cluster.port(2)
    assert isinstance(broker["timestamp"], str) and broker["timestamp"].isdigit()
    assert broker["endpoints"] == [f"PLAINTEXT://127.0.0.1:{cluster.port(2)}"]
    rc, out, _ = zkcli(connect, "get", "/brokers/topics/layout")
    assert json.loads(out.strip()) == {"version": 1, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1],
                                                                   "2": [3, 1, 2]}}
    rc, out, _ = zkcli(connect, "get", "/controller")
    controller = json.loads(out.strip())
    assert controller["version"] == 1 and controller["brokerid"] == cluster.controller()
