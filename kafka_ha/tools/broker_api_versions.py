"""``kafka-broker-api-versions.sh``: the API versions every broker of the cluster answers.

Kafka's BrokerApiVersionsCommand: bootstrap, list the brokers from Metadata, send
each one ApiVersions and print, per broker, every API key this client knows
(sorted by key) as ``Name(key): min to max [usable: v]``, where ``v`` is the
newest version both sides speak (``min`` alone when min == max).  A key the
broker does not answer for is ``UNSUPPORTED``; one it answers for but this
client does not know is ``UNKNOWN(key)``; a range with nothing in common is
``[unusable: node too new]`` or ``[unusable: node too old]``.  A broker that
cannot be asked prints ``-> ERROR: <why>`` and the exit code stays 0, as in Kafka.

"This client" is kafka_ha's protocol layer: its versions are SUPPORTED_VERSIONS.
"""
from __future__ import annotations

import sys
from typing import Any, TextIO

from kafka_ha.client.cli import ToolArgumentParser, run_reporting_errors
from kafka_ha.client.cluster import BrokerMetadata, ClusterMetadata
from kafka_ha.client.errors import KafkaError
from kafka_ha.protocol.api import SUPPORTED_VERSIONS, ApiKey
from kafka_ha.protocol.errors import ErrorCode, error_name

API_VERSIONS_VERSION = 1   # not flexible, and every broker since 0.10.0 answers v0-1
# Kafka's ApiKeys names where they are not our enum name in CamelCase.
_KAFKA_NAMES = {ApiKey.OFFSETS_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch"}


def api_name(key: ApiKey) -> str:
    """Kafka's name for an API key.

    >>> api_name(ApiKey.LIST_OFFSETS), api_name(ApiKey.OFFSETS_FOR_LEADER_EPOCH)
    ('ListOffsets', 'OffsetForLeaderEpoch')
    """
    return _KAFKA_NAMES.get(key) or "".join(w.capitalize() for w in key.name.split("_"))


def version_text(key: int, lo: int, hi: int,
                 ours: dict[ApiKey, tuple[int, int]] = SUPPORTED_VERSIONS) -> str:
    """One API's line, as Kafka's NodeApiVersions writes it.

    >>> version_text(0, 0, 7, {ApiKey.PRODUCE: (0, 8)})
    'Produce(0): 0 to 7 [usable: 7]'
    >>> version_text(5, 0, 0, {ApiKey.STOP_REPLICA: (0, 0)})
    'StopReplica(5): 0 [usable: 0]'
    >>> version_text(1, 12, 16, {ApiKey.FETCH: (0, 10)})
    'Fetch(1): 12 to 16 [unusable: node too new]'
    >>> version_text(1, 0, 2, {ApiKey.FETCH: (4, 10)})
    'Fetch(1): 0 to 2 [unusable: node too old]'
    >>> version_text(999, 0, 1)
    'UNKNOWN(999): 0 to 1'
    """
    span = str(lo) if lo == hi else f"{lo} to {hi}"
    known = key in ApiKey._value2member_map_ and ApiKey(key) in ours
    if not known:
        return f"UNKNOWN({key}): {span}"
    our_lo, our_hi = ours[ApiKey(key)]
    head = f"{api_name(ApiKey(key))}({key}): {span}"
    if our_hi < lo:
        return f"{head} [unusable: node too new]"
    if hi < our_lo:
        return f"{head} [unusable: node too old]"
    return f"{head} [usable: {min(our_hi, hi)}]"


def node_text(broker: BrokerMetadata, entries: list[dict[str, int]],
              ours: dict[ApiKey, tuple[int, int]] = SUPPORTED_VERSIONS) -> str:
    """The broker's block: every key it answers for and every key we know, by key.

    >>> b = BrokerMetadata(1, "h", 9092)
    >>> print(node_text(b, [{"api_key": 0, "min_version": 0, "max_version": 7}],
    ...                 {ApiKey.PRODUCE: (0, 7), ApiKey.FETCH: (0, 10)}))
    h:9092 (id: 1 rack: null) -> (
    	Produce(0): 0 to 7 [usable: 7],
    	Fetch(1): UNSUPPORTED
    )
    """
    lines = {e["api_key"]: version_text(e["api_key"], e["min_version"], e["max_version"], ours)
             for e in entries}
    for key in ours:
        lines.setdefault(int(key), f"{api_name(key)}({int(key)}): UNSUPPORTED")
    body = ",\n\t".join(lines[k] for k in sorted(lines))
    return f"{node_label(broker)} -> (\n\t{body}\n)"


def node_label(broker: BrokerMetadata) -> str:
    """Kafka's Node.toString."""
    rack = "null" if broker.rack is None else broker.rack
    return f"{broker.host}:{broker.port} (id: {broker.node_id} rack: {rack})"


def build_parser() -> ToolArgumentParser:
    p = ToolArgumentParser(prog="kafka-broker-api-versions.sh",
                           description="Print the API versions each broker of the cluster "
                                       "supports.")
    p.add_argument("--bootstrap-server", required=True,
                   help="REQUIRED: The server to connect to.")
    return p


def run(cluster: ClusterMetadata, out: TextIO) -> int:
    snapshot = cluster.refresh([])   # no topics: only the brokers
    for node_id in sorted(snapshot.brokers):
        broker = snapshot.brokers[node_id]
        try:
            answer: dict[str, Any] = cluster.request(node_id, ApiKey.API_VERSIONS,
                                                     API_VERSIONS_VERSION, {})
            if answer["error_code"] != ErrorCode.NONE:
                raise KafkaError(answer["error_code"],
                                 f"ApiVersions answered {error_name(answer['error_code'])}")
        except KafkaError as exc:
            print(f"{node_label(broker)} -> ERROR: {exc}", file=out)
            continue
        print(node_text(broker, answer["api_keys"]), file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cluster = ClusterMetadata(args.bootstrap_server, client_id="kafka-broker-api-versions")
    except ValueError as exc:
        build_parser().die(str(exc))
    return run_reporting_errors(lambda: run(cluster, sys.stdout), cluster)


if __name__ == "__main__":
    sys.exit(main())
