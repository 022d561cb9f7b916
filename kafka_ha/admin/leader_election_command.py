"""``kafka-leader-election.sh``: Kafka 2.4's LeaderElectionCommand, over ElectLeaders.

Options as in Kafka: ``--bootstrap-server``, ``--election-type preferred|unclean``
and exactly one of ``--topic`` (with ``--partition``), ``--all-topic-partitions``
or ``--path-to-json-file`` (``{"partitions": [{"topic": t, "partition": p}]}``,
the preferred-election file).  The controller refuses unclean elections
(INVALID_REQUEST): there is no forced-unclean election here.  Output lines are
Kafka's; any failed partition makes the exit code 1.
"""
from __future__ import annotations

import argparse
import sys

from kafka_ha.admin.admin_input import read_file_as_string
from kafka_ha.admin.cli import usage_error
from kafka_ha.admin.controller_client import ControllerClient
from kafka_ha.admin.preferred_election_command import ElectionCommandError, parse_election_data
from kafka_ha.client.errors import KafkaError
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode, error_name

ELECTION_TYPES = {"preferred": 0, "unclean": 1}
ELECT_LEADERS_VERSION = 1   # the first with the election type and a top-level error


def partition_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def report(election_type: str, results: list[tuple[TopicPartition, int, str | None]]) -> tuple[list[str], int]:
    """Kafka's summary lines and the exit code.

    >>> tp = TopicPartition
    >>> report("PREFERRED", [(tp("a", 0), 0, None), (tp("a", 1), 84, "x"), (tp("b", 0), 80, "gone")])
    (['Successfully completed leader election (PREFERRED) for partitions a-0', \
'Valid replica already elected for partitions a-1', 'Error completing leader election (PREFERRED) \
for partition: b-0: PREFERRED_LEADER_NOT_AVAILABLE: gone'], 1)
    """
    done = [partition_name(tp) for tp, code, _ in results if code == ErrorCode.NONE]
    noop = [partition_name(tp) for tp, code, _ in results if code == ErrorCode.ELECTION_NOT_NEEDED]
    failed = [(tp, code, message) for tp, code, message in results
              if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)]
    lines = []
    if done:
        lines.append(f"Successfully completed leader election ({election_type}) for partitions "
                     + ", ".join(done))
    if noop:
        lines.append("Valid replica already elected for partitions " + ", ".join(noop))
    for tp, code, message in failed:
        lines.append(f"Error completing leader election ({election_type}) for partition: "
                     f"{partition_name(tp)}: {error_name(code)}" + (f": {message}" if message else ""))
    return lines, 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafka-leader-election.sh",
                                description="Elects leaders for the given partitions.")
    p.add_argument("--bootstrap-server", help="REQUIRED: the brokers to connect to, host:port[,...]")
    p.add_argument("--election-type", type=str.lower, choices=sorted(ELECTION_TYPES),
                   help="REQUIRED: preferred or unclean (unclean is refused by kafka-ha)")
    p.add_argument("--topic", help="Name of the topic; requires --partition.")
    p.add_argument("--partition", type=int, help="Partition id of --topic.")
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="Elect leaders for every partition of every topic.")
    p.add_argument("--path-to-json-file",
                   help='A JSON file of partitions: {"partitions":[{"topic":"foo","partition":1}]}')
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="How long the controller may take (default 30).")
    return p


def _check(args: argparse.Namespace) -> str | None:
    if not args.bootstrap_server:
        return "Missing required option(s): bootstrap-server"
    if not args.election_type:
        return "Missing required option(s): election-type"
    sources = [bool(args.topic), args.all_topic_partitions, bool(args.path_to_json_file)]
    if sum(sources) != 1:
        return ("One and only one of the following options is required: all-topic-partitions, "
                "topic, path-to-json-file")
    if args.topic and args.partition is None:
        return "Missing required option(s): partition"
    if args.partition is not None and not args.topic:
        return "Option partition is only allowed if topic is used"
    return None


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = _check(args)
    if problem:
        return usage_error(parser, problem, out)
    try:
        if args.path_to_json_file:
            partitions = parse_election_data(read_file_as_string(args.path_to_json_file))
        elif args.topic:
            partitions = [TopicPartition(args.topic, args.partition)]
        else:
            partitions = None
        topics = None if partitions is None else [
            {"topic": topic, "partitions": [tp.partition for tp in partitions if tp.topic == topic]}
            for topic in dict.fromkeys(tp.topic for tp in partitions)]
        with ControllerClient(args.bootstrap_server, args.timeout + 5) as client:
            answer = client.request(ApiKey.ELECT_LEADERS, ELECT_LEADERS_VERSION, {
                "election_type": ELECTION_TYPES[args.election_type],
                "topic_partitions": topics, "timeout_ms": int(args.timeout * 1000)})
    except (ElectionCommandError, KafkaError, ValueError, OSError) as e:
        print(f"Error while making request: {e}", file=out)
        return 1
    if answer["error_code"] != ErrorCode.NONE:
        print(f"Error while making request: {error_name(answer['error_code'])}", file=out)
        return 1
    results = [(TopicPartition(t["topic"], p["partition_id"]), p["error_code"], p["error_message"])
               for t in answer["replica_election_results"] for p in t["partition_result"]]
    lines, code = report(args.election_type.upper(), results)
    for line in lines:
        print(line, file=out)
    return code


if __name__ == "__main__":
    sys.exit(main())
