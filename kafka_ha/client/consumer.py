"""The consumer: manually assigned partitions, fetched with Fetch v4 from their leaders.

``poll()`` keeps at most one Fetch in flight per leader broker (a greenlet
each), returns as soon as any of them brings records, and leaves the others
running for the next ``poll()``.  A response counts only if the partition's
position still equals the offset it was fetched from (a ``seek()`` in
between makes it stale).  Records below the position are skipped: a v2
batch or compressed wrapper may start before the offset asked for.

Positions start from the committed offset (with a ``group_id``), else from
``auto_offset_reset``; OFFSET_OUT_OF_RANGE re-applies the reset policy via
ListOffsets v1, and leader errors refresh the metadata.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Iterable, NamedTuple

import gevent

from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records.errors import CorruptRecordError
from kafka_ha.records.reader import decode_records

from .cluster import ClusterMetadata
from .errors import KafkaError, OffsetOutOfRangeError, error_for
from .offsets import EARLIEST, LATEST, OffsetClient, by_topic

log = logging.getLogger(__name__)

FETCH_VERSION = 4   # v4 readers get the stored v2 batches as they are (headers included)
RESET_POLICIES = {"earliest": EARLIEST, "latest": LATEST, "none": None}


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()
    timestamp_type: int = 0        # 0 CreateTime, 1 LogAppendTime, -1 none (magic 0)


class Consumer:
    """A consumer of manually assigned partitions (Kafka's ``assign()`` mode; no group joins).

    ``group_id`` is only used for ``commit()``/``committed()`` and for the
    starting positions; ``auto_offset_reset`` is "earliest", "latest" or
    "none" (raise :class:`OffsetOutOfRangeError`).  Fetch settings mirror
    Kafka's ``fetch.max.wait.ms``, ``fetch.min.bytes``, ``fetch.max.bytes``
    and ``max.partition.fetch.bytes``.
    """

    def __init__(self, bootstrap_servers: str, group_id: str | None = None,
                 fetch_max_wait_ms: int = 500, fetch_min_bytes: int = 1,
                 max_partition_fetch_bytes: int = 1048576, fetch_max_bytes: int = 52428800,
                 auto_offset_reset: str = "latest", request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, client_id: str = "kafka-ha-consumer",
                 check_crcs: bool = True) -> None:
        if auto_offset_reset not in RESET_POLICIES:
            raise ValueError(f"auto_offset_reset must be one of {sorted(RESET_POLICIES)}, "
                             f"not {auto_offset_reset!r}")
        self.group_id = group_id
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.auto_offset_reset = auto_offset_reset
        self.check_crcs = check_crcs
        self.timeout_s = request_timeout_ms / 1000.0
        self.retry_backoff_s = retry_backoff_ms / 1000.0
        self.cluster = ClusterMetadata(bootstrap_servers, client_id, request_timeout_ms,
                                       retry_backoff_ms)
        self.offsets = OffsetClient(self.cluster, self.timeout_s, self.retry_backoff_s)
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._resets: dict[TopicPartition, int] = {}     # tp -> EARLIEST/LATEST, pending
        self._highwater: dict[TopicPartition, int] = {}
        self._fetches: dict[int, gevent.Greenlet] = {}   # leader id -> in-flight Fetch
        self._metadata_stale = False

    # -- assignment and positions -------------------------------------------------------

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Consume exactly these partitions (replaces any earlier assignment)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        self._assignment = sorted(set(tps))
        keep = set(self._assignment)
        for table in (self._positions, self._resets, self._highwater):
            for tp in [tp for tp in table if tp not in keep]:
                del table[tp]
        # Metadata is fetched lazily by the next poll()/position(), as Kafka's assign() does.
        self._metadata_stale = bool(self._assignment)

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic`` (waiting up to the request timeout for metadata)."""
        snap = self.cluster.wait_for_topics([topic], self.timeout_s)
        return list(snap.partitions_for(topic) or ())

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        tp = self._assigned(tp)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        self._positions[tp] = offset
        self._resets.pop(tp, None)

    def seek_to_beginning(self, *tps: tuple[str, int]) -> None:
        self._seek_to(tps, EARLIEST)

    def seek_to_end(self, *tps: tuple[str, int]) -> None:
        self._seek_to(tps, LATEST)

    def position(self, tp: tuple[str, int]) -> int:
        """The offset of the next record to return (resolved now if not known yet)."""
        tp = self._assigned(tp)
        if tp not in self._positions:
            self._update_positions()
        return self._positions[tp]

    def highwater(self, tp: tuple[str, int]) -> int | None:
        """The high watermark seen in the last fetch of ``tp`` (None before any)."""
        return self._highwater.get(TopicPartition(*tp))

    def beginning_offsets(self, tps: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        return self.offsets.list_offsets([TopicPartition(*tp) for tp in tps], EARLIEST)

    def end_offsets(self, tps: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        return self.offsets.list_offsets([TopicPartition(*tp) for tp in tps], LATEST)

    # -- group offsets ------------------------------------------------------------------

    def commit(self, offsets: dict[tuple[str, int], int] | None = None) -> None:
        """Commit ``offsets`` (default: the current position of every assigned partition)."""
        group = self._require_group()
        if offsets is None:
            offsets = {tp: pos for tp, pos in self._positions.items()}
        if offsets:
            self.offsets.commit(group, {TopicPartition(*tp): o for tp, o in offsets.items()})

    def committed(self, tp: tuple[str, int]) -> int | None:
        tp = TopicPartition(*tp)
        return self.offsets.fetch_committed(self._require_group(), [tp])[tp]

    # -- polling ----------------------------------------------------------------------

    def poll(self, timeout_ms: float = 0) -> list[ConsumerRecord]:
        """Records fetched since the last poll, waiting up to ``timeout_ms`` for some."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            records = self._collect_finished()
            if records:
                # As Kafka's consumer does: send the next round of fetches before
                # handing these records over, so the brokers answer while the
                # application works (a long poll is then already waiting at the
                # leader when the next record is committed).
                self._start_fetches()
                return records
            self._update_positions()
            self._start_fetches()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            if self._fetches:
                gevent.wait(list(self._fetches.values()), timeout=remaining, count=1)
            else:  # nothing fetchable (no leader yet): back off, then refresh
                gevent.sleep(min(self.retry_backoff_s, remaining))

    def close(self) -> None:
        for fetch in self._fetches.values():
            fetch.kill(block=False)
        self._fetches.clear()
        self.cluster.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals: positions -----------------------------------------------------------

    def _assigned(self, tp: tuple[str, int]) -> TopicPartition:
        tp = TopicPartition(*tp)
        if tp not in self._assignment:
            raise KafkaError(None, f"partition {tp} is not assigned to this consumer")
        return tp

    def _require_group(self) -> str:
        if not self.group_id:
            raise KafkaError(None, "committing or fetching offsets needs a group_id")
        return self.group_id

    def _seek_to(self, tps: tuple[tuple[str, int], ...], timestamp: int) -> None:
        for tp in (map(self._assigned, tps) if tps else self._assignment):
            self._resets[tp] = timestamp
            self._positions.pop(tp, None)

    def _update_positions(self) -> None:
        """Give every assigned partition a position: committed offset, else the reset policy."""
        unknown = [tp for tp in self._assignment if tp not in self._positions]
        if not unknown:
            return
        if self.group_id:
            fresh = [tp for tp in unknown if tp not in self._resets]
            for tp, offset in (self.offsets.fetch_committed(self.group_id, fresh).items()
                               if fresh else ()):
                if offset is not None:
                    self._positions[tp] = offset
        for tp in unknown:
            if tp not in self._positions and tp not in self._resets:
                self._resets[tp] = self._reset_timestamp(tp)
        by_time: dict[int, list[TopicPartition]] = {}
        for tp, timestamp in self._resets.items():
            by_time.setdefault(timestamp, []).append(tp)
        for timestamp, tps in by_time.items():
            self._positions.update(self.offsets.list_offsets(tps, timestamp))
            for tp in tps:
                del self._resets[tp]

    def _reset_timestamp(self, tp: TopicPartition, reason: str = "has no position") -> int:
        timestamp = RESET_POLICIES[self.auto_offset_reset]
        if timestamp is None:
            raise OffsetOutOfRangeError(f"{tp} {reason} and auto_offset_reset is 'none'")
        return timestamp

    # -- internals: fetching ------------------------------------------------------------

    def _start_fetches(self) -> None:
        if self._metadata_stale:
            self._refresh_metadata()
        snap = self.cluster.snapshot
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in self._assignment:
            leader = snap.leader_for(tp)
            if leader is None:
                self._metadata_stale = True
            elif (leader not in self._fetches and tp in self._positions
                  and self.cluster.reconnect_delay(leader) == 0):
                by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            offsets = {tp: self._positions[tp] for tp in tps}
            self._fetches[leader] = gevent.spawn(self._fetch, leader, offsets)

    def _fetch(self, leader: int, offsets: dict[TopicPartition, int]) -> tuple:
        body = {"replica_id": -1, "max_wait_ms": self.fetch_max_wait_ms,
                "min_bytes": self.fetch_min_bytes, "max_bytes": self.fetch_max_bytes,
                "isolation_level": 0,
                "topics": [{"topic": t, "partitions": [
                    {"partition": p, "fetch_offset": offsets[TopicPartition(t, p)],
                     "partition_max_bytes": self.max_partition_fetch_bytes} for p in ps]}
                    for t, ps in by_topic(offsets).items()]}
        try:
            response = self.cluster.request(leader, ApiKey.FETCH, FETCH_VERSION, body,
                                            timeout_s=self.timeout_s + self.fetch_max_wait_ms / 1000)
        except KafkaError as exc:
            return leader, offsets, exc
        return leader, offsets, response

    def _collect_finished(self) -> list[ConsumerRecord]:
        records: list[ConsumerRecord] = []
        for leader, fetch in list(self._fetches.items()):
            if not fetch.ready():
                continue
            del self._fetches[leader]
            _, offsets, result = fetch.get()
            if isinstance(result, KafkaError):
                log.info("fetch from broker %d failed: %s", leader, result)
                self._metadata_stale = True
                continue
            for topic in result["responses"]:
                for part in topic["partitions"]:
                    tp = TopicPartition(topic["topic"], part["partition_index"])
                    if tp in offsets and self._positions.get(tp) == offsets[tp]:
                        records.extend(self._partition_records(tp, leader, part))
        return records

    def _partition_records(self, tp: TopicPartition, leader: int,
                           part: dict[str, Any]) -> list[ConsumerRecord]:
        code = part["error_code"]
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            position = self._positions.pop(tp)
            self._resets[tp] = self._reset_timestamp(tp, f"offset {position} is out of range")
            log.info("%s: offset %d out of range on broker %d; resetting to %s",
                     tp, position, leader, self.auto_offset_reset)
            return []
        if code != ErrorCode.NONE:
            err = error_for(code, f"fetching {tp} from broker {leader}")
            if not err.retriable:
                raise err
            self._metadata_stale = True
            return []
        self._highwater[tp] = part["high_watermark"]
        data = part["records"]
        if not data:
            return []
        try:
            decoded = list(decode_records(data, self._positions[tp], self.check_crcs))
        except CorruptRecordError as exc:
            raise error_for(ErrorCode.CORRUPT_MESSAGE, f"{tp} from broker {leader}: {exc}") from exc
        if decoded:
            self._positions[tp] = decoded[-1].offset + 1
        return [ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp_ms, r.key, r.value,
                               r.headers, r.timestamp_type) for r in decoded]

    def _refresh_metadata(self) -> None:
        try:
            self.cluster.refresh({tp.topic for tp in self._assignment})
            self._metadata_stale = False
        except KafkaError as exc:
            log.warning("metadata refresh failed (will retry): %s", exc)
