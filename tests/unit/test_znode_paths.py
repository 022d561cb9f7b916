"""Znode paths and topic names: where each family lives, and which names Kafka accepts."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from kafka_ha.zk import znodes
from kafka_ha.zk.admin_znodes import (ConfigChangeZNode, ConsumerOffsetZNode, DeleteTopicZNode,
                                      IsrChangeNotificationZNode, PreferredReplicaElectionZNode,
                                      ReassignPartitionsZNode, TopicConfigZNode)
from kafka_ha.zk.znodes import (PERSISTENT_PATHS, BrokerIdZNode, ClusterIdZNode,
                                ControllerEpochZNode, ControllerZNode, TopicPartitionStateZNode,
                                TopicPartitionsZNode, TopicPartitionZNode, TopicZNode,
                                validate_topic_name)


# --- Paths ---------------------------------------------------------------------------


def test_paths() -> None:
    assert BrokerIdZNode.path(3) == "/brokers/ids/3"
    assert TopicZNode.path("t") == "/brokers/topics/t"
    assert TopicPartitionsZNode.path("t") == "/brokers/topics/t/partitions"
    assert TopicPartitionZNode.path("t", 2) == "/brokers/topics/t/partitions/2"
    assert TopicPartitionStateZNode.path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert DeleteTopicZNode.path("t") == "/admin/delete_topics/t"
    assert TopicConfigZNode.path("t") == "/config/topics/t"
    assert ConsumerOffsetZNode.path("g", "t", 0) == "/consumers/g/offsets/t/0"
    assert ControllerZNode.PATH == "/controller"
    assert ControllerEpochZNode.PATH == "/controller_epoch"
    assert ClusterIdZNode.PATH == "/cluster/id"
    assert ReassignPartitionsZNode.PATH == "/admin/reassign_partitions"
    assert PreferredReplicaElectionZNode.PATH == "/admin/preferred_replica_election"
    assert ConfigChangeZNode.PREFIX == "/config/changes/config_change_"
    assert ConfigChangeZNode.path(12) == "/config/changes/config_change_0000000012"
    assert IsrChangeNotificationZNode.PREFIX == "/isr_change_notification/isr_change_"
    assert IsrChangeNotificationZNode.path(3) == "/isr_change_notification/isr_change_0000000003"
    assert (znodes.BROKER_IDS_PATH, znodes.BROKER_TOPICS_PATH, znodes.BROKER_SEQID_PATH) == (
        "/brokers/ids", "/brokers/topics", "/brokers/seqid")
    assert (znodes.DELETE_TOPICS_PATH, znodes.CONFIG_TOPICS_PATH, znodes.CONFIG_CHANGES_PATH,
            znodes.ISR_CHANGE_NOTIFICATION_PATH) == (
        "/admin/delete_topics", "/config/topics", "/config/changes", "/isr_change_notification")


@pytest.mark.parametrize("build", [
    lambda: TopicZNode.path("a/b"), lambda: TopicZNode.path(""), lambda: TopicZNode.path(".."),
    lambda: BrokerIdZNode.path(-1), lambda: BrokerIdZNode.path(True),
    lambda: TopicPartitionStateZNode.path("t", -1), lambda: ConsumerOffsetZNode.path("g/h", "t", 0),
])
def test_paths_refuse_unsafe_components(build: Callable[[], str]) -> None:
    with pytest.raises(ValueError):
        build()


def test_persistent_paths_cover_0_8_2_and_2_x_startup_lists() -> None:
    v082 = {"/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/config/topics",
            "/admin/delete_topics"}
    v2x = {"/brokers/seqid", "/isr_change_notification", "/log_dir_event_notification",
           "/latest_producer_id_block"}
    assert v082 | v2x <= set(PERSISTENT_PATHS)
    assert len(set(PERSISTENT_PATHS)) == len(PERSISTENT_PATHS)


# --- Topic names ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["t", "a.b_c-D9", "x" * 249])
def test_valid_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize("name, message", [
    ("", "Topic name is illegal, it can't be empty"),
    (".", 'Topic name cannot be "." or ".."'),
    ("..", 'Topic name cannot be "." or ".."'),
    ("x" * 250, "Topic name is illegal, it can't be longer than 249 characters, topic name: "
                + "x" * 250),
    ("a b", 'Topic name "a b" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"),
    ("é", 'Topic name "é" is illegal, it contains a character other than ASCII '
          "alphanumerics, '.', '_' and '-'"),
    ("t\n", 'Topic name "t\n" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"),
])
def test_invalid_topic_names_get_kafkas_messages(name: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        validate_topic_name(name)
    assert str(caught.value) == message
