"""Prometheus metrics under the names Prometheus's jmx_exporter gives Kafka's MBeans.

One module holds every event counter, so the code where an event happens pays one
dict update (``count``, ``appended``, ``request_done``...) and needs no other import.
The gauges that describe partitions (under-replicated, offline, log size...) are not
kept up to date on the append path at all: :class:`BrokerCollector` computes them
from the broker's live objects when Prometheus scrapes, yielding to the gevent loop
every ``SCRAPE_SLICE`` partitions so that a scrape over thousands of partitions
never holds requests or ZooKeeper heartbeats for long.

Names: jmx_exporter's example Kafka rules (its ``kafka-2_0_0.yml``) lower-case
``kafka.<domain><type=T, name=N, k=v><>Value`` into the gauge ``kafka_<domain>_<t>_<n>``
with ``k`` as a label, a ``...PerSec`` meter's ``Count`` into the counter
``kafka_<domain>_<t>_<n without PerSec>_total``, and a timer's ``Count`` into
``kafka_<domain>_<t>_<n>_count``.  docs/operations.md lists every name exported.
The counters are process-wide (one broker per process); tests read differences.
"""
from __future__ import annotations

import bisect
import time
from collections import defaultdict
from typing import Any, Callable, Iterator

from kafka_ha.protocol.deferred import DeferredResponse

# Event counters: metric name -> value.  Only the names in _COUNTER_HELP are used.
_counts: dict[str, float] = defaultdict(float)
_bytes_in: dict[str, int] = defaultdict(int)     # topic -> bytes appended as leader
_messages_in: dict[str, int] = defaultdict(int)  # topic -> records appended as leader
_bytes_out: dict[str, int] = defaultdict(int)    # topic -> bytes read by consumers
_requests: dict[tuple[str, int], int] = defaultdict(int)   # (request, version) -> count
# request -> [count per bucket..., count above the last bucket, sum_ms, count]
_request_times: dict[str, list[float]] = {}
_zk_request_times: list[float] = []   # as one of _request_times' lists
# collector generation -> [count, seconds]; all three from the start (a quiet broker may
# run no collection for minutes: its series then reads 0, rather than being absent)
_collections: dict[int, list[float]] = {generation: [0, 0.0] for generation in range(3)}

ISR_SHRINKS = "kafka_server_replicamanager_isrshrinks"
ISR_EXPANDS = "kafka_server_replicamanager_isrexpands"
UNCLEAN_ELECTIONS = "kafka_controller_controllerstats_uncleanleaderelections"
ZK_EXPIRES = "kafka_server_sessionexpirelistener_zookeeperexpires"
ZK_DISCONNECTS = "kafka_server_sessionexpirelistener_zookeeperdisconnects"
ZK_SYNC_CONNECTS = "kafka_server_sessionexpirelistener_zookeepersyncconnects"
ZK_LATENCY = "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms"
LEADER_ELECTION = "kafka_controller_controllerstats_leaderelectionrateandtimems"
REQUESTS = "kafka_network_requestmetrics_requests"
TOTAL_TIME = "kafka_network_requestmetrics_totaltimems"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin"
GC_TIME = "python_gc_collection_seconds"

_COUNTER_HELP = {
    ISR_SHRINKS: "ISR shrinks written by this broker as leader (Kafka's IsrShrinksPerSec)",
    ISR_EXPANDS: "ISR expansions written by this broker as leader (IsrExpandsPerSec)",
    UNCLEAN_ELECTIONS: "unclean leader elections by this controller (UncleanLeaderElectionsPerSec)",
    ZK_EXPIRES: "ZooKeeper sessions of this broker that expired (ZooKeeperExpiresPerSec)",
    ZK_DISCONNECTS: "disconnections from ZooKeeper (ZooKeeperDisconnectsPerSec)",
    ZK_SYNC_CONNECTS: "(re)connections to ZooKeeper (ZooKeeperSyncConnectsPerSec)",
}
# Request time buckets, in ms (Prometheus histogram upper bounds).
TIME_BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
SCRAPE_SLICE = 1000   # partitions handled between two yields to the loop


def count(name: str, amount: float = 1) -> None:
    _counts[name] += amount


def isr_changed(old: tuple[int, ...], new: tuple[int, ...]) -> None:
    """A leader adopted a new ISR it wrote: one shrink or one expansion, as Kafka counts."""
    if len(new) < len(old):
        _counts[ISR_SHRINKS] += 1
    elif len(new) > len(old):
        _counts[ISR_EXPANDS] += 1


def appended(topic: str, size: int, records: int) -> None:
    """A leader appended ``records`` records in ``size`` bytes of a Produce."""
    _bytes_in[topic] += size
    _messages_in[topic] += records


def bytes_out(topic: str, size: int) -> None:
    _bytes_out[topic] += size


def leader_election_done(elapsed_ms: float) -> None:
    """A controller event that elects leaders (a broker change) took ``elapsed_ms``."""
    _counts[LEADER_ELECTION + "_count"] += 1
    _counts[LEADER_ELECTION + "_sum"] += elapsed_ms


def timed_election(handle: Callable[[Any], None]) -> Callable[[Any], None]:
    """Wrap the controller's broker-change handler, which elects leaders, to time it."""
    def handle_timed(event):
        started = time.monotonic()
        try:
            handle(event)
        finally:
            leader_election_done((time.monotonic() - started) * 1000)
    return handle_timed


def request_done(request: str, version: int, elapsed_ms: float) -> None:
    _requests[(request, version)] += 1
    times = _request_times.get(request)
    if times is None:
        times = _request_times[request] = [0.0] * (len(TIME_BUCKETS_MS) + 3)
    _observe(times, elapsed_ms)


def zk_request_done(elapsed_ms: float) -> None:
    if not _zk_request_times:
        _zk_request_times.extend([0.0] * (len(TIME_BUCKETS_MS) + 3))
    _observe(_zk_request_times, elapsed_ms)


def collection_done(generation: int, seconds: float) -> None:
    """The cycle collector ran (broker/gc_log.py); the broker's loop stood still meanwhile."""
    counted = _collections[generation]
    counted[0] += 1
    counted[1] += seconds


def _observe(times: list[float], elapsed_ms: float) -> None:
    times[bisect.bisect_left(TIME_BUCKETS_MS, elapsed_ms)] += 1
    times[-2] += elapsed_ms
    times[-1] += 1


_ZK_STATE_COUNTERS = {"LOST": ZK_EXPIRES, "SUSPENDED": ZK_DISCONNECTS, "CONNECTED": ZK_SYNC_CONNECTS}


def zk_state_changed(state: str) -> None:
    """A kazoo connection-state listener: LOST is an expired session, SUSPENDED a lost
    connection, CONNECTED a (re)connection."""
    name = _ZK_STATE_COUNTERS.get(str(state))
    if name is not None:
        _counts[name] += 1


def request_name(api_key_name: str) -> str:
    """Kafka's request label from our ApiKey member name: ``LEADER_AND_ISR`` -> ``LeaderAndIsr``.

    >>> request_name("PRODUCE"), request_name("OFFSETS_FOR_LEADER_EPOCH")
    ('Produce', 'OffsetsForLeaderEpoch')
    """
    return "".join(word.capitalize() for word in api_key_name.split("_"))


def timed(handle: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Wrap the broker's request handler (``handle(header, reader)``, which returns
    ``(body, version)`` or None) to count each request and its time to the answer (not
    its time on the socket).  A deferred answer (an acks=all Produce waiting for its
    replicas, protocol/deferred.py) is timed until it is finished, as Kafka's
    TotalTimeMs includes the wait in its purgatory."""
    names: dict[Any, str] = {}

    def done(header, name: str, started: float, fetch_from: str | None) -> None:
        elapsed_ms = (time.monotonic() - started) * 1000
        request_done(name, header.api_version, elapsed_ms)
        if fetch_from is not None:
            request_done(fetch_from, header.api_version, elapsed_ms)

    def handle_timed(header, reader):
        started = time.monotonic()
        key = header.api_key
        name = names.get(key)
        if name is None:
            name = names[key] = request_name(getattr(key, "name", str(key)))
        fetch_from = None
        if name == "Fetch":
            # Kafka counts a Fetch under "Fetch" and under FetchFollower or FetchConsumer;
            # the replica id is a Fetch body's first field (up to v14).
            replica_id = reader.peek_int32()
            follower = replica_id is not None and replica_id >= 0
            fetch_from = "FetchFollower" if follower else "FetchConsumer"
        answered = False
        try:
            result = handle(header, reader)
            if result is not None and isinstance(result[0], DeferredResponse):
                result[0].finish = _finished_then(result[0].finish,
                                                  lambda: done(header, name, started, fetch_from))
            else:
                answered = True
            return result
        except BaseException:
            answered = True
            raise
        finally:
            if answered:
                done(header, name, started, fetch_from)
    return handle_timed


def _finished_then(finish: Callable[[], Any], then: Callable[[], None]) -> Callable[[], Any]:
    def finish_timed():
        try:
            return finish()
        finally:
            then()
    return finish_timed


# ---- scrape time ------------------------------------------------------------------------

def _partition_gauges(partitions: list, broker_id: int, min_isr_for: Callable[[str], int],
                      pause: Callable[[], None]) -> Iterator[tuple[str, dict[str, str], float]]:
    """``(name, labels, value)`` of the per-partition and per-broker replica gauges."""
    under_replicated = under_min_isr = 0
    min_isrs: dict[str, int] = {}
    for i, p in enumerate(partitions):
        if i and i % SCRAPE_SLICE == 0:
            pause()
        labels = {"topic": p.tp.topic, "partition": str(p.tp.partition)}
        log = p.log
        yield "kafka_log_log_size", labels, log.size
        yield "kafka_log_log_logendoffset", labels, log.log_end_offset
        yield "kafka_log_log_logstartoffset", labels, log.log_start_offset
        if p.leader == broker_id:
            # kafka_exporter's name for the newest offset a consumer can read
            yield "kafka_topic_partition_current_offset", labels, p.high_watermark
            if len(p.isr) < len(p.replicas):
                under_replicated += 1
            min_isr = min_isrs.get(p.tp.topic)
            if min_isr is None:
                min_isr = min_isrs[p.tp.topic] = min_isr_for(p.tp.topic)
            if len(p.isr) < min_isr:
                under_min_isr += 1
    yield "kafka_server_replicamanager_underreplicatedpartitions", {}, under_replicated
    yield "kafka_server_replicamanager_underminisrpartitioncount", {}, under_min_isr
    yield "kafka_server_replicamanager_partitioncount", {}, len(partitions)
    yield "kafka_server_replicamanager_leadercount", {}, sum(
        1 for p in partitions if p.leader == broker_id)


def committed_offsets(offsets: dict, pause: Callable[[], None]
                      ) -> Iterator[tuple[str, dict[str, str], float]]:
    """kafka_exporter's ``kafka_consumergroup_current_offset`` of each group this broker
    coordinates, from the group coordinator's ``{group: {(topic, partition): OffsetValue}}``."""
    done = 0
    for group, committed in list(offsets.items()):   # commits may land while we pause
        for (topic, partition), value in list(committed.items()):
            done += 1
            if done % SCRAPE_SLICE == 0:
                pause()
            yield ("kafka_consumergroup_current_offset",
                   {"consumergroup": group, "topic": topic, "partition": str(partition)}, value.offset)


def controller_gauges(ctx, pause: Callable[[], None]) -> tuple[int, int]:
    """(offline partitions, partitions not led by their preferred replica) in the active
    controller's context ``ctx`` (Kafka's OfflinePartitionsCount and
    PreferredReplicaImbalanceCount); the caller reports 0 on other brokers."""
    states = list(ctx.states.items())   # the controller may change them while we pause
    offline = imbalanced = 0
    for i, (tp, state) in enumerate(states):
        if i and i % SCRAPE_SLICE == 0:
            pause()
        if tp.topic in ctx.deleting_topics:
            continue   # Kafka leaves topics being deleted out of both counts
        if state.leader < 0 or not ctx.is_live(state.leader):
            offline += 1
        replicas = ctx.assignments.get(tp)
        if replicas and state.leader != replicas[0]:
            imbalanced += 1
    return offline, imbalanced


class BrokerCollector:
    """A prometheus_client collector over one broker's live state (see the module docstring).

    ``source`` gives what a scrape reads, each possibly None while the broker starts:
    ``partitions()`` (Partition objects), ``broker_id``, ``min_isr(topic)``,
    ``controller_context()`` (None unless this broker is the active controller),
    ``zk_state()`` (the ZooKeeper client's state name) and ``committed_offsets()`` (the
    group coordinator's ``{group: {(topic, partition): OffsetValue}}``).
    """

    def __init__(self, source, pause: Callable[[], None]) -> None:
        self.source = source
        self.pause = pause

    def collect(self):
        from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                            HistogramMetricFamily, SummaryMetricFamily)
        from prometheus_client.utils import floatToGoString
        src = self.source
        families: dict[str, Any] = {}

        def gauge(name: str, labels: dict[str, str], value: float, doc: str = "") -> None:
            family = families.get(name)
            if family is None:
                family = families[name] = GaugeMetricFamily(name, doc or _GAUGE_HELP.get(name, name),
                                                            labels=list(labels))
            family.add_metric(list(labels.values()), value)

        for name, labels, value in _partition_gauges(list(src.partitions()), src.broker_id,
                                                     src.min_isr, self.pause):
            gauge(name, labels, value)
        ctx = src.controller_context()
        offline, imbalanced = controller_gauges(ctx, self.pause) if ctx is not None else (0, 0)
        gauge("kafka_controller_kafkacontroller_activecontrollercount", {}, 1 if ctx is not None else 0)
        gauge("kafka_controller_kafkacontroller_offlinepartitionscount", {}, offline)
        gauge("kafka_controller_kafkacontroller_preferredreplicaimbalancecount", {}, imbalanced)
        gauge("kafka_server_sessionexpirelistener_sessionstate", {"state": src.zk_state()}, 1)
        for name, labels, value in committed_offsets(src.committed_offsets(), self.pause):
            gauge(name, labels, value)
        yield from families.values()

        collections = SummaryMetricFamily(
            GC_TIME, "collections of CPython's cycle collector, and their time in seconds, per "
            "generation (as the JVM's jvm_gc_collection_seconds)", labels=["generation"])
        for generation, (n, seconds) in sorted(_collections.items()):
            collections.add_metric([str(generation)], n, seconds)
        yield collections
        for name, doc in _COUNTER_HELP.items():
            yield CounterMetricFamily(name, doc, value=_counts[name])
        yield SummaryMetricFamily(LEADER_ELECTION, "time of the controller's broker-change "
                                  "handling, which elects leaders (LeaderElectionRateAndTimeMs)",
                                  count_value=_counts[LEADER_ELECTION + "_count"],
                                  sum_value=_counts[LEADER_ELECTION + "_sum"])
        for name, per_topic, doc in ((BYTES_IN, _bytes_in, "bytes appended as leader (BytesInPerSec)"),
                                     (MESSAGES_IN, _messages_in,
                                      "records appended as leader (MessagesInPerSec)"),
                                     (BYTES_OUT, _bytes_out,
                                      "bytes fetched by consumers (BytesOutPerSec)")):
            family = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, size in list(per_topic.items()):
                family.add_metric([topic], size)
            yield family
        requests = CounterMetricFamily(REQUESTS, "requests answered (RequestsPerSec)",
                                       labels=["request", "version"])
        for (request, version), n in list(_requests.items()):
            requests.add_metric([request, str(version)], n)
        yield requests
        def buckets(counts: list[float]) -> list[tuple[str, float]]:
            cumulative, pairs = 0.0, []
            for bound, n in zip(TIME_BUCKETS_MS + (float("inf"),), counts):
                cumulative += n
                pairs.append((floatToGoString(bound), cumulative))
            return pairs
        times = HistogramMetricFamily(TOTAL_TIME, "time from a request's arrival to its answer, ms "
                                      "(TotalTimeMs)", labels=["request"])
        for request, counts in list(_request_times.items()):
            times.add_metric([request], buckets(counts), counts[-2])
        yield times
        zk_times = HistogramMetricFamily(ZK_LATENCY, "time of this broker's ZooKeeper requests, ms "
                                         "(ZooKeeperRequestLatencyMs)")
        if _zk_request_times:
            zk_times.add_metric([], buckets(_zk_request_times), _zk_request_times[-2])
        yield zk_times


class _OneFamily:
    """A registry stand-in that collects one family (for prometheus_client's formatter)."""

    def __init__(self, family) -> None:
        self.family = family

    def collect(self):
        return [self.family]


def exposition(collector, pause: Callable[[], None]) -> bytes:
    """Prometheus text of ``collector``'s families, formatted ``SCRAPE_SLICE`` samples at a
    time with a ``pause`` after each slice: formatting 10k partitions' samples in one go
    would hold the loop for hundreds of ms (prometheus_client formats a whole registry
    at once, so it gets one slice of one family at a time).
    """
    import copy

    from prometheus_client.exposition import generate_latest
    chunks = []
    for family in collector.collect():
        samples = family.samples
        for start in range(0, max(len(samples), 1), SCRAPE_SLICE):
            part = copy.copy(family)
            part.samples = samples[start:start + SCRAPE_SLICE]
            text = generate_latest(_OneFamily(part))
            if start:
                text = text.split(b"\n", 2)[2]   # the family's HELP and TYPE lines come once
            chunks.append(text)
            pause()
    return b"".join(chunks)


_GAUGE_HELP = {
    "kafka_log_log_size": "bytes of a partition's log on this broker (Log Size)",
    "kafka_log_log_logendoffset": "a partition's log end offset on this broker (LogEndOffset)",
    "kafka_log_log_logstartoffset": "a partition's log start offset on this broker (LogStartOffset)",
    "kafka_server_replicamanager_underreplicatedpartitions":
        "partitions led here whose ISR is smaller than their replica set",
    "kafka_server_replicamanager_underminisrpartitioncount":
        "partitions led here whose ISR is smaller than min.insync.replicas",
    "kafka_server_replicamanager_partitioncount": "partitions with a replica on this broker",
    "kafka_server_replicamanager_leadercount": "partitions led by this broker",
    "kafka_controller_kafkacontroller_activecontrollercount": "1 on the active controller, else 0",
    "kafka_controller_kafkacontroller_offlinepartitionscount":
        "partitions without a live leader (counted by the active controller)",
    "kafka_controller_kafkacontroller_preferredreplicaimbalancecount":
        "partitions not led by their preferred replica (counted by the active controller)",
    "kafka_server_sessionexpirelistener_sessionstate":
        "1, labelled with the state of this broker's ZooKeeper session",
    "kafka_topic_partition_current_offset":
        "high watermark of a partition led here (kafka_exporter's name)",
    "kafka_consumergroup_current_offset":
        "offset a group coordinated here committed for a partition (kafka_exporter's name)",
}


def exported_names() -> set[str]:
    """Every metric name a scrape can show, with the suffixes Prometheus sees."""
    names = set(_GAUGE_HELP)
    names |= {n + "_total" for n in (*_COUNTER_HELP, BYTES_IN, BYTES_OUT, MESSAGES_IN, REQUESTS)}
    names |= {name + suffix for name in (LEADER_ELECTION, GC_TIME) for suffix in ("_count", "_sum")}
    names |= {name + suffix for name in (TOTAL_TIME, ZK_LATENCY)
              for suffix in ("_count", "_sum", "_bucket")}
    return names
