"""``kafka-replica-verification.sh``: check that every replica of a partition holds the same data.

Kafka's ReplicaVerificationTool: Metadata, then ListOffsets (``--time``) for
the start offsets, then rounds of one Fetch per broker for all the replicas
it hosts, with ``replica_id = -2`` (the debug consumer, which the broker
lets read a follower; Kafka's tool fetched with it too).  Each round walks
the replicas' entries side by side up to each replica's high watermark,
comparing offsets and checksums entry by entry (shallowly: a v2 batch or a
magic 0/1 message is one entry).  Output lines are Kafka's, typo included::

    <ts>: verification process is started.
    <ts>: max lag is 0 for partition [foo,0] at offset 1234 among 6 paritions
    <ts>: partition [foo,0]: replica 1's offset 10 doesn't match replica 2's offset 11
    <ts>: partition [foo,0] has unmatched checksum at offset 10; replica 1's checksum 123; replica 2's checksum 456

An offset mismatch exits 1 at once; a checksum mismatch is reported.  The
checksum is the CRC stored in the entry; if two entries store the same CRC
but differ in bytes, the line shows the CRC-32 of their whole bytes instead.

``--once`` (our addition) verifies from the start offset up to the high
watermark the leader had at start-up, then exits 0 if everything matched,
or 1 (mismatch lines printed, or a partition that stopped progressing).
"""
from __future__ import annotations

import re
import struct
import sys
import time
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple

import gevent

from kafka_ha.client.cli import ToolArgumentParser, java_date, run_reporting_errors
from kafka_ha.client.cluster import ClusterMetadata, MetadataSnapshot
from kafka_ha.client.errors import KafkaError
from kafka_ha.client.offsets import LATEST, OffsetClient, by_topic
from kafka_ha.clock import now_ms
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode, error_name
from kafka_ha.records.errors import CorruptRecordError
from kafka_ha.records.shallow import iter_entries

DEBUG_CONSUMER_ID = -2
_CRC = struct.Struct(">I")
Replicas = dict[TopicPartition, tuple[int, ...]]


def build_parser() -> ToolArgumentParser:
    p = ToolArgumentParser(prog="kafka-replica-verification.sh",
                           description="Validate that all replicas for a set of topics have the "
                                       "same data.")
    p.add_argument("--broker-list", help="REQUIRED: The list of hostname and port of the server "
                                         "to connect to.")
    p.add_argument("--fetch-size", type=int, default=1024 * 1024,
                   help="The fetch size of each request (default: 1048576).")
    p.add_argument("--max-wait-ms", type=int, default=1000,
                   help="The max amount of time each fetch request waits (default: 1000).")
    p.add_argument("--topic-white-list", default=".*",
                   help="White list of topics to verify replica consistency (default: .*).")
    p.add_argument("--time", type=int, default=-1,
                   help="Timestamp for getting the initial offsets: -2 earliest, -1 latest.")
    p.add_argument("--report-interval-ms", type=int, default=30000,
                   help="The reporting interval (default: 30000).")
    p.add_argument("--once", action="store_true",
                   help="Verify up to the current high watermarks once, then exit "
                        "(0 if all replicas match, 1 otherwise).")
    return p


def whitelist_regex(raw: str) -> re.Pattern:
    """Kafka's Whitelist: ``,`` means ``|``, spaces and surrounding quotes are dropped.

    >>> bool(whitelist_regex("foo, bar").fullmatch("bar"))
    True
    >>> bool(whitelist_regex("'f.*'").fullmatch("foo"))
    True
    """
    regex = raw.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"""^["']+|["']+$""", "", regex)
    try:
        return re.compile(regex)
    except re.error:
        raise ValueError(f"{raw} is an invalid regex.") from None


class EntryInfo(NamedTuple):
    last_offset: int
    checksum: int
    raw: bytes


def entries_from(data: bytes, offset: int) -> Iterator[EntryInfo]:
    """Shallow entries of ``data`` holding offsets >= ``offset``, with their stored CRC."""
    for entry in iter_entries(data):
        if entry.last_offset < offset:
            continue
        # magic 0/1 keep the CRC right after offset+size; v2 after the magic byte.
        crc_at = entry.position + (17 if entry.magic == 2 else 12)
        yield EntryInfo(entry.last_offset, _CRC.unpack_from(data, crc_at)[0],
                        bytes(data[entry.position:entry.end]))


@dataclass
class ReplicaFetch:
    """One replica's answer for one partition in a round."""

    high_watermark: int
    data: bytes = b""
    error_code: int = 0


Fetched = dict[TopicPartition, dict[int, ReplicaFetch]]   # partition -> replica -> answer


class OffsetMismatch(Exception):
    """Replicas disagree on offsets: Kafka's tool exits 1 at once."""


class ReplicaVerifier:
    """Kafka's ReplicaBuffer.verifyCheckSum: compare one round of fetched data."""

    def __init__(self, expected: Replicas, offsets: dict[TopicPartition, int],
                 report_interval_ms: int, start_ms: int,
                 emit: Callable[[str], None]) -> None:
        self.expected = expected
        self.offsets = dict(offsets)
        self.report_interval_ms = report_interval_ms
        self.last_report_ms = start_ms
        self.emit = emit
        self.max_lag, self.max_lag_tp = -1, None
        self.high_watermarks: dict[TopicPartition, dict[int, int]] = {}
        self.problems = 0      # checksum mismatches and corrupt data seen

    def verify(self, fetched: Fetched, now: int) -> None:
        self.max_lag = -1
        for tp, replicas in sorted(fetched.items()):
            if len(replicas) == len(self.expected[tp]) and \
                    all(r.error_code == ErrorCode.NONE for r in replicas.values()):
                self._verify_partition(tp, replicas, now)
            self.high_watermarks[tp] = {rid: r.high_watermark for rid, r in replicas.items()}
            lag = max(r.high_watermark for r in replicas.values()) - self.offsets[tp]
            if lag > self.max_lag:
                self.max_lag, self.max_lag_tp = lag, tp
        if now - self.last_report_ms > self.report_interval_ms:
            self.report(now)

    def report(self, now: int) -> None:
        tp = self.max_lag_tp
        self.emit(f"{java_date(now)}: max lag is {self.max_lag} for partition {tp} at offset "
                  f"{self.offsets.get(tp)} among {len(self.expected)} paritions")
        self.last_report_ms = now

    def _verify_partition(self, tp: TopicPartition, replicas: dict[int, ReplicaFetch],
                          now: int) -> None:
        offset = self.offsets[tp]
        iterators = {rid: entries_from(r.data, offset) for rid, r in sorted(replicas.items())}
        try:
            while self._next_entry_matches(tp, replicas, iterators, now):
                pass
        except CorruptRecordError as exc:
            self.problems += 1
            self.emit(f"{java_date(now)}: partition {tp} has corrupt data after offset "
                      f"{self.offsets[tp]}: {exc}")

    def _next_entry_matches(self, tp: TopicPartition, replicas: dict[int, ReplicaFetch],
                            iterators: dict[int, Iterator[EntryInfo]], now: int) -> bool:
        """Compare the next entry of every replica; advance the offset if all had one."""
        first: tuple[int, EntryInfo] | None = None
        in_all = True
        for rid, entries in iterators.items():
            entry = next(entries, None)
            if entry is None or entry.last_offset >= replicas[rid].high_watermark:
                in_all = False  # only verify up to each replica's high watermark
                continue
            if first is None:
                first = (rid, entry)
                continue
            self._compare(tp, first, (rid, entry), now)
        if not in_all or first is None:
            return False
        self.offsets[tp] = first[1].last_offset + 1
        return True

    def _compare(self, tp: TopicPartition, a: tuple[int, EntryInfo], b: tuple[int, EntryInfo],
                 now: int) -> None:
        (rid_a, ea), (rid_b, eb) = a, b
        ts = java_date(now)
        if ea.last_offset != eb.last_offset:
            self.emit(f"{ts}: partition {tp}: replica {rid_a}'s offset {ea.last_offset} doesn't "
                      f"match replica {rid_b}'s offset {eb.last_offset}")
            raise OffsetMismatch(tp)
        if ea.raw != eb.raw:
            crc_a, crc_b = ea.checksum, eb.checksum
            if crc_a == crc_b:
                crc_a, crc_b = zlib.crc32(ea.raw), zlib.crc32(eb.raw)
            self.problems += 1
            self.emit(f"{ts}: partition {tp} has unmatched checksum at offset {ea.last_offset}; "
                      f"replica {rid_a}'s checksum {crc_a}; replica {rid_b}'s checksum {crc_b}")


class RoundFetcher:
    """One Fetch per broker per round, all brokers in parallel."""

    def __init__(self, cluster: ClusterMetadata, expected: Replicas, fetch_size: int,
                 max_wait_ms: int, min_bytes: int) -> None:
        self.cluster = cluster
        self.fetch_size, self.max_wait_ms, self.min_bytes = fetch_size, max_wait_ms, min_bytes
        self.by_broker: dict[int, list[TopicPartition]] = {}
        for tp, replicas in sorted(expected.items()):
            for rid in replicas:
                self.by_broker.setdefault(rid, []).append(tp)
        self._warned: set[tuple] = set()

    def fetch(self, offsets: dict[TopicPartition, int]) -> Fetched:
        jobs = {b: gevent.spawn(self._fetch_broker, b, tps, offsets)
                for b, tps in self.by_broker.items()}
        gevent.joinall(list(jobs.values()), raise_error=True)
        fetched: Fetched = {}
        for broker, job in jobs.items():
            for tp, answer in job.value.items():
                fetched.setdefault(tp, {})[broker] = answer
        return fetched

    def _fetch_broker(self, broker: int, tps: list[TopicPartition],
                      offsets: dict[TopicPartition, int]) -> dict[TopicPartition, ReplicaFetch]:
        body = {"replica_id": DEBUG_CONSUMER_ID, "max_wait_ms": self.max_wait_ms,
                "min_bytes": self.min_bytes, "max_bytes": min(self.fetch_size * len(tps), 1 << 30),
                "isolation_level": 0,
                "topics": [{"topic": t, "partitions": [
                    {"partition": p, "fetch_offset": offsets[TopicPartition(t, p)],
                     "partition_max_bytes": self.fetch_size} for p in ps]}
                    for t, ps in by_topic(tps).items()]}
        timeout_s = self.cluster.timeout_s + self.max_wait_ms / 1000
        try:
            # v4: the stored entries as they are (older versions get them down-converted,
            # which would compare checksums of conversions rather than of the replicas' bytes).
            response = self.cluster.request(broker, ApiKey.FETCH, 4, body, timeout_s=timeout_s)
        except KafkaError as exc:
            self._warn((broker,), f"fetch from broker {broker} failed: {exc}")
            gevent.sleep(min(1.0, self.max_wait_ms / 1000))
            return {tp: ReplicaFetch(-1, b"", ErrorCode.NETWORK_EXCEPTION) for tp in tps}
        result = {}
        for topic in response["responses"]:
            for part in topic["partitions"]:
                tp = TopicPartition(topic["topic"], part["partition_index"])
                code = part["error_code"]
                if code != ErrorCode.NONE:
                    self._warn((broker, tp, code), f"replica {broker} of partition {tp}: "
                                                   f"{error_name(code)} ({code})")
                result[tp] = ReplicaFetch(part["high_watermark"], bytes(part["records"] or b""), code)
        return result

    def _warn(self, key: tuple, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            print(f"WARN {message}", file=sys.stderr, flush=True)


def select_partitions(snap: MetadataSnapshot, regex: re.Pattern) -> Replicas:
    """Matching non-internal partitions and their live replicas (dead ones cannot be fetched)."""
    expected = {}
    for topic in sorted(snap.topics.values(), key=lambda t: t.name):
        if topic.is_internal or not regex.fullmatch(topic.name):
            continue
        for p, pm in sorted(topic.partitions.items()):
            live = tuple(r for r in pm.replicas if r in snap.brokers)
            if len(live) < len(pm.replicas):
                print(f"WARN partition {TopicPartition(topic.name, p)}: replicas "
                      f"{sorted(set(pm.replicas) - set(live))} are not live; not verified",
                      file=sys.stderr)
            if live:
                expected[TopicPartition(topic.name, p)] = live
    return expected


def run_rounds(verifier: ReplicaVerifier, fetcher: RoundFetcher,
               targets: dict[TopicPartition, int] | None, stall_s: float) -> int:
    """Verify round after round; with ``targets`` (--once) stop when all are reached."""
    last_progress = time.monotonic()
    while True:
        before = dict(verifier.offsets)
        verifier.verify(fetcher.fetch(verifier.offsets), now_ms())
        if targets is not None and all(verifier.offsets[tp] >= t for tp, t in targets.items()):
            verifier.report(now_ms())
            return 1 if verifier.problems else 0
        if verifier.offsets != before:
            last_progress = time.monotonic()
        elif targets is not None:
            if time.monotonic() - last_progress > stall_s:
                return report_stalled(verifier, targets)
            gevent.sleep(0.1)


def report_stalled(verifier: ReplicaVerifier, targets: dict[TopicPartition, int]) -> int:
    ts = java_date(now_ms())
    for tp, target in sorted(targets.items()):
        if verifier.offsets[tp] < target:
            hws = ", ".join(f"{rid}:{hw}" for rid, hw in
                            sorted(verifier.high_watermarks.get(tp, {}).items()))
            verifier.emit(f"{ts}: partition {tp} could not be verified beyond offset "
                          f"{verifier.offsets[tp]} (target {target}); replica high watermarks "
                          f"{hws}")
    return 1


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.broker_list:
        parser.die('Missing required argument "[broker-list]"')
    if args.time not in (-1, -2):
        parser.die(f"--time must be -1 (latest) or -2 (earliest), not {args.time}")
    try:
        regex = whitelist_regex(args.topic_white_list)
        cluster = ClusterMetadata(args.broker_list, client_id="ReplicaVerification")
    except ValueError as exc:
        parser.die(str(exc))

    def emit(line: str) -> None:
        print(line, file=out, flush=True)

    def verify() -> int:
        expected = select_partitions(cluster.refresh(), regex)
        if not expected:
            print(f"No topics found. {args.topic_white_list}, if specified, is either filtering "
                  f"out all topics or there is no topic.", file=sys.stderr)
            return 1
        offsets_client = OffsetClient(cluster)
        start = offsets_client.list_offsets(expected, args.time)
        targets = offsets_client.list_offsets(expected, LATEST) if args.once else None
        verifier = ReplicaVerifier(expected, start, args.report_interval_ms, now_ms(), emit)
        fetcher = RoundFetcher(cluster, expected, args.fetch_size, args.max_wait_ms,
                               min_bytes=0 if args.once else 1)
        emit(f"{java_date(now_ms())}: verification process is started.")
        try:
            return run_rounds(verifier, fetcher, targets, max(10 * args.max_wait_ms, 5000) / 1000)
        except OffsetMismatch:
            return 1   # already reported by the verifier

    return run_reporting_errors(verify, cluster)


if __name__ == "__main__":
    sys.exit(main())
