"""``kafka-topics.sh --bootstrap-server``: the same actions through the Admin API (Kafka 2.2+).

Creating, deleting and adding partitions go to the controller as CreateTopics,
DeleteTopics and CreatePartitions (:mod:`.topic_admin_client`), which applies them
with the checks and writes of the ``--zookeeper`` path; listing and describing
read Metadata.  Output lines are the ``--zookeeper`` ones, so scripts can switch
flags.  What Metadata cannot tell is left out: ``--describe`` shows no config
overrides, ``--list`` does not mark topics being deleted (they have left the
metadata already), and ``--alter --config`` is refused as Kafka 2.2 refuses it
(kafka-configs.sh changes configs).
"""
from __future__ import annotations

import argparse
import re

from kafka_ha.admin.admin_input import config_pairs
from kafka_ha.admin.assignment import parse_replica_assignment
from kafka_ha.admin.topic_admin_client import Result, TopicAdminClient
from kafka_ha.client.cluster import MetadataSnapshot
from kafka_ha.protocol.errors import ErrorCode, error_name


class ApiCommandError(Exception):
    pass


def _configs(pairs: list[str]) -> dict[str, str]:
    # Checked by the controller, with the same rules as the --zookeeper path.
    return config_pairs(pairs, ApiCommandError)


def _raise_for(result: Result) -> None:
    code, message = result
    if code != ErrorCode.NONE:
        raise ApiCommandError(f"{error_name(code)}: {message}" if message else error_name(code))


def _matching(snapshot: MetadataSnapshot, pattern: str | None) -> list[str]:
    topics = sorted(t for t, m in snapshot.topics.items()
                    if m.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if pattern is None:
        return topics
    regex = re.compile(pattern)
    return [t for t in topics if regex.fullmatch(t)]


def create(client: TopicAdminClient, args: argparse.Namespace, out) -> None:
    if not args.topic:
        raise ApiCommandError('Missing required argument "[topic]"')
    assignment = None
    if args.replica_assignment:
        assignment = parse_replica_assignment(args.replica_assignment)
    elif args.partitions is None:
        raise ApiCommandError('Missing required argument "[partitions]"')
    elif args.replication_factor is None:
        raise ApiCommandError('Missing required argument "[replication-factor]"')
    counts = (-1, -1) if assignment else (args.partitions, args.replication_factor)
    code, message = client.create_topic(args.topic, *counts, assignment, _configs(args.config))
    if code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return
    if code == ErrorCode.TOPIC_ALREADY_EXISTS:
        raise ApiCommandError(f'Topic "{args.topic}" already exists.')
    _raise_for((code, message))
    print(f'Created topic "{args.topic}".', file=out)


def list_topics(client: TopicAdminClient, args: argparse.Namespace, out) -> None:
    for topic in _matching(client.metadata(), args.topic):
        print(topic, file=out)


def describe(client: TopicAdminClient, args: argparse.Namespace, out) -> None:
    snapshot = client.metadata()
    live = set(snapshot.brokers)
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    if args.topics_with_overrides:
        raise ApiCommandError("--topics-with-overrides needs the topic configs, which Metadata "
                              "does not carry: use --zookeeper")
    for topic in _matching(snapshot, args.topic):
        partitions = snapshot.topics[topic].partitions
        if not filtered:
            first = next(iter(partitions.values()), None)
            rf = len(first.replicas) if first else 0
            print(f"Topic:{topic}\tPartitionCount:{len(partitions)}\tReplicationFactor:{rf}\t"
                  f"Configs:", file=out)
        for p, pm in sorted(partitions.items()):
            if args.under_replicated_partitions and not len(pm.isr) < len(pm.replicas):
                continue
            if args.unavailable_partitions and pm.leader in live:
                continue
            leader = str(pm.leader) if pm.leader >= 0 else "none"
            print(f"\tTopic: {topic}\tPartition: {p}\tLeader: {leader}\t"
                  f"Replicas: {','.join(map(str, pm.replicas))}\tIsr: {','.join(map(str, pm.isr))}",
                  file=out)


def _existing(client: TopicAdminClient, args: argparse.Namespace) -> list[str]:
    if not args.topic:
        raise ApiCommandError('Missing required argument "[topic]"')
    topics = _matching(client.metadata(), args.topic)
    if not topics and not args.if_exists:
        raise ApiCommandError(f"Topic {args.topic} does not exist")
    return topics


def alter(client: TopicAdminClient, args: argparse.Namespace, out) -> None:
    if args.config or args.delete_config:
        raise ApiCommandError("--config and --delete-config are not supported with "
                              "--bootstrap-server: use kafka-configs.sh")
    if args.partitions is None:
        raise ApiCommandError('Missing required argument "[partitions]"')
    for topic in _existing(client, args):
        listed = None
        if args.replica_assignment:
            existing = len(client.metadata([topic]).topics[topic].partitions)
            listed = list(parse_replica_assignment(args.replica_assignment, existing).values())
        print("WARNING: If partitions are increased for a topic that has a key, the partition "
              "logic or ordering of the messages will be affected", file=out)
        _raise_for(client.create_partitions(topic, args.partitions, listed))
        print("Adding partitions succeeded!", file=out)


def delete(client: TopicAdminClient, args: argparse.Namespace, out) -> None:
    topics = _existing(client, args)
    if not topics:
        return
    for topic, result in client.delete_topics(topics).items():
        _raise_for(result)
        print(f"Topic {topic} is marked for deletion.", file=out)


ACTIONS = {"create": create, "list": list_topics, "describe": describe, "alter": alter,
           "delete": delete}


def run(action: str, args: argparse.Namespace, out) -> None:
    with TopicAdminClient(args.bootstrap_server) as client:
        ACTIONS[action](client, args, out)
