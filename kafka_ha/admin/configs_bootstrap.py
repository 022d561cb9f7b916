"""``kafka-configs.sh --bootstrap-server``: topic overrides through the brokers
(DescribeConfigs and AlterConfigs), as Kafka's ConfigCommand does since 2.2.

The output and the merge are the ``--zookeeper`` path's: describe prints the
topic's overrides (the configs whose source is TOPIC_CONFIG); alter reads them,
merges ``--add-config``/``--delete-config`` with the same
:func:`~kafka_ha.admin.configs_command.altered_config`, and sends the whole
set in one AlterConfigs, which the broker validates and writes through the same
code as the ZooKeeper path.
"""
from __future__ import annotations

from kafka_ha.client.cluster import ClusterMetadata
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.config_admin_api import (
    BROKER_RESOURCE, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, TOPIC_CONFIG, TOPIC_RESOURCE)
from kafka_ha.protocol.errors import ErrorCode

DESCRIBE_CONFIGS_VERSION = 1      # the first with config_source
ALTER_CONFIGS_VERSION = 0


class BootstrapConfigError(Exception):
    pass


def _checked(result: dict) -> dict:
    if result["error_code"] != ErrorCode.NONE:
        raise BootstrapConfigError(result["error_message"] or ErrorCode(result["error_code"]).name)
    return result


def topic_overrides(cluster: ClusterMetadata, topic: str) -> dict[str, str]:
    """The topic's overrides, as the brokers describe them."""
    response = cluster.request_any(ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION, {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic,
                       "configuration_keys": None}],
        "include_synonyms": False})
    result = _checked(response["results"][0])
    return {c["name"]: c["value"] for c in result["configs"] if c["config_source"] == TOPIC_CONFIG}


def all_topics(cluster: ClusterMetadata) -> list[str]:
    return sorted(cluster.refresh().topics)


def alter_topic(cluster: ClusterMetadata, topic: str, configs: dict[str, str]) -> None:
    response = cluster.request_any(ApiKey.ALTER_CONFIGS, ALTER_CONFIGS_VERSION, {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic,
                       "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "validate_only": False})
    _checked(response["responses"][0])


def _resource_name(entity: str) -> str:
    return "" if entity == "<default>" else entity   # the Admin API's name of the default


def _send(cluster: ClusterMetadata, name: str, api_key: int, version: int, body: dict) -> dict:
    """Kafka sends a broker's resource to that broker (only it describes itself), the
    default's to any broker."""
    if name == "":
        return cluster.request_any(api_key, version, body)
    if int(name) not in cluster.refresh().brokers:
        raise BootstrapConfigError(f"Broker {name} is not alive")
    return cluster.request(int(name), api_key, version, body)


def broker_overrides(cluster: ClusterMetadata, entity: str) -> dict[str, str]:
    """A broker's (or the default's, ``<default>``) own dynamic configs, as described."""
    name = _resource_name(entity)
    source = DYNAMIC_DEFAULT_BROKER_CONFIG if name == "" else DYNAMIC_BROKER_CONFIG
    request = {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": name,
                              "configuration_keys": None}], "include_synonyms": False}
    # Kafka sends a broker's resource to that broker: only it describes itself.
    response = _send(cluster, name, ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION, request)
    result = _checked(response["results"][0])
    return {c["name"]: c["value"] for c in result["configs"] if c["config_source"] == source}


def alter_broker(cluster: ClusterMetadata, entity: str, configs: dict[str, str]) -> None:
    name = _resource_name(entity)
    request = {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": name,
                              "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
               "validate_only": False}
    response = _send(cluster, name, ApiKey.ALTER_CONFIGS, ALTER_CONFIGS_VERSION, request)
    _checked(response["responses"][0])
