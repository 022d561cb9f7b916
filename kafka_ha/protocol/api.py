"""API keys and the request/response body schema of every supported version.

Layouts follow Kafka's message definitions field for field (snake_case names as
in its ``common/message/*.json``).  ``records`` fields stay opaque
``NULLABLE_BYTES``: the record formats are decoded elsewhere.  Versions from an
API's ``FLEXIBLE_FROM`` on are flexible (KIP-482): request header v2, response
header v1 (except ApiVersions, always v0), compact lengths and tagged fields.
"""
from __future__ import annotations

import enum

from kafka_ha.protocol.config_admin_api import CONFIG_ADMIN_SCHEMAS
from kafka_ha.protocol.group_apis import GROUP_SCHEMAS
from kafka_ha.protocol.produce_api import (
    INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE, INIT_PRODUCER_ID_VERSIONS, PRODUCE_VERSIONS,
    produce_request, produce_response)
from kafka_ha.protocol.admin_election_api import ADMIN_ELECTION_SCHEMAS
from kafka_ha.protocol.schema import (
    BOOLEAN, COMPACT_STRING, INT8, INT16, INT32, INT64, NULLABLE_BYTES, NULLABLE_STRING, STRING,
    Array, CompactArray, Struct)
from kafka_ha.protocol.topic_admin_api import TOPIC_ADMIN_SCHEMAS


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSETS_FOR_LEADER_EPOCH = 23
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    DELETE_RECORDS = 21
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    INCREMENTAL_ALTER_CONFIGS = 44

    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46


Schemas = dict[tuple[ApiKey, int], Struct]
REQUEST_SCHEMAS: Schemas = {}
RESPONSE_SCHEMAS: Schemas = {}


def _define(key: ApiKey, versions: range, request: Struct, response: Struct) -> None:
    for version in versions:
        REQUEST_SCHEMAS[(key, version)] = request
        RESPONSE_SCHEMAS[(key, version)] = response


# -- ApiVersions (18) ---------------------------------------------------------

_API_VERSION_RANGE = Struct(("api_key", INT16), ("min_version", INT16), ("max_version", INT16))
_API_VERSIONS_V0 = Struct(("error_code", INT16), ("api_keys", Array(_API_VERSION_RANGE)))
_define(ApiKey.API_VERSIONS, range(0, 1), Struct(), _API_VERSIONS_V0)
_define(ApiKey.API_VERSIONS, range(1, 3), Struct(), Struct(
    *_API_VERSIONS_V0.fields, ("throttle_time_ms", INT32)))
# v3 (KIP-511) is flexible: the client names its software; the response's
# optional tagged fields (features, KIP-584) are left out.
_define(ApiKey.API_VERSIONS, range(3, 4),
        Struct(("client_software_name", COMPACT_STRING), ("client_software_version", COMPACT_STRING),
               tagged=True),
        Struct(("error_code", INT16),
               ("api_keys", CompactArray(Struct(*_API_VERSION_RANGE.fields, tagged=True))),
               ("throttle_time_ms", INT32), tagged=True))
# The first flexible version of each API that has one.
FLEXIBLE_FROM: dict[ApiKey, int] = {ApiKey.API_VERSIONS: 3}

# -- Metadata (3) -------------------------------------------------------------


def _metadata_response(version: int) -> Struct:
    partition = [("error_code", INT16), ("partition_index", INT32), ("leader_id", INT32),
                 ("replica_nodes", Array(INT32)), ("isr_nodes", Array(INT32))]
    if version >= 7:
        partition.insert(3, ("leader_epoch", INT32))
    if version >= 5:
        partition.append(("offline_replicas", Array(INT32)))
    partition = Struct(*partition)
    broker = [("node_id", INT32), ("host", STRING), ("port", INT32)]
    topic = [("error_code", INT16), ("name", STRING)]
    if version == 0:
        return Struct(
            ("brokers", Array(Struct(*broker))),
            ("topics", Array(Struct(*topic, ("partitions", Array(partition))))))
    fields = [("brokers", Array(Struct(*broker, ("rack", NULLABLE_STRING))))]
    if version >= 2:
        fields.append(("cluster_id", NULLABLE_STRING))
    fields += [("controller_id", INT32),
               ("topics", Array(Struct(*topic, ("is_internal", BOOLEAN),
                                       ("partitions", Array(partition)))))]
    if version >= 3:
        fields.insert(0, ("throttle_time_ms", INT32))
    return Struct(*fields)


# v0: an empty list means all topics; v1+: null means all, empty means none.  v2
# adds the cluster id, v3 the throttle time; v4 (KIP-98 era) lets the client say
# whether missing topics may be auto-created; v5 (KIP-112) lists each partition's
# offline replicas, v6 is v5 again (KIP-219 throttling), v7 (KIP-320) gives each
# partition's leader epoch, which clients compare with what they fetch at.  Clients
# infer the broker's release from the highest Metadata version (v4: Kafka 0.11,
# message format 2 and the idempotent producer; v7: Kafka 2.1).
_define(ApiKey.METADATA, range(0, 1), Struct(("topics", Array(STRING))),
        _metadata_response(0))
for _v in range(1, 4):
    _define(ApiKey.METADATA, range(_v, _v + 1), Struct(("topics", Array(STRING, nullable=True))),
            _metadata_response(_v))
for _v in range(4, 8):
    _define(ApiKey.METADATA, range(_v, _v + 1), Struct(("topics", Array(STRING, nullable=True)),
                                                       ("allow_auto_topic_creation", BOOLEAN)),
            _metadata_response(_v))

# -- Inter-broker requests (4-7, 23) ------------------------------------------

_TOPIC_PARTITION = Struct(("topic", STRING), ("partition", INT32))
_PARTITION_STATE = Struct(
    ("topic", STRING), ("partition", INT32), ("controller_epoch", INT32),
    ("leader", INT32), ("leader_epoch", INT32), ("isr", Array(INT32)),
    ("zk_version", INT32), ("replicas", Array(INT32)))
_BROKER_ADDRESS = Struct(("id", INT32), ("host", STRING), ("port", INT32))
_PARTITION_ERROR = Struct(("topic", STRING), ("partition", INT32), ("error_code", INT16))
_PARTITION_ERRORS = Struct(("error_code", INT16), ("partition_errors", Array(_PARTITION_ERROR)))
_ERROR_ONLY = Struct(("error_code", INT16))
_CONTROL_HEADER = (("controller_id", INT32), ("controller_epoch", INT32))
_PARTITION_STATES = ("partition_states", Array(_PARTITION_STATE))

_define(ApiKey.LEADER_AND_ISR, range(0, 1), Struct(
    *_CONTROL_HEADER, _PARTITION_STATES, ("live_leaders", Array(_BROKER_ADDRESS))),
    _PARTITION_ERRORS)

# v1 (KIP-112) adds is_new per partition: a replica the controller has just created, whose
# log may be made on any log dir.  One log dir here: the flag changes nothing.
_define(ApiKey.LEADER_AND_ISR, range(1, 2), Struct(
    *_CONTROL_HEADER, ("partition_states", Array(Struct(
        *_PARTITION_STATE.fields, ("is_new", BOOLEAN)))),
    ("live_leaders", Array(_BROKER_ADDRESS))),
    _PARTITION_ERRORS)

# v2 (KIP-380, Kafka 2.2) adds the broker epoch the controller addressed (the czxid of the
# broker's registration, so a restarted broker refuses what was meant for its previous
# process) and groups the partitions by topic.
_V2_PARTITION_STATE = Struct(*(f for f in _PARTITION_STATE.fields if f[0] != "topic"))
_BROKER_EPOCH = ("broker_epoch", INT64)
_define(ApiKey.LEADER_AND_ISR, range(2, 3), Struct(
    *_CONTROL_HEADER, _BROKER_EPOCH, ("topic_states", Array(Struct(
        ("topic", STRING), ("partition_states", Array(Struct(
            *_V2_PARTITION_STATE.fields, ("is_new", BOOLEAN))))))),
    ("live_leaders", Array(_BROKER_ADDRESS))),
    _PARTITION_ERRORS)

_define(ApiKey.STOP_REPLICA, range(0, 1), Struct(
    *_CONTROL_HEADER, ("delete_partitions", BOOLEAN),
    ("partitions", Array(_TOPIC_PARTITION))),
    _PARTITION_ERRORS)

_define(ApiKey.STOP_REPLICA, range(1, 2), Struct(
    *_CONTROL_HEADER, _BROKER_EPOCH, ("delete_partitions", BOOLEAN),
    ("topics", Array(Struct(("topic", STRING), ("partition_indexes", Array(INT32)))))),
    _PARTITION_ERRORS)

_define(ApiKey.UPDATE_METADATA, range(0, 1), Struct(
    *_CONTROL_HEADER, _PARTITION_STATES, ("live_brokers", Array(_BROKER_ADDRESS))),
    _ERROR_ONLY)
# v1 endpoints put the port *before* the host (unlike every other broker list).
_ENDPOINT = Struct(("port", INT32), ("host", STRING), ("security_protocol", INT16))
_BROKER_ENDPOINTS = Struct(("id", INT32), ("endpoints", Array(_ENDPOINT)))
_define(ApiKey.UPDATE_METADATA, range(1, 2), Struct(
    *_CONTROL_HEADER, _PARTITION_STATES, ("live_brokers", Array(_BROKER_ENDPOINTS))),
    _ERROR_ONLY)
# v2 adds each broker's rack, v3 each endpoint's listener name, v4 (KIP-112) each
# partition's offline replicas.  Our controller sends v1; the rest is read and ignored
# (this cache computes offline replicas from the live brokers itself).
_ENDPOINT_V3 = Struct(("port", INT32), ("host", STRING), ("listener", STRING),
                      ("security_protocol", INT16))
for _v in range(2, 5):
    _define(ApiKey.UPDATE_METADATA, range(_v, _v + 1), Struct(
        *_CONTROL_HEADER,
        ("partition_states", Array(Struct(*_PARTITION_STATE.fields, ("offline_replicas", Array(INT32)))
                                   if _v >= 4 else _PARTITION_STATE)),
        ("live_brokers", Array(Struct(("id", INT32),
                                      ("endpoints", Array(_ENDPOINT_V3 if _v >= 3 else _ENDPOINT)),
                                      ("rack", NULLABLE_STRING))))),
        _ERROR_ONLY)

# v5 (KIP-380): the broker epoch, and the partitions grouped by topic.
_define(ApiKey.UPDATE_METADATA, range(5, 6), Struct(
    *_CONTROL_HEADER, _BROKER_EPOCH, ("topic_states", Array(Struct(
        ("topic", STRING), ("partition_states", Array(Struct(
            *_V2_PARTITION_STATE.fields, ("offline_replicas", Array(INT32)))))))),
    ("live_brokers", Array(Struct(("id", INT32), ("endpoints", Array(_ENDPOINT_V3)),
                                  ("rack", NULLABLE_STRING))))),
    _ERROR_ONLY)

_CONTROLLED_SHUTDOWN_RESPONSE = Struct(
    ("error_code", INT16), ("remaining_partitions", Array(_TOPIC_PARTITION)))
_define(ApiKey.CONTROLLED_SHUTDOWN, range(0, 2), Struct(("broker_id", INT32)),
        _CONTROLLED_SHUTDOWN_RESPONSE)
# v2 (KIP-380): the stopping broker's epoch, its registration's czxid.
_define(ApiKey.CONTROLLED_SHUTDOWN, range(2, 3), Struct(("broker_id", INT32), _BROKER_EPOCH),
        _CONTROLLED_SHUTDOWN_RESPONSE)

_EPOCH_REQUEST_PARTITION = Struct(("partition", INT32), ("leader_epoch", INT32))
_EPOCH_RESPONSE_PARTITION = Struct(
    ("error_code", INT16), ("partition", INT32), ("end_offset", INT64))
_EPOCH_REQUEST = Struct(("topics", Array(Struct(
    ("topic", STRING), ("partitions", Array(_EPOCH_REQUEST_PARTITION))))))
_define(ApiKey.OFFSETS_FOR_LEADER_EPOCH, range(0, 1), _EPOCH_REQUEST,
        Struct(("topics", Array(Struct(
            ("topic", STRING), ("partitions", Array(_EPOCH_RESPONSE_PARTITION)))))))
# v1 (KIP-279) names the epoch whose end offset is returned, so a follower
# whose latest epoch the leader never saw can truncate to the right place.
_EPOCH_TOPICS_V1 = ("topics", Array(Struct(
    ("topic", STRING), ("partitions", Array(Struct(
        ("error_code", INT16), ("partition", INT32), ("leader_epoch", INT32),
        ("end_offset", INT64)))))))
_define(ApiKey.OFFSETS_FOR_LEADER_EPOCH, range(1, 2), _EPOCH_REQUEST, Struct(_EPOCH_TOPICS_V1))
# v2 (KIP-320) adds each partition's current_leader_epoch before the asked epoch,
# and throttle_time_ms to the response.
_define(ApiKey.OFFSETS_FOR_LEADER_EPOCH, range(2, 3),
        Struct(("topics", Array(Struct(("topic", STRING), ("partitions", Array(Struct(
            ("partition", INT32), ("current_leader_epoch", INT32), ("leader_epoch", INT32)))))))),
        Struct(("throttle_time_ms", INT32), _EPOCH_TOPICS_V1))

# -- Produce (0) and InitProducerId (22): layouts in produce_api ---------------

for _v in PRODUCE_VERSIONS:
    _define(ApiKey.PRODUCE, range(_v, _v + 1), produce_request(_v), produce_response(_v))
_define(ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSIONS, INIT_PRODUCER_ID_REQUEST,
        INIT_PRODUCER_ID_RESPONSE)

# -- Fetch (1) ----------------------------------------------------------------

_FETCH_PARTITION = Struct(
    ("partition", INT32), ("fetch_offset", INT64), ("partition_max_bytes", INT32))
_FETCH_TOPICS = ("topics", Array(Struct(
    ("topic", STRING), ("partitions", Array(_FETCH_PARTITION)))))
_FETCH_PREFIX = (("replica_id", INT32), ("max_wait_ms", INT32), ("min_bytes", INT32))
_FETCHED_PARTITION = Struct(
    ("partition_index", INT32), ("error_code", INT16),
    ("high_watermark", INT64), ("records", NULLABLE_BYTES))
_FETCH_RESPONSES = ("responses", Array(Struct(
    ("topic", STRING), ("partitions", Array(_FETCHED_PARTITION)))))
_THROTTLE = ("throttle_time_ms", INT32)

_define(ApiKey.FETCH, range(0, 1),
        Struct(*_FETCH_PREFIX, _FETCH_TOPICS), Struct(_FETCH_RESPONSES))
_define(ApiKey.FETCH, range(1, 3),
        Struct(*_FETCH_PREFIX, _FETCH_TOPICS), Struct(_THROTTLE, _FETCH_RESPONSES))
# v3 (KIP-74) adds a response-wide byte limit after min_bytes.
_define(ApiKey.FETCH, range(3, 4),
        Struct(*_FETCH_PREFIX, ("max_bytes", INT32), _FETCH_TOPICS),
        Struct(_THROTTLE, _FETCH_RESPONSES))
# v4 (KIP-98) adds isolation_level (0 READ_UNCOMMITTED, 1 READ_COMMITTED) after
# max_bytes, and per partition last_stable_offset and the nullable
# aborted_transactions after high_watermark.  v4 readers get magic 2 data;
# older ones get it down-converted (records/down_convert.py).
_ABORTED_TRANSACTION = Struct(("producer_id", INT64), ("first_offset", INT64))
_FETCH_V4_PREFIX = (*_FETCH_PREFIX, ("max_bytes", INT32), ("isolation_level", INT8))


def _fetched_v4(*log_start: tuple) -> tuple:
    return ("responses", Array(Struct(
        ("topic", STRING), ("partitions", Array(Struct(
            ("partition_index", INT32), ("error_code", INT16), ("high_watermark", INT64),
            ("last_stable_offset", INT64), *log_start,
            ("aborted_transactions", Array(_ABORTED_TRANSACTION, nullable=True)),
            ("records", NULLABLE_BYTES)))))))


_define(ApiKey.FETCH, range(4, 5), Struct(*_FETCH_V4_PREFIX, _FETCH_TOPICS),
        Struct(_THROTTLE, _fetched_v4()))
# v5 (KIP-107) adds log_start_offset per partition, in the request (the
# follower's) and the response (the leader's); v6 is v5 again.
_LOG_START = ("log_start_offset", INT64)
_FETCH_TOPICS_V5 = ("topics", Array(Struct(("topic", STRING), ("partitions", Array(Struct(
    ("partition", INT32), ("fetch_offset", INT64), _LOG_START, ("partition_max_bytes", INT32)))))))
_define(ApiKey.FETCH, range(5, 7), Struct(*_FETCH_V4_PREFIX, _FETCH_TOPICS_V5),
        Struct(_THROTTLE, _fetched_v4(_LOG_START)))
# v7 (KIP-227, incremental fetch sessions): the request names a session and its
# epoch and lists only the partitions that changed, plus the ones to forget; the
# response carries a top-level error and the session id, and only the
# partitions with something new (broker/fetch_sessions.py).
_FORGOTTEN = ("forgotten_topics_data", Array(Struct(("topic", STRING), ("partitions", Array(INT32)))))
_FETCH_V7_RESPONSE = Struct(_THROTTLE, ("error_code", INT16), ("session_id", INT32),
                            _fetched_v4(_LOG_START))
# v8 is v7 again.
_define(ApiKey.FETCH, range(7, 9),
        Struct(*_FETCH_V4_PREFIX, ("session_id", INT32), ("session_epoch", INT32),
               _FETCH_TOPICS_V5, _FORGOTTEN), _FETCH_V7_RESPONSE)
# v9 (KIP-320) adds each partition's current_leader_epoch, as its sender knows it
# (-1: unknown); the leader answers FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
# when it differs from its own (broker/replication.leader_epoch_error).
_FETCH_TOPICS_V9 = ("topics", Array(Struct(("topic", STRING), ("partitions", Array(Struct(
    ("partition", INT32), ("current_leader_epoch", INT32), ("fetch_offset", INT64), _LOG_START,
    ("partition_max_bytes", INT32)))))))
# v10 is v9 again: it only says the reader takes zstd (KIP-110); an older reader
# asking for zstd data gets UNSUPPORTED_COMPRESSION_TYPE.
_define(ApiKey.FETCH, range(9, 11),
        Struct(*_FETCH_V4_PREFIX, ("session_id", INT32), ("session_epoch", INT32),
               _FETCH_TOPICS_V9, _FORGOTTEN), _FETCH_V7_RESPONSE)

# -- ListOffsets (2) ----------------------------------------------------------
# After Kafka's ListOffsetsRequest.json/ListOffsetsResponse.json, v0-4 (what Kafka
# 2.1 served): v1 answers one offset and its record's timestamp instead of v0's
# list; v2 adds the request's isolation_level and the response's throttle time;
# v3 only changes throttling; v4 (KIP-320) adds current_leader_epoch per
# requested partition and the found offset's leader_epoch per answer.


def _list_offsets(version: int) -> tuple[Struct, Struct]:
    partition = [("partition_index", INT32), ("timestamp", INT64)]
    answer = [("partition_index", INT32), ("error_code", INT16)]
    if version == 0:
        partition.append(("max_num_offsets", INT32))
        answer.append(("old_style_offsets", Array(INT64)))
    else:
        answer += [("timestamp", INT64), ("offset", INT64)]
    if version >= 4:
        partition.insert(1, ("current_leader_epoch", INT32))
        answer.append(("leader_epoch", INT32))
    request = [("replica_id", INT32), ("topics", Array(Struct(
        ("name", STRING), ("partitions", Array(Struct(*partition))))))]
    response = [("topics", Array(Struct(("name", STRING), ("partitions", Array(Struct(*answer))))))]
    if version >= 2:
        request.insert(1, ("isolation_level", INT8))
        response.insert(0, ("throttle_time_ms", INT32))
    return Struct(*request), Struct(*response)


for _v in range(0, 5):
    _define(ApiKey.LIST_OFFSETS, range(_v, _v + 1), *_list_offsets(_v))

# -- Group APIs (8-16): their own module --------------------------------------

for (_key, _version), (_request, _response) in GROUP_SCHEMAS.items():
    _define(ApiKey(_key), range(_version, _version + 1), _request, _response)
del _key, _version, _request, _response

# -- Topic admin APIs (19, 20, 37): their own module ---------------------------

for (_key, _version), (_request, _response) in TOPIC_ADMIN_SCHEMAS.items():
    _define(ApiKey(_key), range(_version, _version + 1), _request, _response)
del _key, _version, _request, _response

# -- Config and log admin APIs (21, 32, 33, 35, 44): their own module ----------

for (_key, _version), (_request, _response) in CONFIG_ADMIN_SCHEMAS.items():
    _define(ApiKey(_key), range(_version, _version + 1), _request, _response)
del _key, _version, _request, _response

# -- ElectLeaders (43), Alter/ListPartitionReassignments (45, 46) --------------

for _key, (_versions, _flexible_from, _request_of, _response_of) in ADMIN_ELECTION_SCHEMAS.items():
    for _v in _versions:
        _define(ApiKey(_key), range(_v, _v + 1), _request_of(_v), _response_of(_v))
    FLEXIBLE_FROM[ApiKey(_key)] = _flexible_from
del _key, _versions, _flexible_from, _request_of, _response_of

# -- Version table and headers -------------------------------------------------


def _version_table() -> dict[ApiKey, tuple[int, int]]:
    table: dict[ApiKey, list[int]] = {}
    for key, version in REQUEST_SCHEMAS:
        table.setdefault(key, []).append(version)
    return {key: (min(vs), max(vs)) for key, vs in sorted(table.items())}


SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = _version_table()

# Every version served is advertised: the Kafka 2.1 ranges of each API we
# implement (tests/unit/test_api_version_table.py holds them as facts).  Clients pick
# their highest common version, so kafka-python, aiokafka and librdkafka take us for
# Kafka 2.1 and use Fetch v10 with incremental sessions, Metadata v7 and KIP-320's
# leader epochs; every one of those paths is served for consumers too.
ADVERTISED_VERSIONS: dict[ApiKey, tuple[int, int]] = dict(SUPPORTED_VERSIONS)


def is_supported(api_key: int, api_version: int) -> bool:
    """Whether a schema exists for this request key and version."""
    return (api_key, api_version) in REQUEST_SCHEMAS


def is_flexible(api_key: int, api_version: int) -> bool:
    return api_version >= FLEXIBLE_FROM.get(api_key, 1 << 15)


def request_header_version(api_key: int, api_version: int) -> int:
    """2 (tagged fields after client_id) for flexible versions, 0 (no client_id)
    for ControlledShutdown v0, 1 for everything else.  Versions above any we
    serve count as flexible where the API has flexible versions at all, as they
    do in Kafka, so the header of an ApiVersions v4 request still parses.

    >>> [request_header_version(*kv) for kv in ((ApiKey.CONTROLLED_SHUTDOWN, 0), (7, 1), (18, 3))]
    [0, 1, 2]
    """
    if is_flexible(api_key, api_version):
        return 2
    return 0 if (api_key, api_version) == (ApiKey.CONTROLLED_SHUTDOWN, 0) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 (tagged fields after the correlation id) for flexible versions, else 0.

    ApiVersions always answers with header v0: a client that sent a version we
    do not know must still be able to read our UNSUPPORTED_VERSION answer.

    >>> response_header_version(ApiKey.API_VERSIONS, 3), response_header_version(45, 0)
    (0, 1)
    """
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def api_versions_entries() -> list[dict[str, int]]:
    """The ``api_keys`` array of an ApiVersions response, from ADVERTISED_VERSIONS."""
    return [{"api_key": int(key), "min_version": lo, "max_version": hi}
            for key, (lo, hi) in ADVERTISED_VERSIONS.items()]
