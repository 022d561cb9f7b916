"""Produce (0) v0-v7 and InitProducerId (22) v0-v1: their request and response layouts.

Field for field after Kafka's ``ProduceRequest.json``/``ProduceResponse.json``
and ``InitProducerIdRequest.json``/``InitProducerIdResponse.json`` (none of
these versions is flexible):

- Produce v1 adds the response's throttle_time_ms, v2 log_append_time_ms per
  partition.  v3 (KIP-98) puts a nullable transactional_id before acks and
  requires magic 2 batches; v4 only adds KAFKA_STORAGE_ERROR as a possible
  error, v5 the response's log_start_offset per partition, v6 changes only
  throttling, v7 (KIP-110) allows zstd.
- InitProducerId v0 and v1 share one layout (v1 changes only throttling).

>>> produce_request(3).fields[0][0], produce_request(2).fields[0][0]
('transactional_id', 'acks')
>>> [n for n, _ in produce_response(5).fields[0][1].item.fields[1][1].item.fields]
['index', 'error_code', 'base_offset', 'log_append_time_ms', 'log_start_offset']
"""
from __future__ import annotations

from kafka_ha.protocol.schema import (INT16, INT32, INT64, NULLABLE_BYTES, NULLABLE_STRING, STRING,
                                      Array, Struct)

PRODUCE_VERSIONS = range(0, 8)
INIT_PRODUCER_ID_VERSIONS = range(0, 2)
TRANSACTIONAL_PRODUCE_VERSION = 3   # transactional_id, magic 2 only
LOG_START_PRODUCE_VERSION = 5
ZSTD_PRODUCE_VERSION = 7

_PARTITION = Struct(("index", INT32), ("records", NULLABLE_BYTES))
_TOPIC_DATA = ("topic_data", Array(Struct(("name", STRING), ("partition_data", Array(_PARTITION)))))


def produce_request(version: int) -> Struct:
    fields = [("acks", INT16), ("timeout_ms", INT32), _TOPIC_DATA]
    if version >= TRANSACTIONAL_PRODUCE_VERSION:
        fields.insert(0, ("transactional_id", NULLABLE_STRING))
    return Struct(*fields)


def produce_response(version: int) -> Struct:
    partition = [("index", INT32), ("error_code", INT16), ("base_offset", INT64)]
    if version >= 2:
        partition.append(("log_append_time_ms", INT64))
    if version >= LOG_START_PRODUCE_VERSION:
        partition.append(("log_start_offset", INT64))
    topic = Struct(("name", STRING), ("partition_responses", Array(Struct(*partition))))
    fields = [("responses", Array(topic))]
    if version >= 1:
        fields.append(("throttle_time_ms", INT32))
    return Struct(*fields)


INIT_PRODUCER_ID_REQUEST = Struct(("transactional_id", NULLABLE_STRING),
                                  ("transaction_timeout_ms", INT32))
INIT_PRODUCER_ID_RESPONSE = Struct(("throttle_time_ms", INT32), ("error_code", INT16),
                                   ("producer_id", INT64), ("producer_epoch", INT16))
