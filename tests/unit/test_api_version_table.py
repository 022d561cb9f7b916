"""The versions we advertise, against two tables of facts:

- what a Kafka 2.1 broker answered in ApiVersions (its ``kafka-broker-api-versions.sh``
  output; the same ranges as ``validVersions`` in 2.1's message definitions), for
  every API this broker implements;
- KIP-896's lowest versions, which Kafka 4.x clients still send: a broker whose
  highest version is below them cannot serve those clients at all.

And a request at a version outside what we serve gets Kafka's answer: ApiVersions
an UNSUPPORTED_VERSION error with our ranges (KIP-511), any other API a closed
connection.
"""
from __future__ import annotations

import pytest

from kafka_ha.protocol.api import (ADVERTISED_VERSIONS, REQUEST_SCHEMAS, SUPPORTED_VERSIONS,
                                   ApiKey, api_versions_entries)
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import decode_request_body, decode_response, encode_request
from kafka_ha.protocol.partition_states import ungrouped
from tests.harness.protocol_samples import REQUESTS, api_versions_response
from tests.harness.raw_socket import assert_closed_by_peer, raw_connect, recv_frame, serving

K = ApiKey

# Kafka 2.1.0's ApiVersions answer, for the API keys this broker implements.
KAFKA_2_1 = {
    K.PRODUCE: (0, 7), K.FETCH: (0, 10), K.LIST_OFFSETS: (0, 4), K.METADATA: (0, 7),
    K.LEADER_AND_ISR: (0, 1), K.STOP_REPLICA: (0, 0), K.UPDATE_METADATA: (0, 4),
    K.CONTROLLED_SHUTDOWN: (0, 2), K.OFFSET_COMMIT: (0, 6), K.OFFSET_FETCH: (0, 5),
    K.FIND_COORDINATOR: (0, 2), K.JOIN_GROUP: (0, 3), K.HEARTBEAT: (0, 2),
    K.LEAVE_GROUP: (0, 2), K.SYNC_GROUP: (0, 2), K.DESCRIBE_GROUPS: (0, 2),
    K.LIST_GROUPS: (0, 2), K.API_VERSIONS: (0, 2), K.INIT_PRODUCER_ID: (0, 1),
    K.OFFSETS_FOR_LEADER_EPOCH: (0, 2), K.DELETE_GROUPS: (0, 1),
    K.CREATE_TOPICS: (0, 3), K.DELETE_TOPICS: (0, 3), K.DELETE_RECORDS: (0, 1),
    K.DESCRIBE_CONFIGS: (0, 2), K.ALTER_CONFIGS: (0, 1), K.DESCRIBE_LOG_DIRS: (0, 1),
    K.CREATE_PARTITIONS: (0, 1),
}
# Served here, but newer than Kafka 2.1 (2.2-2.4).
NOT_IN_2_1 = {K.ELECT_LEADERS, K.INCREMENTAL_ALTER_CONFIGS, K.ALTER_PARTITION_REASSIGNMENTS,
              K.LIST_PARTITION_REASSIGNMENTS}
# Still short of 2.1, and whose job it is: strict, so that each line goes once it is done.
PENDING: dict[ApiKey, str] = {}
# KIP-896 (Kafka 4.0): the oldest version of each API that 4.x still speaks.
KIP_896_MINIMUM = {
    K.PRODUCE: 3, K.FETCH: 4, K.LIST_OFFSETS: 1, K.METADATA: 0, K.OFFSET_COMMIT: 2,
    K.OFFSET_FETCH: 1, K.FIND_COORDINATOR: 0, K.JOIN_GROUP: 0, K.HEARTBEAT: 0,
    K.LEAVE_GROUP: 0, K.SYNC_GROUP: 0, K.DESCRIBE_GROUPS: 0, K.LIST_GROUPS: 0,
    K.API_VERSIONS: 0, K.INIT_PRODUCER_ID: 0, K.OFFSETS_FOR_LEADER_EPOCH: 2,
    K.DELETE_GROUPS: 0, K.CREATE_TOPICS: 2, K.DELETE_TOPICS: 1, K.DELETE_RECORDS: 0,
    K.DESCRIBE_CONFIGS: 1, K.ALTER_CONFIGS: 0, K.DESCRIBE_LOG_DIRS: 1, K.CREATE_PARTITIONS: 0,
    K.ELECT_LEADERS: 0, K.INCREMENTAL_ALTER_CONFIGS: 0, K.ALTER_PARTITION_REASSIGNMENTS: 0,
    K.LIST_PARTITION_REASSIGNMENTS: 0,
}
# Kafka's message definitions name these as the request's file name.
SPEC_NAMES = {K.OFFSETS_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch"}


def _param(key: ApiKey):
    marks = [pytest.mark.xfail(strict=True, reason=PENDING[key])] if key in PENDING else []
    return pytest.param(key, id=key.name, marks=marks)


def test_the_fact_tables_cover_every_api_we_implement():
    assert set(KAFKA_2_1) | NOT_IN_2_1 == set(SUPPORTED_VERSIONS)
    assert set(KIP_896_MINIMUM) <= set(SUPPORTED_VERSIONS)


@pytest.mark.parametrize("key", [_param(k) for k in KAFKA_2_1])
def test_advertised_range_covers_kafka_2_1(key):
    lo, hi = ADVERTISED_VERSIONS[key]
    their_lo, their_hi = KAFKA_2_1[key]
    assert lo <= their_lo and hi >= their_hi, (key.name, (lo, hi), KAFKA_2_1[key])
    # advertised means served: a schema for every version in the range
    assert all((key, v) in REQUEST_SCHEMAS for v in range(lo, hi + 1))


@pytest.mark.parametrize("key", list(KIP_896_MINIMUM), ids=lambda k: k.name)
def test_kafka_4_clients_find_a_common_version(key):
    lo, hi = ADVERTISED_VERSIONS[key]
    assert lo <= KIP_896_MINIMUM[key] <= hi


@pytest.mark.parametrize("key", list(KIP_896_MINIMUM), ids=lambda k: k.name)
def test_kip_896_table_agrees_with_the_message_definitions(key):
    """kafka-python ships Kafka 4.x's definitions, whose validVersions start at KIP-896's
    minimum (or lower where 4.x kept an older version)."""
    load_json = pytest.importorskip("kafka.protocol.schemas.load_json").load_json
    name = SPEC_NAMES.get(key, "".join(w.capitalize() for w in key.name.split("_")))
    valid = load_json(name + "Request")["validVersions"]
    assert int(valid.split("-")[0]) == KIP_896_MINIMUM[key], (name, valid)


# -- versions we do not serve -------------------------------------------------------

def _answering_handler(header, reader):
    """Answers anything it can decode: a closed connection below is the version check's."""
    decode_request_body(header, reader)
    if header.api_key == K.API_VERSIONS:
        return api_versions_response(header.api_version), header.api_version
    raise AssertionError(f"{header.api_key!r} v{header.api_version} reached the handler")


@pytest.fixture
def server():
    with serving(_answering_handler) as srv:   # no live test may hang
        yield srv


@pytest.mark.parametrize("key", [k for k in SUPPORTED_VERSIONS if k != K.API_VERSIONS],
                         ids=lambda k: k.name)
def test_a_version_past_ours_closes_the_connection(server, key, caplog):
    top = SUPPORTED_VERSIONS[key][1]
    # Our own newest body, labelled one version higher: well-formed, but not served.
    frame = encode_request(key, top, 7, "newer-client", REQUESTS[(key, top)])
    frame = frame[:4] + int(key).to_bytes(2, "big") + (top + 1).to_bytes(2, "big") + frame[8:]
    sock = raw_connect(server)
    sock.sendall(frame)
    assert_closed_by_peer(sock)
    sock.close()
    assert any(f"version {top + 1}" in r.getMessage() for r in caplog.records)


def test_api_versions_past_ours_answers_unsupported_version_and_our_ranges(server):
    top = SUPPORTED_VERSIONS[K.API_VERSIONS][1]
    # header v2 (client id, then an empty tag section) and a body we must not need to read
    payload = ((18).to_bytes(2, "big") + (top + 1).to_bytes(2, "big") + (9).to_bytes(4, "big")
               + (12).to_bytes(2, "big") + b"newer-client" + b"\x00" + b"\x03abc\x00")
    frame = len(payload).to_bytes(4, "big") + payload
    sock = raw_connect(server)
    sock.sendall(frame)
    correlation_id, answer = decode_response(K.API_VERSIONS, 0, recv_frame(sock))
    assert (correlation_id, answer["error_code"]) == (9, ErrorCode.UNSUPPORTED_VERSION)
    assert answer["api_keys"] == api_versions_entries()
    assert {e["api_key"]: (e["min_version"], e["max_version"]) for e in answer["api_keys"]} \
        == {int(k): v for k, v in ADVERTISED_VERSIONS.items()}
    sock.close()


# -- the layouts added for 2.1, field by field against Kafka's definitions ------------

@pytest.mark.parametrize("key_version", [(K.METADATA, v) for v in range(5, 8)]
                         + [(K.FETCH, v) for v in range(4, 11)]
                         + [(K.OFFSETS_FOR_LEADER_EPOCH, 2)],
                         ids=lambda kv: f"{kv[0].name}-v{kv[1]}")
def test_new_layouts_match_kafkas_message_definitions(key_version):
    pytest.importorskip("kafka.protocol.schemas.load_json")
    from kafka_ha.protocol.api import RESPONSE_SCHEMAS
    from tests.harness.kafka_message_specs import kafkas, ours, same_layout
    key, version = key_version
    name = SPEC_NAMES.get(key, "".join(w.capitalize() for w in key.name.split("_")))
    for schemas, kind in ((REQUEST_SCHEMAS, "Request"), (RESPONSE_SCHEMAS, "Response")):
        mine, theirs = ours(schemas[key_version]), kafkas(name + kind, version)
        assert same_layout(mine, theirs), (kind, mine, theirs)


@pytest.mark.parametrize("version", [2, 3, 4, 5])
def test_update_metadata_of_kafka_2_1_layouts_is_applied(version):
    """Rack, listener name and offline replicas are read and set aside: the cache keeps the
    first endpoint and derives offline replicas from the live brokers itself."""
    from kafka_ha.broker.metadata_cache import MetadataCache
    from kafka_ha.model import TopicPartition
    cache = MetadataCache(1)
    frame = encode_request(K.UPDATE_METADATA, version, 3, "controller",
                           REQUESTS[(K.UPDATE_METADATA, version)])
    from kafka_ha.protocol.framing import decode_request
    header, reader = decode_request(frame[4:])
    body = ungrouped(decode_request_body(header, reader))   # v5 groups by topic (KIP-380)
    assert cache.update(body, version, 3) == {"error_code": 0}
    assert (cache.brokers[1].host, cache.brokers[1].port) == ("broker1", 9092)
    assert cache.partition(TopicPartition("orders", 3)).leader_epoch == 7
    partition = cache.topic_metadata("orders")["partitions"][0]
    assert partition["offline_replicas"] == [2, 3], "brokers 2 and 3 are not live"
