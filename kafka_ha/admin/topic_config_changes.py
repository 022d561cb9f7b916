"""Changing a topic's config overrides: the one path that ``kafka-configs.sh
--zookeeper`` and the AlterConfigs / IncrementalAlterConfigs requests share.

Each caller works out the new set of overrides its own way (the command's
``--add-config``/``--delete-config`` merge, AlterConfigs' whole replacement,
IncrementalAlterConfigs' operations); :func:`change_topic_config` then checks
that the topic exists, validates the result with the same rules the broker
applies when it reads them, and writes ``/config/topics/<t>`` with its change
notification (unless only validating).

Failures raise :class:`TopicConfigError`, which carries Kafka's error code: the
request layer answers with it and the command prints its message.

>>> replaced_config([("retention.ms", "1000"), ("cleanup.policy", "compact")])
{'retention.ms': '1000', 'cleanup.policy': 'compact'}
>>> incremental_config({"retention.ms": "1"}, [("retention.ms", DELETE, None),
...                    ("cleanup.policy", APPEND, "compact")], lambda name: "delete")
{'cleanup.policy': 'delete,compact'}
"""
from __future__ import annotations

from typing import Callable, Iterable

from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.config import ConfigError, validate_topic_config
from kafka_ha.protocol.errors import ErrorCode

# IncrementalAlterConfigs' operations (KIP-339: AlterConfigOp.OpType).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# Topic configs of Kafka's LIST type among ours: the only ones APPEND and SUBTRACT take.
LIST_CONFIGS = frozenset({"cleanup.policy"})


class TopicConfigError(Exception):
    """A config change refused with Kafka's ``code``; ``str()`` is the message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _no_duplicates(names: list[str]) -> None:
    seen: set[str] = set()
    duplicates = sorted({n for n in names if n in seen or seen.add(n)})
    if duplicates:
        raise TopicConfigError(ErrorCode.INVALID_REQUEST,
                               f"Error due to duplicate config keys: {', '.join(duplicates)}")


def replaced_config(entries: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """AlterConfigs: the request's entries become the topic's whole set of overrides
    (what it leaves out goes back to the broker default), as in Kafka.

    >>> replaced_config([("retention.ms", None)])
    Traceback (most recent call last):
    ...
    kafka_ha.admin.topic_config_changes.TopicConfigError: Null value not supported for : retention.ms
    """
    entries = list(entries)
    _no_duplicates([name for name, _ in entries])
    for name, value in entries:
        if value is None:
            raise TopicConfigError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
    return {name: value for name, value in entries}


def _list_items(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def incremental_config(current: dict[str, str], operations: Iterable[tuple[str, int, str | None]],
                       effective: Callable[[str], str | None]) -> dict[str, str]:
    """IncrementalAlterConfigs (KIP-339): each ``(name, operation, value)`` applied to the
    current overrides.  SET stores the value, DELETE drops the override (absent is fine),
    APPEND and SUBTRACT add or remove list items of the value in effect (``effective``:
    the override, else the default) and work on list configs only.

    >>> incremental_config({}, [("retention.ms", APPEND, "5")], lambda name: None)
    Traceback (most recent call last):
    ...
    kafka_ha.admin.topic_config_changes.TopicConfigError: Config value append is not allowed \
for config key: retention.ms
    >>> incremental_config({"cleanup.policy": "compact,delete"},
    ...                    [("cleanup.policy", SUBTRACT, "delete")], lambda name: None)
    {'cleanup.policy': 'compact'}
    """
    operations = list(operations)
    _no_duplicates([name for name, _, _ in operations])
    configs = dict(current)
    for name, operation, value in operations:
        if operation == SET:
            if value is None:
                raise TopicConfigError(ErrorCode.INVALID_REQUEST,
                                       f"Null value not supported for : {name}")
            configs[name] = value
        elif operation == DELETE:
            configs.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            verb = "append" if operation == APPEND else "subtract"
            if name not in LIST_CONFIGS:
                raise TopicConfigError(ErrorCode.INVALID_REQUEST,
                                       f"Config value {verb} is not allowed for config key: {name}")
            items = _list_items(configs[name] if name in configs else effective(name))
            given = _list_items(value)
            if operation == APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            configs[name] = ",".join(items)
        else:
            raise TopicConfigError(ErrorCode.INVALID_REQUEST,
                                   f"Unknown config operation {operation} for config key: {name}")
    return configs


def checked_config(configs: dict[str, str]) -> dict[str, str]:
    """``configs`` if every override is a known topic config with a valid value.

    >>> checked_config({"retention.ms": "soon"})
    Traceback (most recent call last):
    ...
    kafka_ha.admin.topic_config_changes.TopicConfigError: Invalid value soon for configuration \
retention.ms: expected an integer, got 'soon'
    """
    try:
        validate_topic_config(configs)
    except ConfigError as e:
        raise TopicConfigError(ErrorCode.INVALID_CONFIG, str(e)) from None
    return configs


def require_topic(admin: ZkAdmin, topic: str) -> None:
    if admin.existing_assignment(topic) is None:
        raise TopicConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f'Topic "{topic}" does not exist.')


def change_topic_config(admin: ZkAdmin, topic: str, new_configs: Callable[[dict[str, str]], dict[str, str]],
                        validate_only: bool = False) -> dict[str, str]:
    """Replace ``topic``'s overrides with ``new_configs(current overrides)``, validated, and
    tell the brokers (``/config/changes``); with ``validate_only``, every check and no write."""
    require_topic(admin, topic)
    configs = checked_config(new_configs(admin.store.topic_config(topic)))
    if not validate_only:
        admin.change_topic_config(topic, configs)
    return configs
