"""The group coordinator's answers to wrong requests, sent raw: Kafka's error codes,
and a coordinator that keeps serving and keeps what was committed."""
import socket
import struct

import pytest

from kafka_ha.protocol.api import ApiKey as K
from kafka_ha.protocol.errors import ErrorCode as E
from kafka_ha.protocol.framing import decode_response, encode_request
from kafka_ha.tools.processes import HOST
from tests.harness.cluster import SESSION_MS, wait_until
from tests.harness.kafka import create_topic

pytestmark = pytest.mark.system

GROUP = "raw-group"


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection((HOST, port), timeout=30)
        self.correlation = 0

    def ask(self, key, version, body):
        self.correlation += 1
        self.sock.sendall(encode_request(key, version, self.correlation, "raw-client", body))
        size = struct.unpack(">i", self._recv(4))[0]
        correlation, response = decode_response(key, version, self._recv(size))
        assert correlation == self.correlation
        return response

    def _recv(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data


def commit(conn, generation, member, topic="t", metadata="", partition=0):
    response = conn.ask(K.OFFSET_COMMIT, 2, {
        "group_id": GROUP, "generation_id": generation, "member_id": member,
        "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "committed_offset": 42,
             "committed_metadata": metadata}]}]})
    return response["topics"][0]["partitions"][0]["error_code"]


def join(conn, member="", session=6000, protocol_type="consumer"):
    return conn.ask(K.JOIN_GROUP, 1, {
        "group_id": GROUP, "session_timeout_ms": session, "rebalance_timeout_ms": 10000,
        "member_id": member, "protocol_type": protocol_type,
        "protocols": [{"name": "range", "metadata": b"sub"}]})


def test_wrong_requests_get_kafkas_error_codes(cluster_factory):
    cluster = cluster_factory(3, {"group.initial.rebalance.delay.ms": 0},
                              session_timeout_ms=SESSION_MS)
    create_topic(cluster, "t", 1, 3)
    any_broker = Conn(cluster.port(cluster.broker_ids[0]))

    def find():
        found = any_broker.ask(K.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0})
        return found if found["error_code"] == E.NONE else None
    found = wait_until(find, timeout=60, message="no coordinator")
    assert any_broker.ask(K.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 1})["error_code"] == \
        E.INVALID_REQUEST   # no transaction coordinator
    assert any_broker.ask(K.HEARTBEAT, 1, {"group_id": "", "generation_id": 1, "member_id": "m"}
                          )["error_code"] == E.INVALID_GROUP_ID
    conn = Conn(found["port"])
    wait_until(lambda: conn.ask(K.OFFSET_FETCH, 2, {"group_id": GROUP, "topics": None})
               ["error_code"] == E.NONE, timeout=30, message="the group's partition never loaded")
    # No such group yet: a commit naming a generation is from a member it never had.
    assert commit(conn, 5, "nobody") == E.ILLEGAL_GENERATION
    assert join(conn, session=10)["error_code"] == E.INVALID_SESSION_TIMEOUT
    joined = join(conn)
    member, generation = joined["member_id"], joined["generation_id"]
    assert joined["error_code"] == E.NONE and joined["leader"] == member and generation == 1
    synced = conn.ask(K.SYNC_GROUP, 1, {"group_id": GROUP, "generation_id": generation,
                                        "member_id": member,
                                        "assignments": [{"member_id": member, "assignment": b"x"}]})
    assert synced["error_code"] == E.NONE and synced["assignment"] == b"x"

    def heartbeat(member_id, gen):
        return conn.ask(K.HEARTBEAT, 1, {"group_id": GROUP, "generation_id": gen,
                                         "member_id": member_id})["error_code"]
    assert heartbeat(member, generation) == E.NONE
    assert heartbeat("nobody", generation) == E.UNKNOWN_MEMBER_ID
    assert heartbeat(member, generation + 7) == E.ILLEGAL_GENERATION
    assert join(conn, member="nobody")["error_code"] == E.UNKNOWN_MEMBER_ID
    assert join(conn, protocol_type="connect")["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert commit(conn, generation, "nobody") == E.UNKNOWN_MEMBER_ID
    assert commit(conn, generation - 1, member) == E.ILLEGAL_GENERATION
    assert commit(conn, -1, "") == E.UNKNOWN_MEMBER_ID   # a group with members takes no simple commit
    assert commit(conn, generation, member, topic="no-such-topic") == E.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(conn, generation, member, partition=9) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(conn, generation, member, metadata="m" * 5000) == E.OFFSET_METADATA_TOO_LARGE
    assert commit(conn, generation, member) == E.NONE
    other = next(i for i in cluster.broker_ids if cluster.port(i) != found["port"])
    assert Conn(cluster.port(other)).ask(K.HEARTBEAT, 1, {
        "group_id": GROUP, "generation_id": generation, "member_id": member})["error_code"] == \
        E.NOT_COORDINATOR
    described = conn.ask(K.DESCRIBE_GROUPS, 1, {"groups": [GROUP]})["groups"][0]
    assert (described["group_state"], described["protocol_data"]) == ("Stable", "range")
    assert [m["member_id"] for m in described["members"]] == [member]
    assert described["members"][0]["client_id"] == "raw-client"
    listed = conn.ask(K.LIST_GROUPS, 1, {})
    assert {"group_id": GROUP, "protocol_type": "consumer"} in listed["groups"]
    fetched = conn.ask(K.OFFSET_FETCH, 3, {"group_id": GROUP, "topics": None})
    assert fetched["error_code"] == E.NONE
    assert fetched["topics"] == [{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": 42, "metadata": "", "error_code": E.NONE}]}]
    assert conn.ask(K.LEAVE_GROUP, 1, {"group_id": GROUP, "member_id": member})["error_code"] == \
        E.NONE
    assert heartbeat(member, generation) == E.UNKNOWN_MEMBER_ID
    assert all(cluster.broker_alive(i) for i in cluster.broker_ids)
