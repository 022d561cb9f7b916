"""Dynamic broker configs (KIP-226): ``/config/brokers/<id>`` and ``/config/brokers/<default>``.

The one path that ``kafka-configs.sh --entity-type brokers --zookeeper`` and the
AlterConfigs / IncrementalAlterConfigs requests of a broker resource share, as
:mod:`.topic_config_changes` is for topics: validate the new overrides, write the
node, then a ``config_change_`` notification with entity path ``brokers/<id>``
(or ``brokers/<default>``) so that brokers re-read it.

Only the keys in DYNAMIC_KEYS change at runtime.  As in Kafka, the two replication
throttle rates are per broker: a value under ``<default>`` is refused, since Kafka's
brokers read the rates from their own entity only.

>>> effective_dynamic({"logger.levels": "kafka=WARN"}, {"leader.replication.throttled.rate": "5"})
{'leader.replication.throttled.rate': 5, 'logger.levels': (('kafka', 'WARN'),)}
"""
from __future__ import annotations

from typing import Any, Callable

from kafka_ha.admin.topic_config_changes import TopicConfigError
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.config import DYNAMIC_BROKER_KEYS as DYNAMIC_KEYS, KEYS_BY_NAME, PER_BROKER_ONLY
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk.admin_znodes import BrokerConfigZNode

DEFAULT = BrokerConfigZNode.DEFAULT


def parse_dynamic(name: str, raw: str) -> Any:
    """One dynamic value, typed; ValueError with Kafka-style wording if it is not valid.

    >>> parse_dynamic("follower.replication.throttled.rate", "-1")
    Traceback (most recent call last):
    ...
    ValueError: Invalid value -1 for configuration follower.replication.throttled.rate: must be >= 0
    """
    try:
        return KEYS_BY_NAME[name].value_of(raw)
    except ValueError as e:
        raise ValueError(f"Invalid value {raw} for configuration {name}: {e}") from None


def checked_broker_config(entity: str, configs: dict[str, str]) -> dict[str, str]:
    """``configs`` if each is a dynamic broker key with a valid value for ``entity``.

    >>> checked_broker_config("<default>", {"leader.replication.throttled.rate": "100"})
    Traceback (most recent call last):
    ...
    kafka_ha.admin.topic_config_changes.TopicConfigError: leader.replication.throttled.rate \
can only be set per broker (--entity-name <id>), not as a cluster-wide default
    >>> checked_broker_config("1", {"num.partitions": "3"})
    Traceback (most recent call last):
    ...
    kafka_ha.admin.topic_config_changes.TopicConfigError: Cannot update these configs \
dynamically: num.partitions (dynamic broker configs: leader.replication.throttled.rate, \
follower.replication.throttled.rate, logger.levels)
    """
    static = sorted(name for name in configs if name not in DYNAMIC_KEYS)
    if static:
        unknown = [name for name in static if name not in KEYS_BY_NAME]
        if unknown:
            raise TopicConfigError(ErrorCode.INVALID_CONFIG,
                                   f"Unknown broker config(s): {', '.join(unknown)}")
        raise TopicConfigError(ErrorCode.INVALID_REQUEST,
                               f"Cannot update these configs dynamically: {', '.join(static)} "
                               f"(dynamic broker configs: {', '.join(DYNAMIC_KEYS)})")
    for name, raw in configs.items():
        if entity == DEFAULT and name in PER_BROKER_ONLY:
            raise TopicConfigError(ErrorCode.INVALID_REQUEST,
                                   f"{name} can only be set per broker (--entity-name <id>), "
                                   f"not as a cluster-wide default")
        try:
            parse_dynamic(name, raw)
        except ValueError as e:
            raise TopicConfigError(ErrorCode.INVALID_CONFIG, str(e)) from None
    return configs


def broker_entity(name: str) -> str:
    """A broker resource's name as its znode's: an id, or ``<default>`` for "" (the
    Admin API's name of the cluster-wide default)."""
    if name in ("", DEFAULT):
        return DEFAULT
    try:
        return BrokerConfigZNode.entity(name)
    except ValueError:
        raise TopicConfigError(ErrorCode.INVALID_REQUEST,
                               f"Broker id must be an integer, but it is: {name}") from None


def change_broker_config(admin: ZkAdmin, entity: str,
                         new_configs: Callable[[dict[str, str]], dict[str, str]],
                         validate_only: bool = False) -> dict[str, str]:
    """Replace the entity's dynamic overrides with ``new_configs(current)``, validated, and
    tell the brokers; with ``validate_only``, every check and no write."""
    entity = broker_entity(entity)
    configs = checked_broker_config(entity, new_configs(admin.store.broker_config(entity)))
    if not validate_only:
        admin.store.set_broker_config(entity, configs)
        admin.store.notify_config_change(entity, "brokers")
    return configs


def effective_dynamic(default: dict[str, str], own: dict[str, str]
                      ) -> dict[str, Any]:
    """The dynamic values in force on a broker: its own overrides, else the cluster-wide
    default ones (not for the per-broker throttle rates); keys with neither, or whose
    value is invalid (another tool wrote it), are left out: the static value applies."""
    out: dict[str, Any] = {}
    for name in DYNAMIC_KEYS:
        for source in (own, {} if name in PER_BROKER_ONLY else default):
            if name in source:
                try:
                    out[name] = parse_dynamic(name, source[name])
                    break
                except ValueError:
                    continue
    return out
