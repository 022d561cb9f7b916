"""``kafka-preferred-replica-election.sh``: move leadership back to the preferred replicas.

Like Kafka's PreferredReplicaLeaderElectionCommand (0.8.2) it only writes
``/admin/preferred_replica_election`` (existing partitions only); the
controller elects the head of each assignment and deletes the node.  Output
follows Kafka 0.8.2's PreferredReplicaLeaderElectionCommand.

Differences from Kafka: failures exit 1 (Kafka exits 0), the cause is printed
as one line instead of a stack trace, ``Skipping ...`` lines go to stderr
(Kafka logs them there), a request naming no existing partition writes
nothing, and ``--wait [--timeout S]`` polls until the controller deletes the
node (rc 0; rc 1 on timeout).
"""
from __future__ import annotations

import argparse
import sys
import time

from kafka_ha.admin.cli import (ZK_UNAVAILABLE, add_wait_arguments, add_zookeeper_argument, error_message,
                               usage_error)
from kafka_ha.admin.admin_input import (ReassignCommandError, json_or_none,
                                        read_file_as_string)
from kafka_ha.admin.reassign_command import POLL_INTERVAL_S
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.model import TopicPartition
from kafka_ha.zk.admin_znodes import PreferredReplicaElectionZNode, duplicates
from kafka_ha.zk.errors import ZkNodeExists, ZkNoNode

ABOUT = ("This tool causes leadership for each partition to be transferred back to the "
         "'preferred replica', it can be used to balance leadership among the servers.")


class ElectionCommandError(Exception):
    pass


def parse_election_data(text: str) -> list[TopicPartition]:
    """The partitions of an election file, in file order; ``version`` is optional.

    >>> parse_election_data('{"partitions": [{"partition": 1, "topic": "foo"}]}')
    [TopicPartition(topic='foo', partition=1)]
    >>> parse_election_data('{"version":1}')
    Traceback (most recent call last):
    ...
    kafka_ha.admin.preferred_election_command.ElectionCommandError: Preferred replica election \
data is empty
    """
    obj = json_or_none(text)
    if not isinstance(obj, dict) or obj.get("partitions") is None:
        raise ElectionCommandError("Preferred replica election data is empty")
    entries = obj["partitions"]
    if not isinstance(entries, list):
        raise ElectionCommandError("Preferred replica election data is malformed: partitions "
                                   "must be a list")
    tps = []
    for i, entry in enumerate(entries):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic or type(partition) is not int or partition < 0:
            raise ElectionCommandError(f"Preferred replica election data is malformed: "
                                       f'partitions[{i}] must be {{"topic":<name>,'
                                       f'"partition":<non-negative integer>}}')
        tps.append(TopicPartition(topic, partition))
    if twice := duplicates(tps):
        raise ElectionCommandError("Preferred replica election data contains duplicate "
                                   "partitions: " + ",".join(map(str, twice)))
    return tps


def scala_set(tps) -> str:
    """``Set([foo,1], [foobar,2])``, as Kafka prints a set of partitions.

    >>> scala_set([TopicPartition("foo", 1), TopicPartition("foobar", 2)])
    'Set([foo,1], [foobar,2])'
    """
    return f"Set({', '.join(map(str, tps))})"


def all_partitions(admin: ZkAdmin) -> list[TopicPartition]:
    out = []
    for topic in admin.store.topics():
        assignment = admin.existing_assignment(topic)
        if assignment is not None:
            out.extend(TopicPartition(topic, p) for p in sorted(assignment.partitions))
    return out


def _in_progress_message(admin: ZkAdmin) -> str:
    data = admin.store.preferred_election_data()
    try:
        shown = scala_set(PreferredReplicaElectionZNode.decode(data))
    except (ValueError, TypeError):
        shown = (data or b"").decode("utf-8", errors="replace")  # show what is there
    return (f"Preferred replica leader election currently in progress for {shown}. "
            f"Aborting operation")


def start_election(admin: ZkAdmin, requested: list[TopicPartition], err) -> bool:
    """Write the request for the existing partitions; True if anything was written."""
    valid = []
    assignments = {}
    for tp in requested:
        if tp.topic not in assignments:
            assignments[tp.topic] = admin.existing_assignment(tp.topic)
        assignment = assignments[tp.topic]
        if assignment is None:
            print(f"Skipping preferred replica leader election for partition {tp} since topic "
                  f"{tp.topic} doesn't exist", file=err)
        elif tp.partition not in assignment.partitions:
            print(f"Skipping preferred replica leader election for partition {tp} since it "
                  f"doesn't exist", file=err)
        else:
            valid.append(tp)
    if not valid:
        if admin.store.preferred_election_data() is not None:
            raise ElectionCommandError(_in_progress_message(admin))
        return False
    try:
        admin.store.create_preferred_election(valid)
    except ZkNodeExists:
        raise ElectionCommandError(_in_progress_message(admin)) from None
    return True


def wait_until_done(admin: ZkAdmin, timeout_s: float | None, err) -> int:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while admin.store.preferred_election_data() is not None:
        if deadline is not None and time.monotonic() >= deadline:
            print(f"Timed out after {timeout_s:g} s waiting for the preferred replica election "
                  f"to complete", file=err)
            return 1
        time.sleep(POLL_INTERVAL_S)
    print("Preferred replica election completed", file=err)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafka-preferred-replica-election.sh", description=ABOUT)
    add_zookeeper_argument(p)
    p.add_argument("--path-to-json-file",
                   help='The JSON file with the list of partitions for which preferred replica '
                        'leader election should be done, e.g. {"partitions":[{"topic": "foo", '
                        '"partition": 1}, {"topic": "foobar", "partition": 2}]}. Defaults to all '
                        'existing partitions')
    add_wait_arguments(p, "Poll until the controller has finished the election (deleted the "
                        "request znode).")
    return p


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv:
        return usage_error(parser, ABOUT, out)
    args = parser.parse_args(argv)
    if not args.zookeeper:
        return usage_error(parser, 'Missing required argument "[zookeeper]"', out)
    if args.timeout is not None and args.timeout < 0:
        return usage_error(parser, "--timeout must not be negative", out)
    try:
        requested = None
        if args.path_to_json_file:  # read synchronously: the file may be temporary
            requested = parse_election_data(read_file_as_string(args.path_to_json_file))
        with ZkAdmin(args.zookeeper) as admin:
            if requested is None:
                requested = all_partitions(admin)
            written = start_election(admin, requested, err)
            print(f"Successfully started preferred replica election for partitions "
                  f"{scala_set(requested)}", file=out, flush=True)
            if args.wait and written:
                return wait_until_done(admin, args.timeout, err)
    except (ElectionCommandError, ReassignCommandError, ValueError, ZkNoNode,
            *ZK_UNAVAILABLE) as e:
        print("Failed to start preferred replica election", file=out)
        print(error_message(e), file=out)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
