"""``kafka-topics.sh``: create, list, describe, alter and delete topics in ZooKeeper.

Like Kafka's TopicCommand it talks only to ZooKeeper: it writes the intent
(``/config/topics/<t>`` and ``/brokers/topics/<t>`` in one multi) and the
controller does the rest.  Output strings follow Kafka 0.8.2-2.3's
TopicCommand byte for byte, because scripts parse them.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Iterable

from kafka_ha.admin.assignment import AdminOperationError, parse_replica_assignment
from kafka_ha.admin.cli import ZK_UNAVAILABLE, add_zookeeper_argument, error_message, usage_error
from kafka_ha.admin.topic_plans import (
    check_topic_name, checked_configs, plan_added_partitions, plan_new_topic)
from kafka_ha.admin import topics_over_api
from kafka_ha.admin.admin_input import config_pairs
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.client.errors import KafkaError
from kafka_ha.config import ConfigError
from kafka_ha.model import TopicPartition
from kafka_ha.zk.errors import ZkBadVersion, ZkNodeExists, ZkNoNode

ACTIONS = ("create", "list", "describe", "alter", "delete")


class TopicCommandError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafka-topics.sh", add_help=True,
                                description="Create, delete, describe, or change a topic.")
    add_zookeeper_argument(p)
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help="The Kafka server(s) to connect to, instead of --zookeeper: creating, "
                        "deleting and adding partitions go through the controller's Admin API.")
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment")
    p.add_argument("--config", action="append", default=[])
    p.add_argument("--delete-config", action="append", default=[])
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")
    p.add_argument("--topics-with-overrides", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="Disable rack aware replica assignment")
    return p


def _parse_configs(pairs: list[str]) -> dict[str, str]:
    return checked_configs(config_pairs(pairs, TopicCommandError))


def _matching(topics: Iterable[str], pattern: str | None) -> list[str]:
    topics = sorted(topics)
    if pattern is None:
        return topics
    regex = re.compile(pattern)
    return [t for t in topics if regex.fullmatch(t)]


def create(admin: ZkAdmin, args: argparse.Namespace, out) -> None:
    if not args.topic:
        raise TopicCommandError('Missing required argument "[topic]"')
    check_topic_name(args.topic)
    if "." in args.topic or "_" in args.topic:
        print("WARNING: Due to limitations in metric names, topics with a period ('.') or "
              "underscore ('_') could collide. To avoid issues it is best to use either, but not "
              "both.", file=out)
    configs = _parse_configs(args.config)
    assignment = None
    if args.replica_assignment:
        assignment = parse_replica_assignment(args.replica_assignment)
    elif args.partitions is None:
        raise TopicCommandError('Missing required argument "[partitions]"')
    elif args.replication_factor is None:
        raise TopicCommandError('Missing required argument "[replication-factor]"')
    brokers = [] if assignment else _brokers_for_assignment(admin, args)
    replicas = plan_new_topic(args.topic, args.partitions, args.replication_factor, assignment,
                              brokers)
    try:
        admin.create_topic(args.topic, replicas, configs)
    except ZkNodeExists:
        if args.if_not_exists:
            return
        raise TopicCommandError(f'Topic "{args.topic}" already exists.') from None
    print(f'Created topic "{args.topic}".', file=out)


def _brokers_for_assignment(admin: ZkAdmin, args: argparse.Namespace):
    """The live brokers with their racks (rack-aware assignment), or only their ids with
    ``--disable-rack-aware``."""
    if getattr(args, "disable_rack_aware", False):
        return admin.store.live_broker_ids()
    return admin.store.live_broker_racks()


def list_topics(admin: ZkAdmin, args: argparse.Namespace, out) -> None:
    marked = set(admin.store.topics_marked_for_deletion())
    for topic in _matching(admin.store.topics(), args.topic):
        print(f"{topic} - marked for deletion" if topic in marked else topic, file=out)


def describe(admin: ZkAdmin, args: argparse.Namespace, out) -> None:
    topics = _matching(admin.store.topics(), args.topic)
    live = set(admin.store.live_broker_ids())
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    for topic in topics:
        assignment = admin.store.assignment(topic)
        if assignment is None:
            continue
        configs = admin.store.topic_config(topic)
        if args.topics_with_overrides and not configs:
            continue
        if not filtered:
            first = next(iter(assignment.partitions.values()), ())
            config_text = ",".join(f"{k}={v}" for k, v in configs.items())
            print(f"Topic:{topic}\tPartitionCount:{len(assignment.partitions)}\t"
                  f"ReplicationFactor:{len(first)}\tConfigs:{config_text}", file=out)
        if args.topics_with_overrides:
            continue
        states = admin.store.partition_states(TopicPartition(topic, p) for p in assignment.partitions)
        for p, replicas in sorted(assignment.partitions.items()):
            state = states.get(TopicPartition(topic, p))
            if args.under_replicated_partitions and not (state and len(state.isr) < len(replicas)):
                continue
            if args.unavailable_partitions and state and state.leader in live:
                continue
            leader = "none" if state is None else str(state.leader)
            isr = "" if state is None else ",".join(map(str, state.isr))
            print(f"\tTopic: {topic}\tPartition: {p}\tLeader: {leader}\t"
                  f"Replicas: {','.join(map(str, replicas))}\tIsr: {isr}", file=out)


def _existing_topics(admin: ZkAdmin, args: argparse.Namespace) -> list[str]:
    """The topics ``--topic`` (a regex) names; none is an error unless --if-exists."""
    if not args.topic:
        raise TopicCommandError('Missing required argument "[topic]"')
    topics = _matching(admin.store.topics(), args.topic)
    if not topics and not args.if_exists:
        raise TopicCommandError(f"Topic {args.topic} does not exist on ZK path {admin.connect}")
    return topics


def alter(admin: ZkAdmin, args: argparse.Namespace, out) -> None:
    for topic in _existing_topics(admin, args):
        if args.config or args.delete_config:
            configs = admin.store.topic_config(topic)
            configs.update(_parse_configs(args.config))
            for key in args.delete_config:
                configs.pop(key, None)
            admin.change_topic_config(topic, configs)
            print(f'Updated config for topic "{topic}".', file=out)
        if args.partitions is not None:
            add_partitions(admin, topic, args, out)


def add_partitions(admin: ZkAdmin, topic: str, args: argparse.Namespace, out) -> None:
    assignment = admin.store.assignment(topic)
    existing = len(assignment.partitions)
    if args.partitions <= existing:
        raise TopicCommandError("The number of partitions for a topic can only be increased")
    print("WARNING: If partitions are increased for a topic that has a key, the partition logic "
          "or ordering of the messages will be affected", file=out)
    listed = None
    if args.replica_assignment:
        listed = list(parse_replica_assignment(args.replica_assignment,
                                               first_partition=existing).values())
    new = plan_added_partitions(assignment, args.partitions, listed, _brokers_for_assignment(admin, args))
    try:
        admin.add_partitions(assignment, new)  # at the version read: a concurrent change wins
    except ZkBadVersion:
        raise TopicCommandError(f"Topic {topic} changed while partitions were being added (another "
                                f"--alter?); nothing was changed") from None
    print("Adding partitions succeeded!", file=out)


def delete(admin: ZkAdmin, args: argparse.Namespace, out) -> None:
    for topic in _existing_topics(admin, args):
        try:
            admin.store.create_deletion_marker(topic)
            print(f"Topic {topic} is marked for deletion.", file=out)
            print("Note: This will have no impact if delete.topic.enable is not set to true.",
                  file=out)
        except ZkNodeExists:
            print(f"Topic {topic} is already marked for deletion.", file=out)


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        return usage_error(parser, "Command must include exactly one action: --list, --describe, "
                                   "--create, --alter or --delete", out)
    if args.zookeeper and args.bootstrap_server:
        return usage_error(parser, "Only one of --bootstrap-server or --zookeeper must be specified",
                           out)
    if not (args.zookeeper or args.bootstrap_server):
        return usage_error(parser, 'Missing required argument "[zookeeper]"', out)
    try:
        if args.bootstrap_server:
            topics_over_api.run(chosen[0], args, out)
            return 0
        with ZkAdmin(args.zookeeper) as admin:
            {"create": create, "list": list_topics, "describe": describe, "alter": alter,
             "delete": delete}[chosen[0]](admin, args, out)
    except BrokenPipeError:
        # `--describe | head` closed our output: stop quietly (before the
        # ConnectionError clause: a broken pipe is one).  Stdout now points at
        # /dev/null, or the interpreter's last flush would print the same error again.
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (TopicCommandError, topics_over_api.ApiCommandError, KafkaError, AdminOperationError,
            ConfigError, ValueError, ZkNoNode, *ZK_UNAVAILABLE) as e:
        print(f"Error while executing topic command : {error_message(e)}", file=out)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
