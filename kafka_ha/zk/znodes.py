"""Znode codecs for the broker, topic, partition, controller and cluster families.

One class per znode family, after Kafka's ``zk/ZkData.scala``: ``path(...)``
builds the znode path, ``encode(value)`` gives the exact bytes Kafka writes, and
``decode(data, path)`` turns bytes read from ZooKeeper back into a value from
:mod:`kafka_ha.model`, raising :class:`~kafka_ha.zk.errors.MalformedZnode`
when they are not what the family allows.  The admin, config, ISR-change and
consumer codecs live in :mod:`kafka_ha.zk.admin_znodes`, which builds on the
path constants and encoding helpers below (it imports this module, never the
other way round).

Writers are strict and readers are tolerant (docs/design.md §5):
encoders emit compact JSON in Kafka's key order so ``zkCli.sh get`` shows what
a real broker would, while decoders parse JSON and accept any key order,
whitespace and unknown keys, because other tools write these nodes too.  The
tests check every ``encode`` output against ``zk_schemas/<SCHEMA>.json``.
"""
from __future__ import annotations

import base64
import re
import uuid
from typing import Any

import ujson

from kafka_ha.model import NO_LEADER, BrokerInfo, LeaderAndIsr, TopicAssignment
from kafka_ha.zk.errors import (MalformedZnode, check_broker_ids, check_int, check_port,
                                check_str, check_timestamp, check_version, json_object,
                                last_segment_id, parse_decimal, parse_json, required, show)

# --- Static paths -----------------------------------------------------------

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"
BROKER_SEQID_PATH = "/brokers/seqid"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CLUSTER_ID_PATH = "/cluster/id"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
CONFIG_PATH = "/config"
CONFIG_TOPICS_PATH = "/config/topics"
CONFIG_BROKERS_PATH = "/config/brokers"
CONFIG_CHANGES_PATH = "/config/changes"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LATEST_PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONSUMERS_PATH = "/consumers"

# What a 2.x broker creates at startup if missing (ZkData ``PersistentZkPaths``,
# same order).  Kafka appends one /config/<type> per ConfigType, so the client,
# user and broker config roots come along with /config/topics; tools such as
# kafka-configs.sh expect them to exist.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH, BROKER_IDS_PATH, BROKER_TOPICS_PATH, CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH, BROKER_SEQID_PATH, ISR_CHANGE_NOTIFICATION_PATH,
    LATEST_PRODUCER_ID_BLOCK_PATH, LOG_DIR_EVENT_NOTIFICATION_PATH,
    CONFIG_TOPICS_PATH, "/config/clients", "/config/users", CONFIG_BROKERS_PATH)

# --- Topic names and path segments -----------------------------------------

MAX_TOPIC_NAME_LENGTH = 249  # 0.10+ (KAFKA-3219); 0.8.2 allowed 255.
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Apply Kafka's rules for a new topic name, with Kafka's messages.

    >>> validate_topic_name("orders.v1")
    >>> validate_topic_name("a/b")
    Traceback (most recent call last):
    ...
    ValueError: Topic name "a/b" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'
    """
    # Checks and wording follow clients' common/internals/Topic.validate (2.x).
    if not name:
        raise ValueError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise ValueError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise ValueError("Topic name is illegal, it can't be longer than "
                         f"{MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}")
    if not _TOPIC_CHARS.fullmatch(name):
        raise ValueError(f'Topic name "{name}" is illegal, it contains a character other than '
                         "ASCII alphanumerics, '.', '_' and '-'")


def path_segment(name: str, what: str) -> str:
    """``name`` if it is safe as one path component, else ValueError.

    Deliberately weaker than :func:`validate_topic_name`: topics created
    under older rules (0.8.2 allowed 255 characters) must stay addressable.
    """
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{what} {name!r} cannot be used as a znode name")
    return name


def non_negative(value: int, what: str) -> int:
    """``value`` if it is a non-negative int (and not a bool), else ValueError."""
    if type(value) is not int or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
    return value


# --- Encoding helpers (shared with admin_znodes) ------------------------------


def to_json_bytes(value: Any) -> bytes:
    """Compact JSON in the dict's insertion order, as Kafka's ``Json.encode``.

    ujson escapes "/" by default, which would turn ``PLAINTEXT://h:9092``
    into ``PLAINTEXT:\\/\\/h:9092``; Kafka never does, so neither do we.
    """
    return ujson.dumps(value, ensure_ascii=False, escape_forward_slashes=False).encode("utf-8")


def replica_list(replicas: Any, what: str) -> list[int]:
    """An assignment's replica list for encoding: distinct broker ids, at least one."""
    ids = [non_negative(r, f"{what} broker id") for r in replicas]
    if not ids or len(set(ids)) != len(ids):
        raise ValueError(f"{what} must be a non-empty list of distinct broker ids, got {ids}")
    return ids


# --- Broker registration -----------------------------------------------------

_ENDPOINT = re.compile(r"([^:/]+)://(?:\[([0-9A-Za-z%._:-]*)\]|([0-9A-Za-z%._-]*)):([0-9]+)")


def endpoint_string(host: str, port: int, listener: str = "PLAINTEXT") -> str:
    """Kafka's ``EndPoint.connectionString``: IPv6 hosts go in brackets."""
    return f"{listener}://[{host}]:{port}" if ":" in host else f"{listener}://{host}:{port}"


class BrokerIdZNode:
    """``/brokers/ids/<id>``, EPHEMERAL; its czxid is the broker epoch (KIP-380).

    Written in the v2 form (v1 keys plus ``endpoints``), or v3 when the broker
    has a rack; both keep the top-level ``host``/``port`` that old tools read:

    >>> BrokerIdZNode.encode(BrokerInfo(1, "h1", 9092, timestamp_ms=1420000000000))
    b'{"jmx_port":-1,"timestamp":"1420000000000","endpoints":["PLAINTEXT://h1:9092"],"host":"h1","version":2,"port":9092}'
    >>> BrokerIdZNode.decode(b'{"jmx_port":-1,"timestamp":"1","host":"h1","version":1,"port":9092}',
    ...                      "/brokers/ids/3", czxid=22).endpoint
    BrokerEndpoint(broker_id=3, host='h1', port=9092)
    """

    SCHEMA = "broker_registration"

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BROKER_IDS_PATH}/{non_negative(broker_id, 'broker id')}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        non_negative(info.broker_id, "broker id")
        if (not isinstance(info.host, str) or not info.host
                or type(info.port) is not int or not 0 <= info.port <= 65535):
            raise ValueError(f"broker {info.broker_id} needs a host and a port, "
                             f"got {info.host!r}:{info.port!r}")
        if type(info.jmx_port) is not int or info.jmx_port < -1:
            raise ValueError(f"jmx_port must be -1 or a port, got {info.jmx_port!r}")
        endpoints = list(info.endpoints) or [endpoint_string(info.host, info.port)]
        for endpoint in endpoints:
            if not _ENDPOINT.fullmatch(endpoint):
                raise ValueError(f"cannot parse {endpoint!r} to a broker endpoint")
        # Key order as a 0.9 broker writes it (hash order), so zkCli output
        # matches a real broker's byte for byte.
        timestamp = str(non_negative(info.timestamp_ms, "timestamp"))
        data: dict[str, Any] = {"jmx_port": info.jmx_port, "timestamp": timestamp,
                                "endpoints": endpoints, "host": info.host, "version": 2,
                                "port": info.port}
        if info.rack is not None:
            # v2 has no rack key; v3 (0.10.0) is v2 plus "rack".
            data["version"] = 3
            data["rack"] = check_str(info.rack, BrokerIdZNode.path(info.broker_id), "rack")
        return to_json_bytes(data)

    @staticmethod
    def decode(data: bytes | None, path: str, czxid: int = -1) -> BrokerInfo:
        """Accept v1..v5 (and later, as Kafka does); ``czxid`` becomes ``epoch``."""
        broker_id = last_segment_id(path, "broker id")
        obj = json_object(parse_json(data, path), path)
        version = check_int(required(obj, "version", path), path, "version", 1)
        jmx_port = check_int(obj.get("jmx_port", -1), path, "jmx_port", -1)
        timestamp_ms = check_timestamp(obj["timestamp"], path) if "timestamp" in obj else 0
        rack = obj.get("rack")
        if rack is not None:
            check_str(rack, path, "rack")
        if version == 1:
            host = check_str(required(obj, "host", path), path, "host")
            port = check_port(required(obj, "port", path), path, "port")
            endpoints: tuple[str, ...] = (endpoint_string(host, port),)
        else:
            endpoints = BrokerIdZNode._endpoints(obj, path)
            host, port = BrokerIdZNode._host_port(obj, endpoints, path)
        return BrokerInfo(broker_id, host, port, jmx_port, timestamp_ms, endpoints, rack, czxid)

    @staticmethod
    def _endpoints(obj: dict[str, Any], path: str) -> tuple[str, ...]:
        value = required(obj, "endpoints", path)
        if not isinstance(value, list):
            raise MalformedZnode(path, f"endpoints must be a list, got {show(value)}")
        for i, endpoint in enumerate(value):
            if not isinstance(endpoint, str) or not _ENDPOINT.fullmatch(endpoint):
                raise MalformedZnode(path, f"endpoints[{i}] is not LISTENER://host:port: "
                                           f"{show(endpoint)}")
        return tuple(value)

    @staticmethod
    def _host_port(obj: dict[str, Any], endpoints: tuple[str, ...], path: str) -> tuple[str, int]:
        host, port = obj.get("host"), obj.get("port")
        if host is not None and not isinstance(host, str):
            raise MalformedZnode(path, f"host must be a string or null, got {show(host)}")
        if port is not None and not (type(port) is int and port == -1):
            port = check_port(port, path, "port")
            if host:
                return host, port
        # 2.x writes host null / port -1 when no listener is PLAINTEXT; the
        # endpoints then say where the broker is (ZkData BrokerIdZNode.encode).
        protocols = obj.get("listener_security_protocol_map", {})
        if not isinstance(protocols, dict):
            raise MalformedZnode(path, "listener_security_protocol_map must be an object")
        for endpoint in endpoints:
            match = _ENDPOINT.fullmatch(endpoint)
            assert match is not None  # _endpoints() checked every entry
            listener, v6_host, v4_host, end_port = match.groups()
            if protocols.get(listener, listener) == "PLAINTEXT" and (v6_host or v4_host):
                return v6_host or v4_host, check_port(int(end_port), path, "endpoint port")
        raise MalformedZnode(path, "no host/port and no PLAINTEXT endpoint")


# --- Topics and partitions ------------------------------------------------------


class TopicZNode:
    """``/brokers/topics/<t>``: partition id -> replicas, head = preferred leader.

    >>> TopicZNode.encode(TopicAssignment("t", {1: (2, 3, 1), 0: (1, 2, 3)}))
    b'{"version":1,"partitions":{"0":[1,2,3],"1":[2,3,1]}}'
    >>> TopicZNode.decode(b'{"version":1,"partitions":{"0":[1,2]}}', "/brokers/topics/t",
    ...                   zk_version=4)
    TopicAssignment(topic='t', partitions={0: (1, 2)}, zk_version=4)
    """

    SCHEMA = "topic_assignment"

    @staticmethod
    def path(topic: str) -> str:
        return f"{BROKER_TOPICS_PATH}/{path_segment(topic, 'topic')}"

    @staticmethod
    def encode(assignment: TopicAssignment) -> bytes:
        if not assignment.partitions:
            raise ValueError(f"topic {assignment.topic!r} needs at least one partition")
        # Numeric order, so the bytes do not depend on how the dict was built.
        partitions = {
            str(non_negative(p, "partition")): replica_list(replicas, f"partition {p} replicas")
            for p, replicas in sorted(assignment.partitions.items())
        }
        return to_json_bytes({"version": 1, "partitions": partitions})

    @staticmethod
    def decode(data: bytes | None, path: str, zk_version: int = -1) -> TopicAssignment:
        topic = path.rstrip("/").rsplit("/", 1)[-1]
        obj = json_object(parse_json(data, path), path)
        check_version(obj, path)
        # Unknown keys (2.4's adding_replicas/removing_replicas) are ignored.
        partitions_obj = json_object(required(obj, "partitions", path), path, "partitions")
        if not partitions_obj:
            raise MalformedZnode(path, "partitions must not be empty")
        partitions: dict[int, tuple[int, ...]] = {}
        for key, replicas in partitions_obj.items():
            if not re.fullmatch(r"[0-9]+", key):
                raise MalformedZnode(path, f"partition id {show(key)} is not a non-negative "
                                           "integer")
            if int(key) in partitions:
                raise MalformedZnode(path, f"partition {int(key)} appears more than once")
            partitions[int(key)] = check_broker_ids(
                replicas, path, f"partitions[{key}]", allow_empty=False)
        return TopicAssignment(topic, dict(sorted(partitions.items())), zk_version)


class TopicPartitionsZNode:
    """``/brokers/topics/<t>/partitions``: null-data parent made by the controller."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    """``/brokers/topics/<t>/partitions/<p>``: null-data parent; tools read its ctime."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionsZNode.path(topic)}/{non_negative(partition, 'partition')}"


class TopicPartitionStateZNode:
    """``.../partitions/<p>/state``: leader, epochs and ISR; its stat version is zkVersion.

    >>> PartitionStateZNode.encode(LeaderAndIsr(1, 0, (1, 2, 3), 1))
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
    >>> PartitionStateZNode.decode(
    ...     b'{"version":1,"leader":-1,"leader_epoch":3,"controller_epoch":2,"isr":[2]}',
    ...     "/brokers/topics/t/partitions/0/state", zk_version=7)
    LeaderAndIsr(leader=-1, leader_epoch=3, isr=(2,), controller_epoch=2, zk_version=7)
    """

    SCHEMA = "partition_state"

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionZNode.path(topic, partition)}/state"

    @staticmethod
    def encode(value: LeaderAndIsr) -> bytes:
        if type(value.leader) is not int or value.leader < NO_LEADER:
            raise ValueError(f"leader must be a broker id or {NO_LEADER}, got {value.leader!r}")
        isr = [non_negative(b, "ISR broker id") for b in value.isr]
        if len(set(isr)) != len(isr):
            raise ValueError(f"ISR lists a broker more than once: {isr}")
        # Key order observed from a 0.8.2 controller (hash order of a 5-key map).
        return to_json_bytes({
            "controller_epoch": non_negative(value.controller_epoch, "controller_epoch"),
            "leader": value.leader,
            "version": 1,
            "leader_epoch": non_negative(value.leader_epoch, "leader_epoch"),
            "isr": isr,
        })

    @staticmethod
    def decode(data: bytes | None, path: str, zk_version: int = -1) -> LeaderAndIsr:
        obj = json_object(parse_json(data, path), path)
        check_version(obj, path)
        return LeaderAndIsr(
            leader=check_int(required(obj, "leader", path), path, "leader", NO_LEADER),
            leader_epoch=check_int(required(obj, "leader_epoch", path), path, "leader_epoch"),
            isr=check_broker_ids(required(obj, "isr", path), path, "isr", allow_empty=True),
            controller_epoch=check_int(
                required(obj, "controller_epoch", path), path, "controller_epoch"),
            zk_version=zk_version,
        )


# The name the partition-state codec goes by in Kafka 0.8.2's ZkUtils docs.
PartitionStateZNode = TopicPartitionStateZNode


# --- Controller ---------------------------------------------------------------


class ControllerZNode:
    """``/controller``, EPHEMERAL: the election lock, holding the winner's id.

    >>> ControllerZNode.encode(1, 1420000000000)
    b'{"version":1,"brokerid":1,"timestamp":"1420000000000"}'
    >>> ControllerZNode.decode(b"2")  # pre-JSON form, still accepted on read
    2
    """

    SCHEMA = "controller"
    PATH = CONTROLLER_PATH

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int) -> bytes:
        return to_json_bytes({"version": 1, "brokerid": non_negative(broker_id, "broker id"),
                              "timestamp": str(non_negative(timestamp_ms, "timestamp"))})

    @staticmethod
    def decode(data: bytes | None, path: str = CONTROLLER_PATH) -> int:
        value = parse_json(data, path)
        if type(value) is int:
            return check_int(value, path, "controller id")
        obj = json_object(value, path, "data (an object or a bare broker id)")
        check_version(obj, path)
        return check_int(required(obj, "brokerid", path), path, "brokerid")


class ControllerEpochZNode:
    """``/controller_epoch``: a bare decimal integer, not JSON; the write fence.

    >>> ControllerEpochZNode.encode(5)
    b'5'
    >>> ControllerEpochZNode.decode(b"5")
    5
    """

    SCHEMA = "controller_epoch"
    PATH = CONTROLLER_EPOCH_PATH

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(non_negative(epoch, "controller epoch")).encode("ascii")

    @staticmethod
    def decode(data: bytes | None, path: str = CONTROLLER_EPOCH_PATH) -> int:
        return parse_decimal(data, path, minimum=0)


# --- Cluster ------------------------------------------------------------------

_CLUSTER_ID = re.compile(r"[A-Za-z0-9_-]{22}")


class ClusterIdZNode:
    """``/cluster/id``: the cluster's id; the only node whose version is a string.

    >>> ClusterIdZNode.encode("AAAAAAAAAAAAAAAAAAAAAA")
    b'{"version":"1","id":"AAAAAAAAAAAAAAAAAAAAAA"}'
    """

    SCHEMA = "cluster_id"
    PATH = CLUSTER_ID_PATH

    @staticmethod
    def generate() -> str:
        """A new id as Kafka makes it: a random UUID, url-safe base64, unpadded."""
        return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        if not isinstance(cluster_id, str) or not _CLUSTER_ID.fullmatch(cluster_id):
            raise ValueError("cluster id must be 22 url-safe base64 characters, "
                             f"got {cluster_id!r}")
        return to_json_bytes({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes | None, path: str = CLUSTER_ID_PATH) -> str:
        # Kafka reads only "id" (ClusterIdZNode.fromJson); version is ignored.
        obj = json_object(parse_json(data, path), path)
        return check_str(required(obj, "id", path), path, "id")

