"""What DescribeConfigs answers for a topic or for this broker: each config's value,
where it comes from, and its synonyms (Kafka's ``ConfigSource``, KIP-226).

A topic config's value is its override in ``/config/topics/<t>`` if it has one
(source TOPIC_CONFIG), else the broker's setting that supplies the default:
STATIC_BROKER_CONFIG when the broker's file sets it, DEFAULT_CONFIG when not.
The synonyms are those candidates in that order of precedence, each with its own
value (``log.retention.hours`` says 168, not the 604800000 of ``retention.ms``).
A broker config's value is its dynamic one (KIP-226) if it has one: from
``/config/brokers/<id>`` (DYNAMIC_BROKER_CONFIG), else ``/config/brokers/<default>``
(DYNAMIC_DEFAULT_BROKER_CONFIG), then the file and the default.  Only the
dynamic keys (config.DYNAMIC_BROKER_KEYS) are not read-only.

>>> entries = topic_config_entries({"retention.ms": "1000"}, {"retention.ms": 604800000},
...                                {"log.retention.hours": (168, False)}, ["retention.ms"], True)
>>> entries[0]["value"], entries[0]["config_source"], [s["name"] for s in entries[0]["synonyms"]]
('1000', 1, ['retention.ms', 'log.retention.hours'])
"""
from __future__ import annotations

from typing import Any, Iterable

from kafka_ha.config import DYNAMIC_BROKER_KEYS, KEYS, TOPIC_CONFIG_DEFAULTS, BrokerConfig
from kafka_ha.protocol.config_admin_api import (
    DEFAULT_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
    TOPIC_CONFIG)

# The broker keys a topic config's default comes from, in precedence order (Kafka's
# LogConfig.TopicConfigSynonyms with KafkaConfig's ms/minutes/hours fallbacks, as far
# as this broker has those keys).
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[str, ...]] = {
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "min.insync.replicas": ("min.insync.replicas",),
    "retention.ms": ("log.retention.hours",),
    "retention.bytes": ("log.retention.bytes",),
    "segment.bytes": ("log.segment.bytes",),
    "max.message.bytes": ("message.max.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "cleanup.policy": ("log.cleanup.policy",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
}
_KEY_DEFAULTS = {key.name: key.default for key in KEYS}
_PER_BROKER = DYNAMIC_BROKER_KEYS[:2]   # the throttle rates: never from <default>


def topic_config_synonyms(name: str) -> tuple[str, ...]:
    """The broker keys behind topic config ``name``: the table's, else the one key that
    supplies its default (a topic config added later needs no entry here).

    >>> topic_config_synonyms("segment.ms"), topic_config_synonyms("no.such.config")
    (('log.roll.ms', 'log.roll.hours'), ())
    """
    if name in TOPIC_CONFIG_SYNONYMS:
        return TOPIC_CONFIG_SYNONYMS[name]
    broker_key = TOPIC_CONFIG_DEFAULTS.get(name, (None,))[0]
    return (broker_key,) if broker_key else ()


def render(value: Any) -> str | None:
    """A value as Kafka writes it in a DescribeConfigs answer.

    >>> render(True), render(("/a", "/b")), render(0.5), render(None), render(7)
    ('true', '/a,/b', '0.5', None, '7')
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


def _synonyms(broker_keys: Iterable[str], broker_values: dict[str, tuple[Any, bool]]
              ) -> list[dict[str, Any]]:
    """Static settings first, then Kafka's defaults, of each key that has a value."""
    found = []
    for key in broker_keys:
        value, explicit = broker_values.get(key, (None, False))
        if explicit and value is not None:
            found.append({"name": key, "value": render(value), "source": STATIC_BROKER_CONFIG})
    for key in broker_keys:
        if _KEY_DEFAULTS.get(key) is not None:
            found.append({"name": key, "value": render(_KEY_DEFAULTS[key]), "source": DEFAULT_CONFIG})
    return found


def _entry(name: str, value: str | None, synonyms: list[dict[str, Any]], read_only: bool,
           include_synonyms: bool) -> dict[str, Any]:
    source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
    return {"name": name, "value": value, "read_only": read_only,
            "is_default": source == DEFAULT_CONFIG, "config_source": source,
            "is_sensitive": False, "synonyms": synonyms if include_synonyms else []}


def topic_config_entries(overrides: dict[str, str], effective_defaults: dict[str, Any],
                         broker_values: dict[str, tuple[Any, bool]], names: Iterable[str],
                         include_synonyms: bool) -> list[dict[str, Any]]:
    """The entries of ``names`` for a topic with ``overrides``; ``effective_defaults`` holds
    each config's broker-supplied value, ``broker_values`` each broker key's
    ``(value, set in the file)``."""
    entries = []
    for name in names:
        synonyms = _synonyms(topic_config_synonyms(name), broker_values)
        if name in overrides:
            value = overrides[name]
            synonyms.insert(0, {"name": name, "value": value, "source": TOPIC_CONFIG})
        else:
            value = render(effective_defaults.get(name))
        entries.append(_entry(name, value, synonyms, False, include_synonyms))
    return entries


def broker_values(config: BrokerConfig) -> dict[str, tuple[Any, bool]]:
    """Every broker key's ``(value, whether the broker's file sets it)``."""
    return {key.name: (config[key.name], key.name in config.explicit) for key in KEYS}


def broker_config_entries(values: dict[str, tuple[Any, bool]], names: Iterable[str],
                          include_synonyms: bool, own: dict[str, str] | None = None,
                          default: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """This broker's configuration: the dynamic values (``own``: its ``/config/brokers/<id>``,
    ``default``: ``<default>``) over the static ones; only dynamic keys are writable.

    >>> [(e["name"], e["value"], e["config_source"]) for e in broker_config_entries(
    ...     {"broker.id": (3, True), "port": (9092, False)}, ["broker.id", "port"], False)]
    [('broker.id', '3', 4), ('port', '9092', 5)]
    >>> e = broker_config_entries({"logger.levels": ((), False)}, ["logger.levels"], True,
    ...                           {}, {"logger.levels": "kafka=WARN"})[0]
    >>> e["value"], e["config_source"], e["read_only"], [s["source"] for s in e["synonyms"]]
    ('kafka=WARN', 3, False, [3, 5])
    """
    own, default = own or {}, default or {}
    entries = []
    for name in names:
        if name not in values:
            continue
        synonyms = _synonyms((name,), values)
        if name in default and name not in _PER_BROKER:
            synonyms.insert(0, {"name": name, "value": default[name],
                                "source": DYNAMIC_DEFAULT_BROKER_CONFIG})
        if name in own:
            synonyms.insert(0, {"name": name, "value": own[name], "source": DYNAMIC_BROKER_CONFIG})
        dynamic = synonyms and synonyms[0]["source"] in (DYNAMIC_BROKER_CONFIG,
                                                         DYNAMIC_DEFAULT_BROKER_CONFIG)
        value = synonyms[0]["value"] if dynamic else render(values[name][0])
        entries.append(_entry(name, value, synonyms, name not in DYNAMIC_BROKER_KEYS,
                              include_synonyms))
    return entries


def default_broker_entries(default: dict[str, str]) -> list[dict[str, Any]]:
    """DescribeConfigs of the cluster-wide default (resource name ""): its dynamic values."""
    return [_entry(name, value, [{"name": name, "value": value,
                                  "source": DYNAMIC_DEFAULT_BROKER_CONFIG}], False, False)
            for name, value in sorted(default.items())]
