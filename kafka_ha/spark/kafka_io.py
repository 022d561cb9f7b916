"""The Spark source's cluster side: brokers, partitions, offsets, and reading one range.

Everything here uses :mod:`kafka_ha.client` objects created and used on the
calling thread (our client is gevent-based; it needs no monkey-patching).
Driver-side planning uses :class:`OffsetLookup`; executor tasks call
:func:`read_range`, which yields ``pyarrow.RecordBatch`` objects in Spark's
Kafka schema.
"""
from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Iterator, Mapping

import pyarrow as pa

from kafka_ha.client import ClusterMetadata, Consumer, KafkaError, NoBrokersAvailable
from kafka_ha.client.errors import OffsetOutOfRangeError
from kafka_ha.client.offsets import EARLIEST, LATEST, OffsetClient
from kafka_ha.model import TopicPartition

from .arrow import records_to_batch
from .option_names import client_option
from .options import Subscription, option, parse_int

log = logging.getLogger(__name__)

TP = tuple[str, int]


class SourceError(RuntimeError):
    """A failure of the kafka_ha source or sink with a message meant for the user."""


# Spark's Kafka source ends a data-loss message with one of these two texts (failOnDataLoss
# true: the error; false: the warning); users search for them, so they are kept word for word.
DATA_LOSS_FAILS = (
    'Some data may have been lost because they are not available in Kafka any more; either the '
    'data was aged out by Kafka or the topic may have been deleted before all the data in the '
    'topic was processed. If you don\'t want your streaming query to fail on such cases, set '
    'the source option "failOnDataLoss" to "false".')
DATA_LOSS_WARNS = (
    'Some data may have been lost because they are not available in Kafka any more; either the '
    'data was aged out by Kafka or the topic may have been deleted before all the data in the '
    'topic was processed. If you want your streaming query to fail on such cases, set the '
    'source option "failOnDataLoss" to "true".')


class DataLossError(SourceError):
    """Offsets that should be read are gone (retention, truncation, a deleted topic).

    The message is what happened, then Spark's instruction (:data:`DATA_LOSS_FAILS`).
    """

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}. {DATA_LOSS_FAILS}")


def warn_data_loss(what: str) -> None:
    log.warning("%s. %s", what, DATA_LOSS_WARNS)


@dataclass(frozen=True)
class ClientSettings:
    """Client knobs taken from the options; picklable, so it travels with the reader."""

    bootstrap_servers: str
    request_timeout_ms: int = 30000
    max_partition_fetch_bytes: int = 4 * 1048576
    poll_timeout_ms: int = 120000        # Spark's kafkaConsumer.pollTimeoutMs
    batch_rows: int = 10000              # rows per Arrow batch handed to Spark
    metadata_retries: int = 3            # Spark's fetchOffset.numRetries
    retry_interval_ms: int = 10          # Spark's fetchOffset.retryIntervalMs
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    client_id: str = "kafka-ha-spark"    # "-driver" / "-executor" are appended

    @classmethod
    def from_options(cls, options: Mapping[str, str], role: str = "source") -> ClientSettings:
        """``role`` is "source" (streaming) or "relation" (batch), as in Spark's group ids."""
        def client_int(key, default, minimum):
            return parse_int(key, client_option(options, key), default, minimum)

        return cls(resolve_bootstrap(options),
                   client_int("request.timeout.ms", 30000, 1),
                   client_int("max.partition.fetch.bytes", 4 * 1048576, 1024),
                   parse_int("kafkaConsumer.pollTimeoutMs",
                             option(options, "kafkaConsumer.pollTimeoutMs"), 120000, 1),
                   parse_int("arrowBatchRows", option(options, "arrowBatchRows"), 10000, 1),
                   parse_int("fetchOffset.numRetries", option(options, "fetchOffset.numRetries"),
                             3, 0),
                   parse_int("fetchOffset.retryIntervalMs",
                             option(options, "fetchOffset.retryIntervalMs"), 10, 0),
                   client_int("fetch.max.wait.ms", 500, 0),
                   client_int("fetch.min.bytes", 1, 1),
                   client_id_for(options, role))


def client_id_for(options: Mapping[str, str], role: str) -> str:
    """The client id of this read: ``client.id``, else ``group.id``, else Spark's generated
    group id ``<groupIdPrefix>-<uuid>`` (prefix ``spark-kafka-source`` for streams,
    ``spark-kafka-relation`` for batch reads).  There is no consumer group (positions live in
    Spark's checkpoint), so the name only identifies the query's connections to the brokers.

    >>> client_id_for({"groupIdPrefix": "etl"}, "source")[:4], client_id_for({}, "relation")[:21]
    ('etl-', 'spark-kafka-relation-')
    >>> client_id_for({"kafka.group.id": "g", "groupIdPrefix": "etl"}, "source")
    'g'
    """
    fixed = client_option(options, "client.id") or client_option(options, "group.id")
    if fixed:
        return fixed
    prefix = option(options, "groupIdPrefix") or f"spark-kafka-{role}"
    if not prefix.strip():
        raise ValueError("option 'groupIdPrefix' must not be empty")
    return f"{prefix}-{uuid.uuid4()}"


def resolve_bootstrap(options: Mapping[str, str]) -> str:
    """``bootstrap.servers`` (or Spark's ``kafka.bootstrap.servers``), else the brokers
    registered under ``zookeeper.connect``."""
    servers = client_option(options, "bootstrap.servers")
    if servers:
        return servers
    connect = option(options, "zookeeper.connect")
    if not connect:
        raise ValueError("option 'bootstrap.servers' (host:port,...) or 'zookeeper.connect' "
                         "is required")
    return brokers_from_zookeeper(connect)


def brokers_from_zookeeper(connect: str, timeout_s: float = 15.0) -> str:
    """``host:port,...`` of the brokers registered in ``/brokers/ids`` under ``connect``."""
    from kafka_ha.zk.admin_store import AdminStore

    timeout_ms = int(timeout_s * 1000)
    try:
        store = AdminStore.connect(connect, timeout_ms, timeout_ms, create_chroot=False)
    except Exception as exc:
        raise SourceError(f"cannot reach ZooKeeper at zookeeper.connect={connect}: {exc}") from exc
    with store:
        found = [f"{info.host}:{info.port}" for info in store.registered_brokers()]
    if not found:
        raise SourceError(f"no broker is registered under zookeeper.connect={connect}")
    return ",".join(found)


def _unreachable(settings: ClientSettings, exc: Exception) -> SourceError:
    return SourceError(f"cannot reach the kafka-ha cluster at bootstrap.servers="
                       f"{settings.bootstrap_servers}: {exc}")


class OffsetLookup:
    """Driver-side metadata and ListOffsets (one per planning call or stream reader)."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self.cluster = ClusterMetadata(settings.bootstrap_servers, settings.client_id + "-driver",
                                       settings.request_timeout_ms)
        self.offsets = OffsetClient(self.cluster, settings.request_timeout_ms / 1000.0)

    def close(self) -> None:
        self.cluster.close()

    def topic_partitions(self, sub: Subscription, *, require_topics: bool = True,
                         wait_s: float = 2.0) -> list[TP]:
        """The subscription's partitions, from an all-topics Metadata request.

        Asking for all topics (not by name) never auto-creates a missing one.  A
        named topic that does not exist is retried for ``wait_s`` (metadata may
        lag a fresh ``--create``), then reported unless ``require_topics`` is false.
        """
        deadline = time.monotonic() + wait_s
        while True:
            snap = self._refresh_all()
            if sub.kind == "subscribePattern":
                return sorted((t, p) for t, meta in snap.topics.items()
                              if not meta.is_internal and sub.matches(t)
                              for p in (snap.partitions_for(t) or ()))
            named = (sub.topics if sub.kind == "subscribe"
                     else sorted({t for t, _ in sub.partitions}))
            missing = [t for t in named if snap.partitions_for(t) is None]
            if sub.kind == "assign" and not missing:
                absent = [tp for tp in sub.partitions if tp[1] not in snap.partitions_for(tp[0])]
                if absent:
                    raise SourceError(f"assign names partitions that do not exist: "
                                      f"{', '.join(f'[{t},{p}]' for t, p in absent)}")
                return list(sub.partitions)
            if not missing or not require_topics and time.monotonic() >= deadline:
                present = [t for t in named if t not in missing]
                if sub.kind == "assign":
                    return [tp for tp in sub.partitions if tp[0] in present]
                return sorted((t, p) for t in present for p in snap.partitions_for(t))
            if time.monotonic() >= deadline:
                raise SourceError(f"topic(s) {', '.join(repr(t) for t in missing)} do not exist "
                                  f"in the cluster at {self.settings.bootstrap_servers} "
                                  f"({sub.describe()})")
            time.sleep(0.1)

    def _refresh_all(self):
        """All-topics metadata; a failed round is retried (connections to restarted brokers
        fail once before they reconnect)."""
        for attempt in range(self.settings.metadata_retries + 1):
            try:
                return self.cluster.refresh(None)
            except NoBrokersAvailable as exc:
                if attempt == self.settings.metadata_retries:
                    raise _unreachable(self.settings, exc) from exc
                time.sleep(self.settings.retry_interval_ms / 1000.0)

    def has_leader(self, tp: TP) -> bool:
        """Whether the last metadata answer named a leader for ``tp``."""
        return self.cluster.snapshot.leader_for(TopicPartition(*tp)) is not None

    def earliest(self, tps) -> dict[TP, int]:
        return self._list(tps, EARLIEST)

    def latest(self, tps) -> dict[TP, int]:
        """High watermarks: the end of the committed data, as consumers see it."""
        return self._list(tps, LATEST)

    def by_timestamp(self, stamps: dict[TP, int]) -> dict[TP, int | None]:
        """The first offset whose record's timestamp is >= the partition's timestamp, or
        None where no committed record is that late (one ListOffsets round per timestamp)."""
        out: dict[TP, int | None] = {}
        for stamp in sorted(set(stamps.values())):
            found = self._list([tp for tp, s in stamps.items() if s == stamp], stamp)
            out.update({tp: (None if offset < 0 else offset) for tp, offset in found.items()})
        return out

    def _list(self, tps, timestamp: int) -> dict[TP, int]:
        tps = [TopicPartition(*tp) for tp in tps]
        if not tps:
            return {}
        try:
            found = self.offsets.list_offsets(tps, timestamp)
        except NoBrokersAvailable as exc:
            raise _unreachable(self.settings, exc) from exc
        except KafkaError as exc:
            which = ("earliest" if timestamp == EARLIEST else "latest" if timestamp == LATEST
                     else f"timestamp {timestamp}")
            raise SourceError(f"cannot list the {which} offsets of "
                              f"{', '.join(f'[{t},{p}]' for t, p in tps)}: {exc}") from exc
        return {(tp.topic, tp.partition): o for tp, o in found.items()}


def read_range(settings: ClientSettings, topic: str, partition: int, start: int, end: int,
               fail_on_data_loss: bool = True,
               include_headers: bool = False) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``[start, end)`` of one partition, from whoever leads it.

    The consumer follows leader changes itself (NOT_LEADER refreshes the
    metadata).  Offsets below the log start raise :class:`DataLossError`, or
    with ``fail_on_data_loss=False`` are skipped.  No progress for
    ``poll_timeout_ms`` raises :class:`SourceError`.
    """
    tp = (topic, partition)
    consumer = Consumer(settings.bootstrap_servers, auto_offset_reset="none",
                        fetch_max_wait_ms=settings.fetch_max_wait_ms,
                        fetch_min_bytes=settings.fetch_min_bytes,
                        request_timeout_ms=settings.request_timeout_ms,
                        max_partition_fetch_bytes=settings.max_partition_fetch_bytes,
                        client_id=settings.client_id + "-executor")
    try:
        consumer.assign([tp])
        position = start
        consumer.seek(tp, position)
        pending: list = []
        last_progress = time.monotonic()
        while position < end:
            try:
                records = consumer.poll(timeout_ms=1000)
            except OffsetOutOfRangeError:
                position = _after_out_of_range(consumer, tp, position, end, fail_on_data_loss)
                if position < end:
                    consumer.seek(tp, position)
                continue
            except NoBrokersAvailable as exc:
                raise _unreachable(settings, exc) from exc
            except KafkaError as exc:
                raise SourceError(
                    f"reading [{topic},{partition}] at offset {position}: {exc}") from exc
            if not records:
                if time.monotonic() - last_progress > settings.poll_timeout_ms / 1000.0:
                    raise SourceError(
                        f"no records of [{topic},{partition}] at offset {position} (reading up to "
                        f"{end}) within {settings.poll_timeout_ms} ms; last high watermark seen: "
                        f"{consumer.highwater(tp)}")
                continue
            last_progress = time.monotonic()
            for record in records:
                if record.offset >= end:
                    break
                pending.append(record)
            position = min(records[-1].offset + 1, end)
            if len(pending) >= settings.batch_rows:
                yield records_to_batch(topic, partition, pending, include_headers)
                pending = []
        if pending:
            yield records_to_batch(topic, partition, pending, include_headers)
    finally:
        consumer.close()


def _after_out_of_range(consumer: Consumer, tp: TP, position: int, end: int,
                        fail_on_data_loss: bool) -> int:
    """Where to continue after OFFSET_OUT_OF_RANGE at ``position`` (or raise)."""
    log_start = consumer.beginning_offsets([tp])[TopicPartition(*tp)]
    if position < log_start:
        lost = f"offsets {position}..{min(log_start, end) - 1} of [{tp[0]},{tp[1]}]"
        if fail_on_data_loss:
            raise DataLossError(f"{lost} are no longer in the log (its start offset is now "
                                f"{log_start}; deleted by retention?)")
        warn_data_loss(f"{lost} were skipped: the log now starts at {log_start}")
        return min(log_start, end)
    high = consumer.end_offsets([tp])[TopicPartition(*tp)]
    if fail_on_data_loss:
        raise DataLossError(f"offset {position} of [{tp[0]},{tp[1]}] is beyond the end of the "
                            f"log ({high}): the partition was truncated or its topic re-created")
    warn_data_loss(f"offsets {position}..{end - 1} of [{tp[0]},{tp[1]}] were skipped: the log "
                   f"ends at {high}")
    return end
