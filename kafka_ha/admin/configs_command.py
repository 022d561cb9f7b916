"""``kafka-configs.sh``: describe and alter topic config overrides (Kafka's ConfigCommand).

With ``--zookeeper`` it talks only to ZooKeeper: ``--alter`` rewrites ``/config/topics/<t>``
(overrides only, string values) and then creates a
``/config/changes/config_change_<seq>`` notification in the 0.10.1+ form, so
brokers re-read the topic's config.  With ``--bootstrap-server`` (Kafka 2.2+) it
asks a broker instead (DescribeConfigs, AlterConfigs: :mod:`.configs_bootstrap`),
which applies the change through the same code.  Messages are the 0.10.1+ ones
(Kafka's ConfigCommand).  Only ``--entity-type topics`` is supported: this
project has no client, user or broker dynamic configs.

Differences from Kafka: errors print ``Error while executing config command
: <msg>`` (like our kafka-topics.sh) and exit 1, and describing a topic that
does not exist is an error (Kafka prints an empty config list).
"""
from __future__ import annotations

import argparse
import re
import sys

from kafka_ha.admin.configs_bootstrap import (
    BootstrapConfigError, all_topics, alter_topic, topic_overrides)
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


def describe(admin: ZkAdmin, args: argparse.Namespace, out) -> None:
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
    topic = args.entity_name
    change_topic_config(admin, topic, lambda current: altered_config(current, added, deleted))
    print(f"Completed Updating config for entity: topic '{topic}'.", file=out)


def describe_through_broker(cluster: ClusterMetadata, args: argparse.Namespace, out) -> None:
    topics = [args.entity_name] if args.entity_name is not None else all_topics(cluster)
    for topic in topics:
        print(describe_line(topic, topic_overrides(cluster, topic)), file=out)


def alter_through_broker(cluster: ClusterMetadata, args: argparse.Namespace, out) -> None:
    added, deleted = _changes(args)
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
                   help="Type of entity; only 'topics' is supported")
    p.add_argument("--entity-name", help="Name of entity (topic name)")
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
        if entity_type != "topics":
            return (f"Unsupported entity-type {entity_type}: kafka-ha keeps configs for topics "
                    f"only (--entity-type topics)")
    if len(args.entity_type) > 1:
        return "Only one --entity-type may be specified"
    if args.alter:
        if args.entity_name is None:
            return "--entity-name must be specified with --alter of topics"
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
