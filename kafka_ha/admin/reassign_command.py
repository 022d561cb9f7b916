"""``kafka-reassign-partitions.sh``: generate, start and verify partition reassignments.

``--throttle``, ``--verify``'s removal of it and ``--cancel`` (KIP-455, with
``--bootstrap-server`` only, as in Kafka) are in :mod:`.reassign_throttle`.

Like Kafka's ReassignPartitionsCommand (0.8.2) it talks to ZooKeeper (with
``--bootstrap-server`` instead, to the controller: see ``bootstrap_action``):
``--execute`` writes ``/admin/reassign_partitions`` and the controller moves
the replicas, rewrites ``/brokers/topics/<t>`` and removes each finished
partition from the request.  Output follows Kafka 0.8.2's ReassignPartitionsCommand byte for
byte, because callers match it with loose patterns.

Differences from Kafka, all additive or about exit codes:

- ``--verify --wait [--timeout S]`` polls until no partition is in progress,
  printing ``N/M partitions done`` to stderr, then prints the usual report;
  rc 0 if every partition completed, 1 if one failed or the timeout passed.
- Failures exit 1 (Kafka prints the same message and exits 0).
- ``Skipping reassignment ...`` lines go to stderr, where Kafka's log4j
  output goes, so stdout stays exactly Kafka's.
- A request naming no existing partition writes nothing (Kafka writes an
  empty request that the controller then discards).
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from kafka_ha.admin.admin_input import (Replicas, ReassignCommandError, parse_broker_list,
                                        parse_reassignment, parse_topics_to_move,
                                        read_file_as_string, validate_reassignment)
from kafka_ha.admin.cli import (ZK_UNAVAILABLE, add_wait_arguments, add_zookeeper_argument, error_message,
                               usage_error)
from kafka_ha.admin.assignment import AdminOperationError, assign_replicas
from kafka_ha.admin.reassign_bootstrap import ControllerClient, alter, in_progress
from kafka_ha.admin.reassign_throttle import (
    WARNING, BootstrapTarget, ZkTarget, apply_throttle, involved_brokers, remove_throttle, set_rates)
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.client.errors import KafkaError
from kafka_ha.protocol.errors import error_name
from kafka_ha.model import TopicPartition
from kafka_ha.zk.admin_znodes import duplicates
from kafka_ha.zk.errors import ZkNodeExists, ZkNoNode
from kafka_ha.zk.znodes import to_json_bytes

ACTIONS = ("generate", "execute", "verify", "cancel")
POLL_INTERVAL_S = 0.2

COMPLETED = "completed"
IN_PROGRESS = "in progress"
FAILED = "failed"



def reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's ``getPartitionReassignmentZkData``: the znode's compact JSON, empty allowed.

    >>> reassignment_json({TopicPartition("t", 0): (1, 2)})
    '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}'
    >>> reassignment_json({})
    '{"version":1,"partitions":[]}'
    """
    # Not the codec: this also prints requests naming impossible topics, which
    # were skipped, not written, and an empty list, which the codec refuses.
    partitions = [{"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                  for tp, replicas in assignment.items()]
    return to_json_bytes({"version": 1, "partitions": partitions}).decode("utf-8")


def scala_list(ids: Iterable[int]) -> str:
    return f"List({', '.join(map(str, ids))})"


def reassignment_statuses(requested: Mapping[TopicPartition, Replicas],
                          pending: Mapping[TopicPartition, Replicas] | None,
                          assigned: Mapping[TopicPartition, Replicas]
                          ) -> list[tuple[TopicPartition, str]]:
    """Kafka's ``checkIfPartitionReassignmentSucceeded`` for every requested partition.

    Pending in the znode: in progress.  Otherwise completed only if the
    current assignment equals the request *in order* (a leader-only reorder
    counts), else failed.
    """
    pending = pending or {}
    out = []
    for tp, replicas in requested.items():
        if tp in pending:
            out.append((tp, IN_PROGRESS))
        elif tuple(assigned.get(tp, ())) == tuple(replicas):
            out.append((tp, COMPLETED))
        else:
            out.append((tp, FAILED))
    return out


def verify_report(requested: Mapping[TopicPartition, Replicas],
                  statuses: Sequence[tuple[TopicPartition, str]],
                  assigned: Mapping[TopicPartition, Replicas]) -> list[str]:
    """The lines ``--verify`` prints.

    Kafka computes every status (printing the ERROR lines as it goes) before
    printing the status lines, so all ERROR lines come first.

    >>> tp = TopicPartition("t", 0)
    >>> for line in verify_report({tp: (2, 3)}, [(tp, FAILED)], {tp: (1, 2)}):
    ...     print(line)
    Status of partition reassignment:
    ERROR: Assigned replicas (1,2) don't match the list of replicas for reassignment (2,3) \
for partition [t,0]
    Reassignment of partition [t,0] failed
    """
    lines = ["Status of partition reassignment:"]
    for tp, status in statuses:
        if status == FAILED:
            lines.append(f"ERROR: Assigned replicas ({','.join(map(str, assigned.get(tp, ())))}) "
                         f"don't match the list of replicas for reassignment "
                         f"({','.join(map(str, requested[tp]))}) for partition {tp}")
    for tp, status in statuses:
        lines.append({COMPLETED: f"Reassignment of partition {tp} completed successfully",
                      FAILED: f"Reassignment of partition {tp} failed",
                      IN_PROGRESS: f"Reassignment of partition {tp} is still in progress"}[status])
    return lines


# ---- actions --------------------------------------------------------------------


def current_assignment(admin: ZkAdmin, topics: Iterable[str]) -> dict[TopicPartition, Replicas]:
    """Every partition of the existing ``topics`` (Kafka's ``getReplicaAssignmentForTopics``)."""
    out: dict[TopicPartition, Replicas] = {}
    for topic in dict.fromkeys(topics):
        assignment = admin.existing_assignment(topic)
        if assignment is not None:
            for p, replicas in sorted(assignment.partitions.items()):
                out[TopicPartition(topic, p)] = replicas
    return out


def generate(current: Mapping[TopicPartition, Replicas], brokers, out) -> None:
    """Print the current assignment of the topics and a round-robin one over ``brokers``
    (a list of ids, or ids with their racks: then rack-aware, as Kafka's)."""
    proposed: dict[TopicPartition, Replicas] = {}
    for topic in dict.fromkeys(tp.topic for tp in current):
        partitions = sorted(tp.partition for tp in current if tp.topic == topic)
        rf = len(current[TopicPartition(topic, partitions[0])])
        for p, replicas in assign_replicas(brokers, len(partitions), rf).items():
            proposed[TopicPartition(topic, p)] = replicas
    print(f"Current partition replica assignment\n\n{reassignment_json(current)}", file=out)
    print(f"Proposed partition reassignment configuration\n\n{reassignment_json(proposed)}",
          file=out)


def execute(admin: ZkAdmin, requested: dict[TopicPartition, Replicas], out, err,
            throttle: int = -1) -> None:
    if throttle >= 0:
        print(WARNING, file=out)
    topics = [tp.topic for tp in requested]
    current = current_assignment(admin, topics)
    print(f"Current partition replica assignment\n\n{reassignment_json(current)}\n\n"
          f"Save this to use as the --reassignment-json-file option during rollback", file=out)
    valid = {}
    for tp, replicas in requested.items():
        if tp in current:
            valid[tp] = replicas
        elif any(t.topic == tp.topic for t in current):
            print(f"Skipping reassignment of partition {tp} since it doesn't exist", file=err)
        else:
            print(f"Skipping reassignment of partition {tp} since topic {tp.topic} doesn't exist",
                  file=err)
    if valid:
        if throttle >= 0 and admin.store.reassignment() is not None:
            # Kafka's way to change the rate of a move under way: execute again.
            print("There is an existing assignment running.", file=out)
            set_rates(ZkTarget(admin), involved_brokers(current, valid), throttle)
            print(f"The inter-broker throttle limit was set to {throttle} B/s", file=out)
            return
        if throttle >= 0:
            apply_throttle(ZkTarget(admin), current, valid, throttle, out)
        try:
            admin.store.create_reassignment(valid)
        except ZkNodeExists:
            raise ReassignCommandError(_in_progress_message(admin)) from None
    elif admin.store.reassignment() is not None:
        raise ReassignCommandError(_in_progress_message(admin))
    print(f"Successfully started reassignment of partitions {reassignment_json(requested)}",
          file=out)


def _in_progress_message(admin: ZkAdmin) -> str:
    try:
        pending = admin.store.reassignment() or {}
        shown = ", ".join(f"{tp} -> {scala_list(r)}" for tp, r in pending.items())
    except (ValueError, ZkNoNode):
        shown = "..."  # malformed, or finished meanwhile: the refusal still stands
    return f"Partition reassignment currently in progress for Map({shown}). Aborting operation"


def verify(read_pending: Callable[[], Mapping[TopicPartition, Replicas] | None],
           read_assigned: Callable[[list[str]], Mapping[TopicPartition, Replicas]],
           requested: dict[TopicPartition, Replicas], wait: bool,
           timeout_s: float | None, out, err, when_done: Callable[[], object] | None = None) -> int:
    """``read_pending()``: the reassignments in progress (ZooKeeper's request or the
    controller's list); ``read_assigned(topics)``: those topics' current replicas;
    ``when_done()`` runs once none is in progress (the throttle's removal)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last_done = None
    while True:
        # Pending first: the controller rewrites the assignment before it drops a
        # partition from the request, so "not pending" implies we read the result.
        pending = read_pending()
        assigned = read_assigned([tp.topic for tp in requested])
        statuses = reassignment_statuses(requested, pending, assigned)
        if not wait:
            break
        done = sum(1 for _, s in statuses if s != IN_PROGRESS)
        if done != last_done:
            print(f"{done}/{len(statuses)} partitions done", file=err, flush=True)
            last_done = done
        if done == len(statuses):
            break
        if deadline is not None and time.monotonic() >= deadline:
            for line in verify_report(requested, statuses, assigned):
                print(line, file=out)
            print(f"Timed out after {timeout_s:g} s waiting for the reassignment: "
                  f"{done}/{len(statuses)} partitions done", file=err)
            return 1
        time.sleep(POLL_INTERVAL_S)
    for line in verify_report(requested, statuses, assigned):
        print(line, file=out)
    if when_done is not None and all(s != IN_PROGRESS for _, s in statuses):
        when_done()
    if wait and any(s != COMPLETED for _, s in statuses):
        return 1
    return 0


# ---- command line ---------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kafka-reassign-partitions.sh",
        description="Moves topic partitions between replicas.")
    add_zookeeper_argument(p)
    p.add_argument("--bootstrap-server",
                   help="The brokers to connect to (host:port[,...]): the controller then "
                        "takes the request through AlterPartitionReassignments instead of ZooKeeper.")
    p.add_argument("--generate", action="store_true",
                   help="Generate a candidate partition reassignment configuration.")
    p.add_argument("--execute", action="store_true",
                   help="Kick off the reassignment as specified by the --reassignment-json-file "
                        "option.")
    p.add_argument("--verify", action="store_true",
                   help="Verify if the reassignment completed as specified by the "
                        "--reassignment-json-file option.")
    p.add_argument("--reassignment-json-file",
                   help='The JSON file with the partition reassignment configuration, e.g. '
                        '{"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3]}],'
                        '"version":1}')
    p.add_argument("--topics-to-move-json-file",
                   help='Generate a reassignment configuration to move the partitions of the '
                        'specified topics, e.g. {"topics":[{"topic":"foo"}],"version":1}')
    p.add_argument("--broker-list", help='The list of brokers to which the partitions need to '
                                         'be reassigned, in the form "0,1,2".')
    p.add_argument("--cancel", action="store_true",
                   help="Cancel the reassignments of the partitions in --reassignment-json-file "
                        "(needs --bootstrap-server); their throttles go too unless "
                        "--preserve-throttles.")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="With --cancel: keep the throttle configs.")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_S",
                   help="With --execute: the replication rate limit (bytes/s) of the brokers "
                        "involved while the partitions move; --verify removes it when done.")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="With --generate: ignore the brokers' racks.")
    add_wait_arguments(p, "With --verify: poll until no partition is in progress; exit 0 if all "
                        "completed successfully, else 1. Progress goes to stderr.")
    return p


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        return usage_error(parser, "Command must include exactly one action: --generate, "
                                    "--execute or --verify", out)
    action = chosen[0]
    if not args.zookeeper and not args.bootstrap_server:
        return usage_error(parser, 'Missing required argument "[zookeeper]"', out)
    if args.zookeeper and args.bootstrap_server:
        return usage_error(parser, "Only one of --zookeeper and --bootstrap-server may be given", out)
    if action == "generate" and not (args.topics_to_move_json_file and args.broker_list):
        return usage_error(parser, "If --generate option is used, command must include both "
                                    "--topics-to-move-json-file and --broker-list options", out)
    if action == "execute" and not args.reassignment_json_file:
        return usage_error(parser, "If --execute option is used, command must include "
                                    "--reassignment-json-file that was output during the "
                                    "--generate option", out)
    if action == "verify" and not args.reassignment_json_file:
        return usage_error(parser, "If --verify option is used, command must include "
                                    "--reassignment-json-file that was used during the "
                                    "--execute option", out)
    if action == "cancel" and not (args.bootstrap_server and args.reassignment_json_file):
        return usage_error(parser, "--cancel needs --bootstrap-server and --reassignment-json-file", out)
    if args.throttle >= 0 and action != "execute":
        return usage_error(parser, "--throttle can only be used with --execute", out)
    if args.wait and action != "verify":
        return usage_error(parser, "--wait can only be used with --verify", out)
    if args.timeout is not None and args.timeout < 0:
        return usage_error(parser, "--timeout must not be negative", out)
    try:
        # Input first, read synchronously: the file may vanish once we return.
        if action == "generate":
            brokers = parse_broker_list(args.broker_list)
            source = args.topics_to_move_json_file
            topics = parse_topics_to_move(read_file_as_string(source), source)
            if twice := duplicates(topics):
                raise ReassignCommandError("List of topics to reassign contains duplicate "
                                           "entries: " + ",".join(twice))
        else:
            source = args.reassignment_json_file
            entries = parse_reassignment(read_file_as_string(source), source)
            # --verify reads the file as a map, as Kafka does: no checks, last entry wins.
            requested = (validate_reassignment(entries, source) if action == "execute"
                         else dict(entries))
        if args.bootstrap_server:
            return bootstrap_action(args.bootstrap_server, action, requested if action != "generate"
                                    else (brokers, topics), args.wait, args.timeout, out, err, args)
        with ZkAdmin(args.zookeeper) as admin:
            if action == "generate":
                racks = {} if args.disable_rack_aware else admin.store.live_broker_racks()
                generate(current_assignment(admin, topics), with_racks(brokers, racks), out)
            elif action == "execute":
                execute(admin, requested, out, err, args.throttle)
            else:
                return verify(admin.store.reassignment, lambda t: current_assignment(admin, t),
                              requested, args.wait, args.timeout, out, err,
                              lambda: remove_throttle(ZkTarget(admin), [tp.topic for tp in requested], out))
    except (ReassignCommandError, AdminOperationError, ValueError, ZkNoNode, KafkaError,
            *ZK_UNAVAILABLE) as e:
        print(f"Partitions reassignment failed due to {error_message(e)}", file=out)
        return 1
    return 0


def with_racks(brokers: list[int], racks: Mapping[int, str | None]):
    """The ``--broker-list`` with each broker's rack, when the brokers have racks.

    >>> with_racks([1, 2], {}), with_racks([1, 2], {1: "a", 2: "b", 3: "c"})
    ([1, 2], {1: 'a', 2: 'b'})
    """
    if not any(racks.get(b) for b in brokers):
        return brokers
    return {b: racks.get(b) for b in brokers}


def cancel(client: ControllerClient, request: Mapping[TopicPartition, Replicas], preserve: bool,
           out) -> int:
    """KIP-455's ``--cancel``: a null target for each partition, then the throttles go."""
    results = alter(client, {tp: None for tp in request})
    done = [f"{tp.topic}-{tp.partition}" for tp, code, _ in results if not code]
    if done:
        print(f"Successfully cancelled partition reassignment(s) for: {','.join(done)}", file=out)
    for tp, code, message in results:
        if code:
            print(f"Error cancelling partition reassignment for {tp.topic}-{tp.partition}: "
                  f"{error_name(code)}" + (f": {message}" if message else ""), file=out)
    if not preserve:
        remove_throttle(BootstrapTarget(client.cluster), [tp.topic for tp in request], out)
    return 1 if len(done) < len(results) else 0


def bootstrap_action(bootstrap: str, action: str, request, wait: bool, timeout_s: float | None,
                     out, err, args: argparse.Namespace) -> int:
    """--generate/--execute/--verify/--cancel over the protocol: Metadata for the current
    assignment, Alter/ListPartitionReassignments to the controller."""
    with ControllerClient(bootstrap) as client:
        if action == "generate":
            brokers, topics = request
            racks = {} if args.disable_rack_aware else {
                b: m.rack for b, m in client.cluster.refresh().brokers.items()}
            generate(client.assignments(topics), with_racks(brokers, racks), out)
            return 0
        if action == "verify":
            return verify(lambda: in_progress(client), client.assignments,
                          request, wait, timeout_s, out, err,
                          lambda: remove_throttle(BootstrapTarget(client.cluster),
                                                  [tp.topic for tp in request], out))
        if action == "cancel":
            return cancel(client, request, args.preserve_throttles, out)
        if args.throttle >= 0:
            print(WARNING, file=out)
        current = client.assignments(list(dict.fromkeys(tp.topic for tp in request)))
        print(f"Current partition replica assignment\n\n{reassignment_json(current)}\n\n"
              f"Save this to use as the --reassignment-json-file option during rollback", file=out)
        valid = {}
        for tp, replicas in request.items():
            if tp in current:
                valid[tp] = replicas
            else:
                print(f"Skipping reassignment of partition {tp} since it doesn't exist", file=err)
        if not valid:
            raise ReassignCommandError("none of the partitions exists")
        if args.throttle >= 0:
            apply_throttle(BootstrapTarget(client.cluster), current, valid, args.throttle, out)
        failed = [(tp, code, message) for tp, code, message in alter(client, valid) if code]
        started = [f"{tp.topic}-{tp.partition}" for tp in valid
                   if tp not in {f[0] for f in failed}]
        if started:
            print(f"Successfully started partition reassignment{'s' if len(started) > 1 else ''} "
                  f"for {','.join(started)}", file=out)
        for tp, code, message in failed:
            print(f"Error reassigning partition {tp.topic}-{tp.partition}: {error_name(code)}"
                  + (f": {message}" if message else ""), file=out)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
