"""Sample bodies of the config and log admin APIs (21, 32, 33, 35, 44), every version,
for the protocol round-trip tests (merged into protocol_samples' tables)."""
from kafka_ha.protocol.api import ApiKey as K

_SYNONYM = {"name": "log.retention.hours", "value": "168", "source": 5}


def _describe_configs_response(version: int) -> dict:
    entry = {"name": "retention.ms", "value": "604800000", "read_only": False, "is_sensitive": False}
    if version == 0:
        entry["is_default"] = True
    else:
        entry.update(config_source=5, synonyms=[_SYNONYM])
    return {"throttle_time_ms": 0, "results": [
        {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "orders",
         "configs": [entry]},
        {"error_code": 3, "error_message": 'Topic "gone" does not exist.', "resource_type": 2,
         "resource_name": "gone", "configs": []}]}


_ALTER_RESPONSE = {"throttle_time_ms": 0, "responses": [
    {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "orders"},
    {"error_code": 42, "error_message": "Cannot update these configs dynamically: port",
     "resource_type": 4, "resource_name": "1"}]}

CONFIG_ADMIN_REQUESTS = {
    (K.DESCRIBE_CONFIGS, 0): {"resources": [
        {"resource_type": 2, "resource_name": "orders", "configuration_keys": None}]},
    **{(K.DESCRIBE_CONFIGS, v): {"resources": [
        {"resource_type": 4, "resource_name": "1", "configuration_keys": ["port"]}],
        "include_synonyms": True} for v in (1, 2)},
    **{(K.ALTER_CONFIGS, v): {"resources": [
        {"resource_type": 2, "resource_name": "orders", "configs": [
            {"name": "retention.ms", "value": "1000"}, {"name": "flush.ms", "value": None}]}],
        "validate_only": v == 1} for v in (0, 1)},
    (K.INCREMENTAL_ALTER_CONFIGS, 0): {"resources": [
        {"resource_type": 2, "resource_name": "orders", "configs": [
            {"name": "cleanup.policy", "config_operation": 2, "value": "compact"},
            {"name": "retention.ms", "config_operation": 1, "value": None}]}],
        "validate_only": False},
    **{(K.DELETE_RECORDS, v): {"topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "offset": 40}, {"partition_index": 1, "offset": -1}]}],
        "timeout_ms": 30000} for v in (0, 1)},
    (K.DESCRIBE_LOG_DIRS, 0): {"topics": None},
    (K.DESCRIBE_LOG_DIRS, 1): {"topics": [{"topic": "orders", "partitions": [0, 2]}]},
}

CONFIG_ADMIN_RESPONSES = {
    **{(K.DESCRIBE_CONFIGS, v): _describe_configs_response(v) for v in range(3)},
    **{(K.ALTER_CONFIGS, v): _ALTER_RESPONSE for v in (0, 1)},
    (K.INCREMENTAL_ALTER_CONFIGS, 0): _ALTER_RESPONSE,
    **{(K.DELETE_RECORDS, v): {"throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "low_watermark": 40, "error_code": 0},
        {"partition_index": 1, "low_watermark": -1, "error_code": 1}]}]} for v in (0, 1)},
    **{(K.DESCRIBE_LOG_DIRS, v): {"throttle_time_ms": 0, "results": [
        {"error_code": 0, "log_dir": "/data/kafka", "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "partition_size": 4096, "offset_lag": 0,
             "is_future_key": False}]}]}]} for v in (0, 1)},
}
