"""Layouts of the config and log admin APIs: DescribeConfigs (32) v0-2,
AlterConfigs (33) v0-1, IncrementalAlterConfigs (44) v0, DeleteRecords (21) v0-1
and DescribeLogDirs (35) v0-1.

Field names follow Kafka's ``common/message/*.json`` in snake_case.  None of
these versions is flexible.  Within each API the listed versions differ only in
meaning, not layout (a later version answers before throttling), except
DescribeConfigs: v1 adds ``include_synonyms`` to the request and, per config,
``config_source`` and ``synonyms`` in place of v0's ``is_default``.

``CONFIG_ADMIN_SCHEMAS`` maps ``(api_key, version)`` to ``(request, response)``;
``protocol/api.py`` merges it into its tables.
"""
from __future__ import annotations

from kafka_ha.protocol.schema import (
    BOOLEAN, INT8, INT16, INT32, INT64, NULLABLE_STRING, STRING, Array, Struct)

DELETE_RECORDS, DESCRIBE_CONFIGS, ALTER_CONFIGS, DESCRIBE_LOG_DIRS = 21, 32, 33, 35
INCREMENTAL_ALTER_CONFIGS = 44

# ConfigResource.Type: the resources DescribeConfigs and AlterConfigs name.
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
# DescribeConfigsResponse.ConfigSource (v1+): where a config's value comes from.
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3   # KIP-226

CONFIG_ADMIN_SCHEMAS: dict[tuple[int, int], tuple[Struct, Struct]] = {}
_THROTTLE = ("throttle_time_ms", INT32)
_ERROR = ("error_code", INT16)
_RESOURCE = (("resource_type", INT8), ("resource_name", STRING))


def _define(key: int, versions: range, request: Struct, response: Struct) -> None:
    for version in versions:
        CONFIG_ADMIN_SCHEMAS[(key, version)] = (request, response)


# -- DescribeConfigs (32) -------------------------------------------------------
_DESCRIBE_RESOURCES = ("resources", Array(Struct(
    *_RESOURCE, ("configuration_keys", Array(STRING, nullable=True)))))


def _describe_configs_response(version: int) -> Struct:
    entry = [("name", STRING), ("value", NULLABLE_STRING), ("read_only", BOOLEAN)]
    if version == 0:
        entry += [("is_default", BOOLEAN), ("is_sensitive", BOOLEAN)]
    else:
        entry += [("config_source", INT8), ("is_sensitive", BOOLEAN),
                  ("synonyms", Array(Struct(("name", STRING), ("value", NULLABLE_STRING),
                                            ("source", INT8))))]
    return Struct(_THROTTLE, ("results", Array(Struct(
        _ERROR, ("error_message", NULLABLE_STRING), *_RESOURCE,
        ("configs", Array(Struct(*entry)))))))


_define(DESCRIBE_CONFIGS, range(0, 1), Struct(_DESCRIBE_RESOURCES), _describe_configs_response(0))
_define(DESCRIBE_CONFIGS, range(1, 3), Struct(_DESCRIBE_RESOURCES, ("include_synonyms", BOOLEAN)),
        _describe_configs_response(1))

# -- AlterConfigs (33) and IncrementalAlterConfigs (44) ------------------------------
_ALTER_RESPONSE = Struct(_THROTTLE, ("responses", Array(Struct(
    _ERROR, ("error_message", NULLABLE_STRING), *_RESOURCE))))
_define(ALTER_CONFIGS, range(0, 2), Struct(("resources", Array(Struct(
    *_RESOURCE, ("configs", Array(Struct(("name", STRING), ("value", NULLABLE_STRING))))))),
    ("validate_only", BOOLEAN)), _ALTER_RESPONSE)
_define(INCREMENTAL_ALTER_CONFIGS, range(0, 1), Struct(("resources", Array(Struct(
    *_RESOURCE, ("configs", Array(Struct(("name", STRING), ("config_operation", INT8),
                                         ("value", NULLABLE_STRING))))))),
    ("validate_only", BOOLEAN)), _ALTER_RESPONSE)

# -- DeleteRecords (21) -------------------------------------------------------------
_define(DELETE_RECORDS, range(0, 2), Struct(
    ("topics", Array(Struct(("name", STRING), ("partitions", Array(Struct(
        ("partition_index", INT32), ("offset", INT64))))))),
    ("timeout_ms", INT32)),
    Struct(_THROTTLE, ("topics", Array(Struct(("name", STRING), ("partitions", Array(Struct(
        ("partition_index", INT32), ("low_watermark", INT64), _ERROR))))))))

# -- DescribeLogDirs (35) -------------------------------------------------------------
_define(DESCRIBE_LOG_DIRS, range(0, 2), Struct(
    ("topics", Array(Struct(("topic", STRING), ("partitions", Array(INT32))), nullable=True))),
    Struct(_THROTTLE, ("results", Array(Struct(
        _ERROR, ("log_dir", STRING), ("topics", Array(Struct(
            ("name", STRING), ("partitions", Array(Struct(
                ("partition_index", INT32), ("partition_size", INT64), ("offset_lag", INT64),
                ("is_future_key", BOOLEAN))))))))))))
