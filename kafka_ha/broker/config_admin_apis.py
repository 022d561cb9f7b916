"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: any broker serves them
(Kafka 2.x sends topic resources to any broker, broker resources to that broker).

Describe reads the topic's overrides from ZooKeeper (fresh, not this broker's
cache, which may lag a change notification) over this broker's defaults.  Alter
goes through :func:`kafka_ha.admin.topic_config_changes.change_topic_config`,
the path of ``kafka-configs.sh --zookeeper``: the same validation, the same
``/config/topics/<t>`` write and ``/config/changes`` notification, after which
every broker re-reads the topic's config.

Broker resources (KIP-226): describe lists this broker's configuration, its
dynamic values from ``/config/brokers/<id>`` and ``<default>`` over the static
ones; altering one (name "" is the cluster-wide default) goes through
:func:`kafka_ha.admin.broker_config_changes.change_broker_config`, the path of
``kafka-configs.sh --entity-type brokers --zookeeper``; a key that is not dynamic
is refused with INVALID_REQUEST, as Kafka refuses it.
Each resource is answered on its own: one resource's error never fails the
others, and an unexpected one (ZooKeeper gone) becomes UNKNOWN_SERVER_ERROR.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from kafka_ha.admin.broker_config_changes import DEFAULT, change_broker_config
from kafka_ha.admin.topic_config_changes import (
    TopicConfigError, change_topic_config, incremental_config, replaced_config, require_topic)
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.broker.config_descriptions import (
    broker_config_entries, broker_values, default_broker_entries, render, topic_config_entries)
from kafka_ha.broker.topic_configs import TopicConfigs
from kafka_ha.config import KEYS, TOPIC_CONFIG_DEFAULTS
from kafka_ha.protocol.config_admin_api import BROKER_RESOURCE, TOPIC_RESOURCE
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk import znodes as zn

log = logging.getLogger(__name__)
_TOPIC_NAMES = sorted(TOPIC_CONFIG_DEFAULTS)
_BROKER_NAMES = [key.name for key in KEYS]


class ConfigAdminApis:
    def __init__(self, broker_id: int, admin: ZkAdmin, topic_configs: TopicConfigs) -> None:
        self.broker_id = broker_id
        self.admin = admin
        self.topic_configs = topic_configs

    # ---- DescribeConfigs (32) ------------------------------------------------------------

    def describe_configs(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        include_synonyms = request.get("include_synonyms", False)
        results = []
        for resource in request["resources"]:
            kind, name = resource["resource_type"], resource["resource_name"]
            wanted = resource["configuration_keys"]
            try:
                configs = self._describe(kind, name, include_synonyms)
                if wanted is not None:
                    configs = [c for c in configs if c["name"] in set(wanted)]
                error, message = ErrorCode.NONE, None
            except TopicConfigError as e:
                configs, error, message = [], e.code, str(e)
            except Exception as e:  # never let one resource (or ZooKeeper) fail the broker
                log.exception("DescribeConfigs of %s %r failed", kind, name)
                configs, error, message = [], ErrorCode.UNKNOWN_SERVER_ERROR, str(e)
            results.append({"error_code": error, "error_message": message, "resource_type": kind,
                            "resource_name": name, "configs": configs})
        return {"throttle_time_ms": 0, "results": results}

    def _describe(self, kind: int, name: str, include_synonyms: bool) -> list[dict[str, Any]]:
        if kind == TOPIC_RESOURCE:
            _check_topic_name(name)
            require_topic(self.admin, name)
            return topic_config_entries(self.admin.store.topic_config(name),
                                        self.topic_configs.default_values(),
                                        broker_values(self.topic_configs.broker), _TOPIC_NAMES,
                                        include_synonyms)
        if kind == BROKER_RESOURCE:
            default = self.admin.store.broker_config(DEFAULT)
            if name == "":
                return default_broker_entries(default)   # the cluster-wide dynamic defaults
            self._check_broker(name)
            return broker_config_entries(broker_values(self.topic_configs.broker), _BROKER_NAMES,
                                         include_synonyms, self.admin.store.broker_config(name),
                                         default)
        raise TopicConfigError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {kind}")

    def _check_broker(self, name: str) -> None:
        try:
            broker_id = int(name)
        except ValueError:
            raise TopicConfigError(ErrorCode.INVALID_REQUEST,
                                   f"Broker id must be an integer, but it is: {name}") from None
        if broker_id != self.broker_id:
            raise TopicConfigError(ErrorCode.INVALID_REQUEST,
                                   f"Unexpected broker id, expected {self.broker_id} or empty "
                                   f"string, but received {name}")

    # ---- AlterConfigs (33) and IncrementalAlterConfigs (44) ---------------------------------

    def alter_configs(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        return self._alter(request, lambda resource: lambda current: replaced_config(
            (c["name"], c["value"]) for c in resource["configs"]))

    def incremental_alter_configs(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        defaults = self.topic_configs.default_values()
        return self._alter(request, lambda resource: lambda current: incremental_config(
            current, [(c["name"], c["config_operation"], c["value"]) for c in resource["configs"]],
            lambda name: render(defaults.get(name))))

    def _alter(self, request: dict[str, Any],
               change_of: Callable[[dict[str, Any]], Callable[[dict[str, str]], dict[str, str]]]
               ) -> dict[str, Any]:
        responses = []
        for resource in request["resources"]:
            kind, name = resource["resource_type"], resource["resource_name"]
            error, message = ErrorCode.NONE, None
            try:
                if kind == TOPIC_RESOURCE:
                    _check_topic_name(name)
                    change_topic_config(self.admin, name, change_of(resource),
                                        request["validate_only"])
                elif kind == BROKER_RESOURCE:
                    if name != "":
                        self._check_broker(name)
                    change_broker_config(self.admin, name, change_of(resource), request["validate_only"])
                else:
                    raise TopicConfigError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {kind}")
            except TopicConfigError as e:
                error, message = e.code, str(e)
            except Exception as e:  # never let one resource (or ZooKeeper) fail the broker
                log.exception("Altering the configs of %s %r failed", kind, name)
                error, message = ErrorCode.UNKNOWN_SERVER_ERROR, str(e)
            if error == ErrorCode.NONE and not request["validate_only"]:
                log.info("Changed the config of %s %s", "topic" if kind == TOPIC_RESOURCE else "broker",
                         name or DEFAULT)
            responses.append({"error_code": error, "error_message": message,
                              "resource_type": kind, "resource_name": name})
        return {"throttle_time_ms": 0, "responses": responses}


def _check_topic_name(name: str) -> None:
    try:
        zn.validate_topic_name(name)
    except ValueError as e:
        raise TopicConfigError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
