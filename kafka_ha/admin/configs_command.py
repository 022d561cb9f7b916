"""``kafka-configs.sh``: describe and alter topic config overrides (Kafka's ConfigCommand).

With ``--zookeeper`` it talks only to ZooKeeper: ``--alter`` rewrites ``/config/topics/<t>``
(overrides only, string values) and then creates a
``/config/changes/config_change_<seq>`` notification in the 0.10.1+ form, so
brokers re-read the topic's config.  With ``--bootstrap-server`` (Kafka 2.2+) it
asks a broker instead (DescribeConfigs, AlterConfigs: :mod:`.configs_bootstrap`),
which applies the change through the same code.  Messages are the 0.10.1+ ones
(Kafka's ConfigCommand).  ``--entity-type topics`` and ``brokers`` are supported
(no client or user quotas here): a broker entity is ``--entity-name <id>`` or
``--entity-default``, stored in ``/config/brokers/<id>|<default>`` (KIP-226) and
announced with a ``brokers/...`` notification; only the dynamic broker keys
(the replication throttle rates and logger.levels) are accepted.

Differences from Kafka: errors print ``Error while executing config command
: <msg>`` (like our kafka-topics.sh) and exit 1, and describing a topic that
does not exist is an error (Kafka prints an empty config list).
"""
from __future__ import annotations

import argparse
import re
import sys

from kafka_ha.admin.broker_config_changes import DEFAULT, change_broker_config
from kafka_ha.admin.configs_bootstrap import (
    BootstrapConfigError, all_topics, alter_broker, alter_topic, broker_overrides, topic_overrides)
from kafka_ha.admin.cli import ZK_UNAVAILABLE, add_zookeeper_argument, error_message, usage_error
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.admin.topic_config_changes import TopicConfigError, change_topic_config, require_topic
from kafka_ha.client.cluster import ClusterMetadata
from kafka_ha.client.errors import KafkaError
from kafka_ha.config import ConfigError
from kafka_ha.zk.errors import ZkNoNode

ACTIONS = ("describe", "alter")
KAFKA_ENTITY_TYPES = ("topics", "clients", "users", "brokers")
ABOUT = "Add/Remove entity config for a topic, client, user or broker"

# A separator only counts outside square brackets: it must be followed by
# text without "]" up to the next "[" or the end (Kafka's regex).
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


class ConfigCommandError(Exception):
    pass


def _java_split(text: str, pattern: str) -> list[str]:
    # Java's String.split drops trailing empty strings; Python's re.split keeps them.
    parts = re.split(pattern, text)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if parts == [""] and text:
        return []
    return parts


def parse_add_config(text: str) -> dict[str, str]:
    """``--add-config 'k1=v1,k2=[a,b]'``: brackets group a value containing commas.

    >>> parse_add_config("retention.ms=1000, cleanup.policy=[compact,delete]")
    {'retention.ms': '1000', 'cleanup.policy': 'compact,delete'}
    >>> parse_add_config("retention.ms")
    Traceback (most recent call last):
    ...
    kafka_ha.admin.configs_command.ConfigCommandError: requirement failed: Invalid entity config: \
all configs to be added must be in the format "key=val".
    """
    configs = {}
    for pair in _java_split(text, "," + _OUTSIDE_BRACKETS):
        kv = _java_split(pair, r"\s*=\s*" + _OUTSIDE_BRACKETS)
        if len(kv) != 2:
            raise ConfigCommandError('requirement failed: Invalid entity config: all configs to '
                                     'be added must be in the format "key=val".')
        configs[kv[0].strip()] = kv[1].replace("[", "").replace("]", "").strip()
    return configs


def parse_delete_config(values: list[str]) -> list[str]:
    """``--delete-config k1,k2`` (repeatable): names, trimmed, in order.

    >>> parse_delete_config(["a, b", "c"])
    ['a', 'b', 'c']
    """
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def describe_line(topic: str, configs: dict[str, str]) -> str:
    """The ``--describe`` line of one topic, overrides in stored order.

    >>> describe_line("foo", {"retention.ms": "1000", "cleanup.policy": "compact"})
    "Configs for topic 'foo' are retention.ms=1000,cleanup.policy=compact"
    """
    return f"Configs for topic '{topic}' are " + ",".join(f"{k}={v}" for k, v in configs.items())


def altered_config(current: dict[str, str], added: dict[str, str], deleted: list[str]
                   ) -> dict[str, str]:
    """Kafka's merge: fail on deleting an absent key, add, then delete (validation follows,
    in :func:`change_topic_config`).

    >>> altered_config({"retention.ms": "1"}, {"flush.ms": "5"}, ["retention.ms"])
    {'flush.ms': '5'}
    """
    if invalid := [k for k in deleted if k not in current]:
        raise ConfigCommandError(f"Invalid config(s): {','.join(invalid)}")
    configs = dict(current)
    configs.update(added)
    for key in deleted:
        configs.pop(key, None)
    return configs


def entity_label(entity_type: str, name: str) -> str:
    """Kafka's ConfigEntity text.

    >>> entity_label("brokers", "1"), entity_label("brokers", "<default>")
    ("broker '1'", 'default broker')
    """
    kind = entity_type[:-1]
    return f"default {kind}" if name == DEFAULT else f"{kind} '{name}'"


def _broker_entities(args: argparse.Namespace) -> list[str] | None:
    if args.entity_type[0] != "brokers":
        return None
    if args.entity_default:
        return [DEFAULT]
    return [args.entity_name] if args.entity_name is not None else []


def _broker_line(name: str, configs: dict[str, str]) -> str:
    return (f"Configs for {entity_label('brokers', name)} are "
            + ",".join(f"{k}={v}" for k, v in configs.items()))


def describe(admin: ZkAdmin, args: argparse.Namespace, out) -> None:
    brokers = _broker_entities(args)
    if brokers is not None:
        for name in brokers or admin.store.brokers_with_config():
            print(_broker_line(name, admin.store.broker_config(name)), file=out)
        return
    if args.entity_name is not None:
        require_topic(admin, args.entity_name)
        topics = [args.entity_name]
    else:
        topics = sorted(set(admin.store.topics()) | set(admin.store.topics_with_config()))
    for topic in topics:
        print(describe_line(topic, admin.store.topic_config(topic)), file=out)


def _changes(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    added = {}
    for text in args.add_config:
        added.update(parse_add_config(text))
    return added, parse_delete_config(args.delete_config)


def alter(admin: ZkAdmin, args: argparse.Namespace, out) -> None:
    added, deleted = _changes(args)
    brokers = _broker_entities(args)
    if brokers is not None:
        change_broker_config(admin, brokers[0], lambda current: altered_config(current, added, deleted))
        print(f"Completed Updating config for entity: {entity_label('brokers', brokers[0])}.", file=out)
        return
    topic = args.entity_name
    change_topic_config(admin, topic, lambda current: altered_config(current, added, deleted))
    print(f"Completed Updating config for entity: topic '{topic}'.", file=out)


def describe_through_broker(cluster: ClusterMetadata, args: argparse.Namespace, out) -> None:
    brokers = _broker_entities(args)
    if brokers is not None:
        for name in brokers or [str(b) for b in sorted(cluster.refresh().brokers)]:
            print(_broker_line(name, broker_overrides(cluster, name)), file=out)
        return
    topics = [args.entity_name] if args.entity_name is not None else all_topics(cluster)
    for topic in topics:
        print(describe_line(topic, topic_overrides(cluster, topic)), file=out)


def alter_through_broker(cluster: ClusterMetadata, args: argparse.Namespace, out) -> None:
    added, deleted = _changes(args)
    brokers = _broker_entities(args)
    if brokers is not None:
        name = brokers[0]
        alter_broker(cluster, name, altered_config(broker_overrides(cluster, name), added, deleted))
        print(f"Completed updating config for {entity_label('brokers', name)}.", file=out)
        return
    topic = args.entity_name
    alter_topic(cluster, topic, altered_config(topic_overrides(cluster, topic), added, deleted))
    print(f"Completed updating config for topic {topic}.", file=out)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafka-configs.sh", description=ABOUT)
    add_zookeeper_argument(p)
    p.add_argument("--bootstrap-server", help="The Kafka server to connect to (instead of "
                                                "--zookeeper), host:port[,host:port...]")
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument("--entity-type", action="append", default=[],
                   help="Type of entity: 'topics' or 'brokers'")
    p.add_argument("--entity-name", help="Name of entity (topic name or broker id)")
    p.add_argument("--entity-default", action="store_true",
                   help="Default entity name for brokers (applies to every broker)")
    p.add_argument("--add-config", action="append", default=[],
                   help="Key Value pairs of configs to add. Square brackets can be used to group "
                        "values which contain commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'.")
    p.add_argument("--delete-config", action="append", default=[],
                   help="config keys to remove 'k1,k2'")
    return p


def _check_args(args: argparse.Namespace) -> str | None:
    """The usage error, if any (Kafka's ``checkArgs`` messages)."""
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        return "Command must include exactly one action: --describe, --alter"
    if bool(args.zookeeper) == bool(args.bootstrap_server):
        return "Only one of --bootstrap-server or --zookeeper must be specified"
    if not args.entity_type:
        return 'Missing required argument "[entity-type]"'
    if args.describe:
        for name in ("add_config", "delete_config"):
            if getattr(args, name):
                # Kafka's message, missing space included.
                return f'Option "[describe]" can\'t be used with option"[{name.replace("_", "-")}]"'
    for entity_type in args.entity_type:
        if entity_type not in KAFKA_ENTITY_TYPES:
            return (f"Invalid entity-type {entity_type}, --entity-type must be one of "
                    f"List({', '.join(KAFKA_ENTITY_TYPES)})")
        if entity_type not in ("topics", "brokers"):
            return (f"Unsupported entity-type {entity_type}: kafka-ha keeps configs for topics "
                    f"and brokers only")
    if len(args.entity_type) > 1:
        return "Only one --entity-type may be specified"
    kind = args.entity_type[0]
    if args.entity_default and (kind != "brokers" or args.entity_name is not None):
        return ("--entity-default is for --entity-type brokers, without --entity-name"
                if kind == "brokers" else "--entity-default is not supported for topics")
    if kind == "brokers" and args.entity_name is not None and not args.entity_name.isdigit():
        return f"The entity name for brokers must be a valid integer broker id, found: {args.entity_name}"
    if args.alter:
        if args.entity_name is None and not args.entity_default:
            return f"--entity-name or --entity-default must be specified with --alter of {kind}"
        if not args.add_config and not args.delete_config:
            return "At least one of --add-config or --delete-config must be specified with --alter"
    return None


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv:
        return usage_error(parser, ABOUT, out)
    args = parser.parse_args(argv)
    if problem := _check_args(args):
        return usage_error(parser, problem, out)
    try:
        if args.bootstrap_server:
            with ClusterMetadata(args.bootstrap_server, client_id="kafka-configs") as cluster:
                (alter_through_broker if args.alter else describe_through_broker)(cluster, args, out)
        else:
            with ZkAdmin(args.zookeeper) as admin:
                (alter if args.alter else describe)(admin, args, out)
    except (ConfigCommandError, TopicConfigError, BootstrapConfigError, KafkaError, ConfigError,
            ValueError, ZkNoNode, *ZK_UNAVAILABLE) as e:
        print(f"Error while executing config command : {error_message(e)}", file=out)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
