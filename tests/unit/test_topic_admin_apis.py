"""CreateTopics, DeleteTopics and CreatePartitions on the controller, without a cluster.

The real handlers (:mod:`kafka_ha.broker.topic_admin_apis`) and the real admin store run
over an in-memory ZooKeeper (:class:`tests.harness.fake_kazoo.FakeKazooClient`); the
metadata cache is filled by hand, as UpdateMetadata would, and time is a fake clock that
the handlers' sleep advances.  The wire layouts are checked byte for byte.
"""
from __future__ import annotations

import struct

import pytest

from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.broker.topic_admin_apis import TopicAdminApis
from kafka_ha.model import BrokerEndpoint, PartitionStateInfo, TopicPartition
from kafka_ha.protocol.api import REQUEST_SCHEMAS, RESPONSE_SCHEMAS, SUPPORTED_VERSIONS, ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk.errors import ZkBadVersion
from tests.harness.fake_kazoo import FakeKazooClient
from tests.harness.fake_zookeeper import FakeZooKeeper

E = ErrorCode


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.on_sleep = None

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.on_sleep:
            self.on_sleep()


@pytest.fixture
def env():
    client = FakeKazooClient.on(FakeZooKeeper())
    for b in (1, 2, 3):
        client.create(f"/brokers/ids/{b}", b"{}", makepath=True)
    admin = ZkAdmin(client=client)
    metadata = MetadataCache(1)
    metadata.brokers = {b: BrokerEndpoint(b, "h", 9000 + b) for b in (1, 2, 3)}
    clock = FakeClock()
    state = {"controller": True}
    apis = TopicAdminApis(admin, metadata, lambda: state["controller"], True, clock.sleep, clock)
    return apis, admin, metadata, clock, state


def publish(metadata: MetadataCache, topic: str, replicas: dict[int, tuple[int, ...]]) -> None:
    """What an UpdateMetadata from the controller would leave: every partition led."""
    metadata.partitions[topic] = {
        p: PartitionStateInfo(TopicPartition(topic, p), rs[0], 0, list(rs), 0, list(rs), 0)
        for p, rs in replicas.items()}


def topic(name, partitions=1, rf=1, assignments=(), configs=None):
    return {"name": name, "num_partitions": partitions, "replication_factor": rf,
            "assignments": [{"partition_index": p, "broker_ids": list(b)} for p, b in assignments],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


def results(response, field="topics"):
    return {r["name"]: r["error_code"] for r in response[field]}


def test_versions_and_wire_layouts():
    assert {k: SUPPORTED_VERSIONS[k] for k in (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS,
                                               ApiKey.CREATE_PARTITIONS)} == {
        ApiKey.CREATE_TOPICS: (0, 3), ApiKey.DELETE_TOPICS: (0, 3), ApiKey.CREATE_PARTITIONS: (0, 1)}
    # CreateTopics v1 request: [name, partitions, rf, [assignment], [config]], timeout, validate_only.
    body = {"topics": [topic("t", -1, -1, [(0, (2,))], {"k": None})], "timeout_ms": 7,
            "validate_only": True}
    expected = (struct.pack(">ih", 1, 1) + b"t" + struct.pack(">ihi", -1, -1, 1)
                + struct.pack(">iii", 0, 1, 2) + struct.pack(">ih", 1, 1) + b"k"
                + struct.pack(">h", -1) + struct.pack(">i?", 7, True))
    assert REQUEST_SCHEMAS[(ApiKey.CREATE_TOPICS, 1)].to_bytes(body) == expected
    assert REQUEST_SCHEMAS[(ApiKey.CREATE_TOPICS, 0)].to_bytes(body) == expected[:-1]
    answer = {"throttle_time_ms": 5, "topics": [{"name": "t", "error_code": 36, "error_message": "x"}]}
    v0 = struct.pack(">ih", 1, 1) + b"t" + struct.pack(">h", 36)
    assert RESPONSE_SCHEMAS[(ApiKey.CREATE_TOPICS, 0)].to_bytes(answer) == v0
    assert RESPONSE_SCHEMAS[(ApiKey.CREATE_TOPICS, 1)].to_bytes(answer) == v0 + struct.pack(">h", 1) + b"x"
    assert RESPONSE_SCHEMAS[(ApiKey.CREATE_TOPICS, 3)].to_bytes(answer) == \
        struct.pack(">i", 5) + v0 + struct.pack(">h", 1) + b"x"
    deleted = {"throttle_time_ms": 5, "responses": [{"name": "t", "error_code": 3}]}
    assert RESPONSE_SCHEMAS[(ApiKey.DELETE_TOPICS, 0)].to_bytes(deleted) == v0[:-2] + struct.pack(">h", 3)
    assert RESPONSE_SCHEMAS[(ApiKey.DELETE_TOPICS, 3)].to_bytes(deleted) == \
        struct.pack(">i", 5) + v0[:-2] + struct.pack(">h", 3)
    # CreatePartitions: a null assignment list is -1.
    grow = {"topics": [{"name": "t", "count": 3, "assignments": None}], "timeout_ms": 1,
            "validate_only": False}
    assert REQUEST_SCHEMAS[(ApiKey.CREATE_PARTITIONS, 1)].to_bytes(grow) == (
        struct.pack(">ih", 1, 1) + b"t" + struct.pack(">iiiB", 3, -1, 1, 0))


def test_create_waits_for_the_leaders_then_answers(env):
    apis, admin, metadata, clock, _ = env
    clock.on_sleep = lambda: clock.now >= 0.2 and publish(metadata, "a", {0: (1, 2), 1: (2, 3)})
    response = apis.create_topics({"topics": [topic("a", 2, 2, configs={"retention.ms": "9"})],
                                   "timeout_ms": 5000, "validate_only": False}, 3)
    assert response["topics"] == [{"name": "a", "error_code": E.NONE, "error_message": None}]
    assert 0.2 <= clock.now < 5, "answered once the leaders were known, not at the timeout"
    assert admin.store.assignment("a").partitions == {0: (1, 2), 1: (2, 3)}
    assert admin.store.topic_config("a") == {"retention.ms": "9"}


def test_create_refusals(env):
    apis, admin, metadata, clock, _ = env
    publish(metadata, "taken", {0: (1,)})
    admin.create_topic("taken", {0: (1,)}, {})
    admin.create_topic("going", {0: (1,)}, {})
    admin.store.create_deletion_marker("going")
    response = apis.create_topics({"topics": [
        topic("taken"), topic("going"), topic("twice"), topic("twice"), topic("rf", 1, 4),
        topic("zero", 0, 1), topic("bad/name"), topic("cfg", configs={"nope": "1"}),
        topic("null", configs={"retention.ms": None}),
        topic("dup", -1, -1, [(0, (1, 1))]), topic("gap", -1, -1, [(0, (1,)), (2, (2,))]),
        topic("ghost", -1, -1, [(0, (1, 9))]), topic("both", 3, 1, [(0, (1,))]),
        topic("huge", 2**31 - 1, 1)],
        "timeout_ms": 1000, "validate_only": False}, 1)
    assert results(response) == {
        "taken": E.TOPIC_ALREADY_EXISTS, "going": E.TOPIC_ALREADY_EXISTS,
        "twice": E.INVALID_REQUEST, "rf": E.INVALID_REPLICATION_FACTOR, "zero": E.INVALID_PARTITIONS,
        "bad/name": E.INVALID_TOPIC_EXCEPTION, "cfg": E.INVALID_CONFIG, "null": E.INVALID_REQUEST,
        "dup": E.INVALID_REPLICA_ASSIGNMENT, "gap": E.INVALID_REPLICA_ASSIGNMENT,
        "ghost": E.INVALID_REPLICA_ASSIGNMENT, "both": E.INVALID_REQUEST,
        "huge": E.INVALID_PARTITIONS}
    messages = {r["name"]: r["error_message"] for r in response["topics"]}
    assert messages["rf"] == "replication factor: 4 larger than available brokers: 3"
    assert messages["ghost"] == "Unknown broker(s) in replica assignment: 9"
    assert admin.store.topics() == ["going", "taken"], "a refused entry writes nothing"
    assert clock.now == 0, "nothing was created, so nothing was waited for"


def test_validate_only_and_timeouts(env):
    apis, admin, metadata, clock, _ = env
    body = {"topics": [topic("v", 2, 3)], "timeout_ms": 1000, "validate_only": True}
    assert results(apis.create_topics(body, 1)) == {"v": E.NONE}
    assert admin.store.topics() == [] and clock.now == 0
    # Created but never published: REQUEST_TIMED_OUT at the timeout; the topic stays.
    assert results(apis.create_topics({**body, "validate_only": False}, 1)) == {"v": E.REQUEST_TIMED_OUT}
    assert 1 <= clock.now < 1.2 and admin.store.topics() == ["v"]
    # timeout 0: no wait at all (Kafka's answer), validate_only still NONE.
    clock.now = 0
    assert results(apis.create_topics({"topics": [topic("w")], "timeout_ms": 0}, 0)) == \
        {"w": E.REQUEST_TIMED_OUT}
    assert clock.now == 0 and "w" in admin.store.topics()


def test_only_the_controller_serves(env):
    apis, admin, _, _, state = env
    state["controller"] = False
    assert results(apis.create_topics({"topics": [topic("x")], "timeout_ms": 10}, 0)) == \
        {"x": E.NOT_CONTROLLER}
    assert results(apis.delete_topics({"topic_names": ["x"], "timeout_ms": 10}, 0), "responses") == \
        {"x": E.NOT_CONTROLLER}
    grow = {"topics": [{"name": "x", "count": 2, "assignments": None}], "timeout_ms": 10,
            "validate_only": False}
    assert results(apis.create_partitions(grow, 0), "results") == {"x": E.NOT_CONTROLLER}
    assert admin.store.topics() == []


def test_delete(env):
    apis, admin, metadata, clock, _ = env
    admin.create_topic("d", {0: (1,)}, {})
    publish(metadata, "d", {0: (1,)})
    clock.on_sleep = lambda: metadata.partitions.pop("d", None)
    response = apis.delete_topics({"topic_names": ["d", "nope"], "timeout_ms": 3000}, 3)
    assert results(response, "responses") == {"d": E.NONE, "nope": E.UNKNOWN_TOPIC_OR_PARTITION}
    assert admin.store.topics_marked_for_deletion() == ["d"]
    # Marked already: the same answer once it is gone.
    assert results(apis.delete_topics({"topic_names": ["d"], "timeout_ms": 3000}, 3), "responses") \
        == {"d": E.NONE}
    apis.delete_enabled = False
    assert results(apis.delete_topics({"topic_names": ["d"], "timeout_ms": 1}, 3), "responses") == \
        {"d": E.TOPIC_DELETION_DISABLED}
    assert results(apis.delete_topics({"topic_names": ["d"], "timeout_ms": 1}, 2), "responses") == \
        {"d": E.INVALID_REQUEST}


def test_create_partitions(env, monkeypatch):
    apis, admin, metadata, clock, _ = env
    admin.create_topic("g", {0: (1, 2), 1: (2, 3)}, {})
    clock.on_sleep = lambda: publish(metadata, "g", admin.store.assignment("g").partitions)

    def grow(count, assignments=None, validate_only=False, name="g"):
        body = {"topics": [{"name": name, "count": count, "assignments": assignments}],
                "timeout_ms": 2000, "validate_only": validate_only}
        (result,) = apis.create_partitions(body, 1)["results"]
        return result["error_code"]

    assert grow(3, validate_only=True) == E.NONE and len(admin.store.assignment("g").partitions) == 2
    assert grow(3) == E.NONE and admin.store.assignment("g").partitions[2] == (3, 1)
    assert grow(3) == E.INVALID_PARTITIONS
    assert grow(5, [{"broker_ids": [1, 2]}]) == E.INVALID_REPLICA_ASSIGNMENT   # 2 new, 1 listed
    assert grow(4, [{"broker_ids": [1]}]) == E.INVALID_REPLICA_ASSIGNMENT      # rf 1 next to 2
    assert grow(4, [{"broker_ids": [1, 8]}]) == E.INVALID_REPLICA_ASSIGNMENT   # no broker 8
    assert grow(2, name="none") == E.UNKNOWN_TOPIC_OR_PARTITION
    assert grow(4, [{"broker_ids": [3, 2]}]) == E.NONE
    assert admin.store.assignment("g").partitions[3] == (3, 2)
    # A concurrent change of the assignment: read and planned again, then written.
    real, calls = admin.add_partitions, []

    def racing(current, new):
        calls.append(new)
        if len(calls) == 1:
            raise ZkBadVersion()
        real(current, new)
    monkeypatch.setattr(admin, "add_partitions", racing)
    assert grow(5) == E.NONE and len(calls) == 2
    # Anything unforeseen is that entry's UNKNOWN_SERVER_ERROR, not the broker's end.
    monkeypatch.setattr(admin, "add_partitions", lambda c, n: 1 / 0)
    assert grow(6) == E.UNKNOWN_SERVER_ERROR


def test_an_update_metadata_wakes_the_waiting_requests():
    import gevent
    metadata = MetadataCache(1)
    waiter = gevent.spawn(metadata.wait_for_update, 600)
    gevent.sleep(0)
    assert not waiter.ready()
    metadata.update({"controller_id": 1, "controller_epoch": 1, "partition_states": [],
                     "live_brokers": [{"id": 1, "host": "h", "port": 1}]}, 0, 7)
    gevent.sleep(0)
    assert waiter.ready(), "woken by the update, not by its 600 s bound"


def test_the_tools_client_follows_the_controller(monkeypatch):
    """kafka-topics.sh --bootstrap-server's client: no controller yet, then a broker that
    is no longer the controller, then the controller's answer."""
    from types import SimpleNamespace

    from kafka_ha.admin import controller_client, topic_admin_client as tac
    monkeypatch.setattr(controller_client.gevent, "sleep", lambda s: None)
    controllers = iter([-1, 2, 3])
    sent = []

    class FakeCluster:
        def refresh(self, topics):
            return SimpleNamespace(controller_id=next(controllers))

        def request(self, node, key, version, body):
            sent.append((node, key, version))
            code = E.NOT_CONTROLLER if node == 2 else E.TOPIC_ALREADY_EXISTS
            return {"topics": [{"name": "t", "error_code": code, "error_message": "m"}]}

        def close(self):
            pass

    client = tac.TopicAdminClient("127.0.0.1:1", timeout_s=30)
    client.cluster = FakeCluster()
    assert client.create_topic("t", 1, 1, None, {}) == (E.TOPIC_ALREADY_EXISTS, "m")
    assert sent == [(2, ApiKey.CREATE_TOPICS, 3), (3, ApiKey.CREATE_TOPICS, 3)]
