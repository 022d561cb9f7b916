"""kafka-consumer-groups.sh: list, describe, reset and delete consumer groups (Kafka
2.x's ConsumerGroupCommand, --bootstrap-server only).

``--list`` asks every broker for the groups it coordinates (ListGroups).
``--describe`` asks the group's coordinator for its members (DescribeGroups) and
committed offsets (OffsetFetch v2), and the partition leaders for their log end
offsets: one line per partition, or with ``--members`` per member, with ``--state``
one for the group.  ``--reset-offsets`` plans new committed offsets for a group
without members (``consumer_group_reset``) and, with ``--execute``, commits them.
``--delete`` removes groups without members (DeleteGroups).  Layouts:
``consumer_group_views``.  Kafka's own errors print on stderr with exit code 1.
"""
from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from kafka_ha.client.cli import ToolArgumentParser, run_reporting_errors
from kafka_ha.client.cluster import ClusterMetadata
from kafka_ha.client.errors import KafkaTimeoutError, error_for
from kafka_ha.client.offsets import EARLIEST, LATEST, OffsetClient
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode, error_name
from kafka_ha.tools import consumer_group_reset as reset
from kafka_ha.tools import consumer_group_views as views

RETRY_CODES = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
               ErrorCode.NOT_COORDINATOR)
INACTIVE_STATES = ("Empty", "Dead")
# Kafka's texts for the errors DeleteGroups answers.
DELETE_ERRORS = {ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
                 ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
                 ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid."}


class GroupAdmin:
    """The requests the tool sends; every answer comes from the group's coordinator
    (found anew, and retried, while it moves or loads) or a partition leader."""

    def __init__(self, cluster: ClusterMetadata, timeout_s: float) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        self.offsets = OffsetClient(cluster, timeout_s)

    def list_groups(self) -> list[str]:
        groups: set[str] = set()
        for node in sorted(self.cluster.refresh().brokers):
            response = self.cluster.request(node, ApiKey.LIST_GROUPS, 0, {})
            groups |= {g["group_id"] for g in response["groups"]}
        return sorted(groups)

    def _at_coordinator(self, group: str, api_key: int, version: int,
                        body: dict[str, Any], error_of) -> tuple[dict[str, Any], tuple]:
        """The coordinator's answer, retried while it moves or loads."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            found = self.cluster.request_any(ApiKey.FIND_COORDINATOR, 0, {"key": group})
            error = found["error_code"]
            if error == ErrorCode.NONE:
                where = (found["node_id"], found["host"], found["port"])
                response = self.cluster.request_at(*where, api_key, version, body)
                error = error_of(response)
                if error not in RETRY_CODES:
                    return response, where
            if error not in RETRY_CODES:
                raise error_for(error, f"group {group!r}")
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"the coordinator of group {group!r} did not answer: "
                                        f"{ErrorCode(error).name}")
            time.sleep(0.2)

    def describe(self, group: str) -> tuple[dict[str, Any], tuple]:
        described, where = self._at_coordinator(
            group, ApiKey.DESCRIBE_GROUPS, 0, {"groups": [group]},
            lambda r: r["groups"][0]["error_code"])
        info = described["groups"][0]
        if info["error_code"] != ErrorCode.NONE:
            raise error_for(info["error_code"], f"describing group {group!r}")
        return info, where

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        fetched, _ = self._at_coordinator(group, ApiKey.OFFSET_FETCH, 2,
                                          {"group_id": group, "topics": None},
                                          lambda r: r["error_code"])
        if fetched["error_code"] != ErrorCode.NONE:
            raise error_for(fetched["error_code"], f"fetching the offsets of group {group!r}")
        return {(t["name"], p["partition_index"]): p["committed_offset"]
                for t in fetched["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}

    def list_offsets(self, tps: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        """Per partition, the offset for a timestamp (EARLIEST, LATEST or ms)."""
        if not tps:
            return {}
        found = self.offsets.list_offsets([TopicPartition(*tp) for tp in tps], timestamp)
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def partitions_of(self, topics: list[str]) -> list[tuple[str, int]]:
        if not topics:
            return []
        snapshot = self.cluster.wait_for_topics(topics, self.timeout_s)
        return [(t, p) for t in topics for p in snapshot.partitions_for(t)]

    def check_exist(self, tps: list[tuple[str, int]]) -> None:
        """Named topics and partitions exist (a typo would otherwise be retried until
        the timeout, as a partition still being created is).  The metadata of all
        topics: asking for one by name would auto-create it."""
        if not tps:
            return
        snapshot = self.cluster.refresh()
        for topic, partition in tps:
            if snapshot.topic_error(topic) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise reset.ResetError(f"Topic '{topic}' does not exist")
            known = snapshot.partitions_for(topic)
            if known is not None and partition not in known:
                raise reset.ResetError(f"Partition {partition} of topic '{topic}' does not exist")

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        self.offsets.commit(group, {TopicPartition(*tp): o for tp, o in offsets.items()})

    def delete(self, groups: list[str]) -> dict[str, int]:
        results = {}
        for group in groups:
            response, _ = self._at_coordinator(group, ApiKey.DELETE_GROUPS, 1,
                                               {"groups_names": [group]},
                                               lambda r: r["results"][0]["error_code"])
            results[group] = response["results"][0]["error_code"]
        return results


def _print(lines: list[str], out: TextIO) -> None:
    for line in lines:
        print(line, file=out)


def _error(message: str) -> int:
    print(f"\nError: {message}", file=sys.stderr)
    return 1


def _exists(group: str, info: dict[str, Any], committed: dict | None) -> bool:
    return info["group_state"] != "Dead" or bool(committed)


def describe(args, admin: GroupAdmin, group: str, out: TextIO) -> int:
    info, where = admin.describe(group)
    committed = admin.committed(group) if not (args.members or args.state) else None
    if not _exists(group, info, committed):
        return _error(f"Consumer group '{group}' does not exist.")
    if info["group_state"] in ("Empty", "Dead"):   # Dead here: offsets only, no metadata
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif info["group_state"] in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    if args.state:
        _print(views.state_lines(group, where, info["protocol_data"], info["group_state"],
                                 len(info["members"])), out)
        return 0
    if args.members:
        if info["members"]:
            _print(views.member_lines(group, info["members"], args.verbose), out)
        return 0
    tps = set(committed) | {tp for m in info["members"]
                            for tp in views.decode_assignment(m["member_assignment"])}
    rows = views.offset_rows(group, info["members"], committed,
                             admin.list_offsets(sorted(tps), LATEST))
    if rows:
        _print(views.offset_lines(rows), out)
    return 0


def reset_offsets(args, admin: GroupAdmin, group: str, out: TextIO) -> int:
    info, _ = admin.describe(group)
    if info["group_state"] not in INACTIVE_STATES:
        return _error(f"Assignments can only be reset if the group '{group}' is inactive, "
                      f"but the current state is {info['group_state']}.")
    committed = admin.committed(group)
    if args.all_topics:
        partitions = sorted(committed)
    else:
        named, whole = reset.parse_topics(args.topic)
        admin.check_exist(named + [(t, 0) for t in whole])
        partitions = sorted(set(named) | set(admin.partitions_of(whole)))
    mode, value, by_time = args.mode, None, None
    if mode == "to-offset":
        value = args.to_offset
    elif mode == "shift-by":
        value = args.shift_by
    elif mode == "to-datetime":
        by_time = admin.list_offsets(partitions, reset.parse_datetime(args.to_datetime))
    starts = admin.list_offsets(partitions, EARLIEST)
    ends = admin.list_offsets(partitions, LATEST)
    planned = reset.plan(mode, value, partitions, committed, starts, ends, by_time)
    for warning in planned.warnings:
        print(f"WARN: {warning}", file=sys.stderr)
    if args.execute and planned.offsets:
        admin.commit(group, planned.offsets)
    _print(views.reset_plan_lines([(group, t, p, o) for (t, p), o in planned.offsets.items()]),
           out)
    return 0


def delete(args, admin: GroupAdmin, out: TextIO) -> int:
    results = admin.delete(args.group)
    done = [g for g, e in results.items() if e == ErrorCode.NONE]
    failed = {g: e for g, e in results.items() if e != ErrorCode.NONE}
    names = ", ".join(f"'{g}'" for g in done)
    if not failed:
        print(f"Deletion of requested consumer groups ({names}) was successful.", file=out)
        return 0
    _error("Deletion of some consumer groups failed:")
    for group, code in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {error_name(code)}: "
              f"{DELETE_ERRORS.get(code, 'see the broker log')}", file=sys.stderr)
    if done:
        print(f"\nThese consumer groups were deleted successfully: {names}", file=out)
    return 1


def run(args, admin: GroupAdmin, out: TextIO) -> int:
    if args.list:
        for group in admin.list_groups():
            print(group, file=out)
        return 0
    if args.delete:
        return delete(args, admin, out)
    act = describe if args.describe else reset_offsets
    code = 0
    for group in args.group:
        try:
            code = max(code, act(args, admin, group, out))
        except reset.ResetError as exc:
            code = _error(str(exc))
    return code


ACTIONS = ("list", "describe", "delete", "reset_offsets")


def parse_args(argv: list[str] | None) -> Any:
    """The options, checked as Kafka's tool checks them (its messages where it has one)."""
    parser = ToolArgumentParser(
        prog="kafka-consumer-groups.sh",
        description="This tool helps to list all consumer groups, describe a consumer group, "
                    "delete consumer group info, or reset consumer group offsets.")
    add = parser.add_argument
    add("--bootstrap-server", required=True, help="REQUIRED: The server(s) to connect to.")
    add("--list", action="store_true", help="List all consumer groups.")
    add("--describe", action="store_true",
        help="Describe consumer group and list offset lag related to given group.")
    add("--delete", action="store_true",
        help="Delete the group's committed offsets and metadata (groups without members "
             "only). For instance --group g1 --group g2")
    add("--reset-offsets", action="store_true",
        help="Reset offsets of consumer group (without members): --dry-run (the default) "
             "plans, --execute commits. One of --to-earliest, --to-latest, --to-offset, "
             "--to-datetime, --shift-by; scope --all-topics or --topic.")
    add("--group", action="append", default=[], help="The consumer group we wish to act on.")
    add("--topic", action="append", default=[],
        help="With --reset-offsets: a topic, or topic:0,1,2 for some of its partitions.")
    add("--all-topics", action="store_true",
        help="With --reset-offsets: every partition the group has committed offsets for.")
    add("--members", action="store_true", help="Describe members of the group.")
    add("--state", action="store_true", help="Describe the group's state.")
    add("--offsets", action="store_true",
        help="Describe the group and list all topic partitions in the group along with their "
             "offset lag (the default with --describe).")
    add("--verbose", action="store_true",
        help="With --describe --members: each member's assigned partitions.")
    add("--dry-run", action="store_true",
        help="Only show results without executing changes on Consumer Groups.")
    add("--execute", action="store_true", help="Execute operation (--reset-offsets).")
    add("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    add("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    add("--to-offset", type=int, metavar="OFFSET", help="Reset offsets to a specific offset.")
    add("--to-datetime", metavar="DATETIME",
        help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'")
    add("--shift-by", type=int, metavar="N",
        help="Reset offsets shifting current offset by 'n', where 'n' can be positive or "
             "negative.")
    add("--timeout", type=int, default=30000, metavar="MS",
        help="Timeout for some of the operations (ms).")
    args = parser.parse_args(argv)
    if sum(getattr(args, a) for a in ACTIONS) != 1:
        parser.die("Command must include exactly one action: --list, --describe, --delete, "
                   "--reset-offsets")
    _check_group_options(parser, args)
    return args


def _check_group_options(parser: ToolArgumentParser, args) -> None:
    action = next(a for a in ACTIONS if getattr(args, a)).replace("_", "-")
    modes = [m for m in reset.MODES if getattr(args, m.replace("-", "_")) not in (None, False)]
    if action != "describe":
        for option in ("members", "state", "offsets", "verbose"):
            if getattr(args, option):
                parser.die(f"Option [{option}] can be used with [describe] only")
    if action != "reset-offsets":
        for option in ("all-topics", "dry-run", "execute") + tuple(modes):
            if getattr(args, option.replace("-", "_")) not in (None, False):
                parser.die(f"Option [{option}] can be used with [reset-offsets] only")
    if action == "list":
        if args.group or args.topic:
            parser.die(f'Option "[{"group" if args.group else "topic"}]" can\'t be used with '
                       'option "[list]"')
        return
    if not args.group:
        parser.die(f"Option [{action}] takes option [group]")
    if action == "describe":
        if args.topic:
            parser.die('Option "[topic]" can\'t be used with option "[describe]"')
        if sum((args.members, args.state, args.offsets)) > 1:
            parser.die("Option [describe] takes at most one of these options: [members], "
                       "[state], [offsets]")
        if args.verbose and not args.members:
            parser.die("Option [verbose] is used with [describe] [members] only")
    elif action == "delete":
        if args.topic:
            parser.die("The consumer does not support topic-specific offset deletion from a "
                       "consumer group.")
    else:
        _check_reset(parser, args, modes)


def _check_reset(parser: ToolArgumentParser, args, modes: list[str]) -> None:
    if args.dry_run and args.execute:
        parser.die("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
    if len(modes) > 1:
        parser.die(f'Option "[{modes[0]}]" can\'t be used with option "[{modes[1]}]"')
    if not modes:
        parser.die("Option [reset-offsets] requires one of the following scenarios: "
                   + ", ".join(f"[{m}]" for m in reset.MODES))
    if not args.topic and not args.all_topics:
        parser.die("One of the reset scopes should be defined: --all-topics, --topic.")
    if args.topic and args.all_topics:
        parser.die('Option "[all-topics]" can\'t be used with option "[topic]"')
    args.mode = modes[0]
    if not args.dry_run and not args.execute:
        print("WARN: No action will be performed as the --execute option is missing. "
              "Add --dry-run to plan without this warning, or --execute to commit the plan.",
              file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cluster = ClusterMetadata(args.bootstrap_server, client_id="kafka-consumer-groups",
                              request_timeout_ms=args.timeout)
    admin = GroupAdmin(cluster, args.timeout / 1000)
    return run_reporting_errors(lambda: run(args, admin, sys.stdout), cluster)


if __name__ == "__main__":
    sys.exit(main())
