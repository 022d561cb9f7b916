"""kafka-consumer-groups.sh: list consumer groups and describe one (Kafka 2.x's
ConsumerGroupCommand, --bootstrap-server only).

``--list`` asks every broker for the groups it coordinates (ListGroups).
``--describe --group G`` asks G's coordinator for its members (DescribeGroups)
and committed offsets (OffsetFetch v2, all partitions), and the partition leaders
for their log end offsets; with ``--members`` one line per member, with
``--state`` one line for the group.  Resetting and deleting offsets are not here.
"""
from __future__ import annotations

import struct
import sys
import time
from typing import Any, TextIO

from kafka_ha.client.cli import ToolArgumentParser, run_reporting_errors
from kafka_ha.client.cluster import ClusterMetadata
from kafka_ha.client.errors import KafkaTimeoutError, error_for
from kafka_ha.client.offsets import LATEST, OffsetClient
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode

RETRY_CODES = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
               ErrorCode.NOT_COORDINATOR)
OFFSET_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                 "CONSUMER-ID", "HOST", "CLIENT-ID")
MEMBER_HEADER = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
STATE_HEADER = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The partitions of a consumer-protocol assignment (version, [topic, [partition]],
    user data); a member of another protocol, or unreadable bytes, has none.

    >>> raw = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">iii", 2, 0, 3) + struct.pack(">i", -1)
    >>> decode_assignment(raw)
    [('t', 0), ('t', 3)]
    >>> decode_assignment(b"")
    []
    """
    try:
        pos = 2
        (topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out = []
        for _ in range(topics):
            (length,) = struct.unpack_from(">h", data, pos)
            topic = bytes(data[pos + 2:pos + 2 + length]).decode()
            pos += 2 + length
            (count,) = struct.unpack_from(">i", data, pos)
            partitions = struct.unpack_from(f">{count}i", data, pos + 4)
            pos += 4 + 4 * count
            out += [(topic, p) for p in partitions]
        return out
    except (struct.error, UnicodeDecodeError):
        return []


def table(rows: list[tuple], out: TextIO) -> None:
    """Columns as wide as their widest cell, the last one unpadded (as Kafka prints them)."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [str(c).ljust(w) for c, w in zip(row, widths)] + [str(row[-1])]
        print(" ".join(cells), file=out)


class GroupAdmin:
    def __init__(self, cluster: ClusterMetadata, timeout_s: float) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s

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
                if error == ErrorCode.NONE:
                    return response, where
            if error not in RETRY_CODES:
                raise error_for(error, f"group {group!r}")
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"the coordinator of group {group!r} did not answer: "
                                        f"{ErrorCode(error).name}")
            time.sleep(0.2)

    def describe(self, group: str) -> tuple[dict[str, Any], dict, tuple]:
        described, where = self._at_coordinator(
            group, ApiKey.DESCRIBE_GROUPS, 0, {"groups": [group]},
            lambda r: r["groups"][0]["error_code"])
        fetched, _ = self._at_coordinator(group, ApiKey.OFFSET_FETCH, 2,
                                          {"group_id": group, "topics": None},
                                          lambda r: r["error_code"])
        committed = {TopicPartition(t["name"], p["partition_index"]): p["committed_offset"]
                     for t in fetched["topics"] for p in t["partitions"]}
        return described["groups"][0], committed, where

    def log_end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        return OffsetClient(self.cluster, self.timeout_s).list_offsets(tps, LATEST)


def describe_offsets(group: str, info: dict[str, Any], committed: dict, ends: dict) -> list[tuple]:
    owner = {}
    for m in info["members"]:
        for topic, partition in decode_assignment(m["member_assignment"]):
            owner[TopicPartition(topic, partition)] = m
    rows = [OFFSET_HEADER]
    for tp in sorted(set(committed) | set(owner)):
        current = committed.get(tp, -1)
        end = ends.get(tp)
        m = owner.get(tp)
        rows.append((group, tp.topic, tp.partition, current if current >= 0 else "-",
                     "-" if end is None else end,
                     end - current if end is not None and current >= 0 else "-",
                     m["member_id"] if m else "-", (m["client_host"] or "-") if m else "-",
                     m["client_id"] if m else "-"))
    return rows


def run(args, admin: GroupAdmin, out: TextIO) -> int:
    if args.list:
        for group in admin.list_groups():
            print(group, file=out)
        return 0
    info, committed, (node, host, port) = admin.describe(args.group)
    if info["group_state"] == "Dead" and not committed:
        print(f"Error: Consumer group '{args.group}' does not exist.", file=sys.stderr)
        return 1
    print(file=out)
    if args.state:
        table([STATE_HEADER, (args.group, f"{host}:{port} ({node})", info["protocol_data"] or "",
                              info["group_state"], len(info["members"]))], out)
        return 0
    if not info["members"]:
        print(f"Consumer group '{args.group}' has no active members.", file=out)
        if args.members:
            return 0
        print(file=out)
    if args.members:
        table([MEMBER_HEADER] + [
            (args.group, m["member_id"], m["client_host"] or "-", m["client_id"],
             len(decode_assignment(m["member_assignment"]))) for m in info["members"]], out)
        return 0
    tps = sorted(set(committed) | {TopicPartition(t, p) for m in info["members"]
                                   for t, p in decode_assignment(m["member_assignment"])})
    table(describe_offsets(args.group, info, committed, admin.log_end_offsets(tps)), out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = ToolArgumentParser(prog="kafka-consumer-groups.sh",
                                description="List all consumer groups, or describe one.")
    parser.add_argument("--bootstrap-server", required=True,
                        help="REQUIRED: The server(s) to connect to.")
    parser.add_argument("--list", action="store_true", help="List all consumer groups.")
    parser.add_argument("--describe", action="store_true",
                        help="Describe consumer group and list offset lag related to given group.")
    parser.add_argument("--group", help="The consumer group we wish to act on.")
    parser.add_argument("--members", action="store_true", help="Describe members of the group.")
    parser.add_argument("--state", action="store_true", help="Describe the group's state.")
    parser.add_argument("--offsets", action="store_true",
                        help="Describe the group and list all topic partitions in the group "
                             "along with their offset lag (the default with --describe).")
    parser.add_argument("--timeout", type=int, default=30000, metavar="MS",
                        help="Timeout for some of the operations (ms).")
    args = parser.parse_args(argv)
    if args.list == args.describe:
        parser.die("Command must include exactly one action: --list, --describe")
    if args.describe and not args.group:
        parser.die("Option [describe] takes option [group]")
    if sum((args.members, args.state, args.offsets)) > 1:
        parser.die("Option [describe] takes at most one of these options: [members], [state], "
                   "[offsets]")
    cluster = ClusterMetadata(args.bootstrap_server, client_id="kafka-consumer-groups",
                              request_timeout_ms=args.timeout)
    admin = GroupAdmin(cluster, args.timeout / 1000)
    return run_reporting_errors(lambda: run(args, admin, sys.stdout), cluster)


if __name__ == "__main__":
    sys.exit(main())
