"""kafka_ha/metrics.py: the scrape-time collector's names, labels and values, the event
counters, and the example dashboard and alert rules naming only exported metrics."""
import json
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from kafka_ha import metrics  # noqa: E402
from kafka_ha.controller.context import ControllerContext  # noqa: E402
from kafka_ha.coordinator.offsets_records import OffsetValue  # noqa: E402
from kafka_ha.model import LeaderAndIsr, TopicPartition  # noqa: E402
from kafka_ha.protocol.deferred import DeferredResponse  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BROKER = 1


def partition(topic, index, leader, replicas, isr, size=100, leo=10, start=0):
    log = SimpleNamespace(size=size, log_end_offset=leo, log_start_offset=start)
    return SimpleNamespace(tp=TopicPartition(topic, index), leader=leader, replicas=tuple(replicas),
                           isr=tuple(isr), high_watermark=leo - 1, log=log)


class Source:
    def __init__(self, partitions, ctx=None, min_isr=None, zk_state="CONNECTED", committed=None):
        self._partitions = partitions
        self._committed = committed or {}
        self.broker_id = BROKER
        self._ctx = ctx
        self._min_isr = min_isr or {}
        self._zk_state = zk_state

    def partitions(self):
        return self._partitions

    def min_isr(self, topic):
        return self._min_isr.get(topic, 1)

    def controller_context(self):
        return self._ctx

    def zk_state(self):
        return self._zk_state

    def committed_offsets(self):
        return self._committed


def scrape(source, pauses=None):
    """What /metrics answers, parsed: {(name, labels): value}, and the text."""
    pause = (lambda: pauses.append(time.perf_counter())) if pauses is not None else (lambda: None)
    text = metrics.exposition(metrics.BrokerCollector(source, pause), pause).decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in samples, f"{key} twice in one scrape"
            samples[key] = s.value
    return samples, text


def value(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


def controller_context(states, assignments, live):
    ctx = ControllerContext()
    for tp, replicas in assignments.items():
        ctx.set_assignment(tp, replicas)
    ctx.states.update(states)
    ctx.live_brokers = {b: object() for b in live}
    return ctx


def test_replica_gauges_count_only_partitions_led_here():
    parts = [
        partition("a", 0, BROKER, (1, 2, 3), (1, 2, 3), size=1234, leo=42, start=7),
        partition("a", 1, BROKER, (1, 2, 3), (1, 2)),          # under-replicated
        partition("b", 0, BROKER, (1, 2, 3), (1,)),            # under-replicated, under min ISR 2
        partition("b", 1, 2, (2, 1, 3), (2,)),                 # led elsewhere: not counted here
    ]
    samples, text = scrape(Source(parts, min_isr={"b": 2}))
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 2
    assert value(samples, "kafka_server_replicamanager_underminisrpartitioncount") == 1
    assert value(samples, "kafka_server_replicamanager_partitioncount") == 4
    assert value(samples, "kafka_server_replicamanager_leadercount") == 3
    assert value(samples, "kafka_log_log_size", topic="a", partition="0") == 1234
    assert value(samples, "kafka_log_log_logendoffset", topic="a", partition="0") == 42
    assert value(samples, "kafka_log_log_logstartoffset", topic="a", partition="0") == 7
    assert value(samples, "kafka_log_log_size", topic="b", partition="1") == 100
    # The newest readable offset (high watermark) of the partitions led here only.
    assert value(samples, "kafka_topic_partition_current_offset", topic="a", partition="0") == 41
    assert ("kafka_topic_partition_current_offset", (("partition", "1"), ("topic", "b"))) not in samples
    assert value(samples, "kafka_server_sessionexpirelistener_sessionstate", state="CONNECTED") == 1
    # Not the controller: the controller's gauges are 0, as on Kafka's other brokers.
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 0
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge" in text


def test_controller_gauges_offline_and_preferred_imbalance():
    tp = [TopicPartition("t", i) for i in range(4)]
    assignments = {tp[0]: (1, 2), tp[1]: (2, 1), tp[2]: (3, 1), tp[3]: (1, 3)}
    states = {tp[0]: LeaderAndIsr(1, 0, (1, 2), 1),     # preferred leader
              tp[1]: LeaderAndIsr(1, 1, (1,), 1),       # not the preferred one (2)
              tp[2]: LeaderAndIsr(-1, 2, (3,), 1),      # no leader: offline, imbalanced
              tp[3]: LeaderAndIsr(3, 1, (3,), 1)}       # leader 3 is dead: offline, imbalanced
    ctx = controller_context(states, assignments, live={1, 2})
    samples, _ = scrape(Source([], ctx=ctx))
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 2
    assert value(samples, "kafka_controller_kafkacontroller_preferredreplicaimbalancecount") == 3
    ctx.deleting_topics.add("t")   # Kafka leaves topics being deleted out of both counts
    samples, _ = scrape(Source([], ctx=ctx))
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(samples, "kafka_controller_kafkacontroller_preferredreplicaimbalancecount") == 0


def test_committed_offsets_of_coordinated_groups():
    committed = {"g1": {("a", 0): OffsetValue(17, "", 0), ("a", 1): OffsetValue(3, "m", 0)},
                 "g2": {("b", 0): OffsetValue(0, "", 0)}}
    samples, _ = scrape(Source([], committed=committed))
    assert value(samples, "kafka_consumergroup_current_offset",
                 consumergroup="g1", topic="a", partition="0") == 17
    assert value(samples, "kafka_consumergroup_current_offset",
                 consumergroup="g1", topic="a", partition="1") == 3
    assert value(samples, "kafka_consumergroup_current_offset",
                 consumergroup="g2", topic="b", partition="0") == 0
    assert len([k for k in samples if k[0] == "kafka_consumergroup_current_offset"]) == 3


def test_event_counters_and_request_histogram():
    before, _ = scrape(Source([]))

    def delta(name, **labels):
        return value(after, name, **labels) - before.get((name, tuple(sorted(labels.items()))), 0)

    metrics.isr_changed((1, 2, 3), (1, 2))
    metrics.isr_changed((1, 2), (1, 2, 3))
    metrics.isr_changed((1, 2), (1, 2, 3))
    metrics.isr_changed((1, 2), (2, 1))   # same size: neither
    metrics.count(metrics.UNCLEAN_ELECTIONS)
    metrics.leader_election_done(12.5)
    metrics.appended("unit-topic", 300, 3)
    metrics.appended("unit-topic", 200, 1)
    metrics.bytes_out("unit-topic", 70)
    metrics.request_done("Produce", 7, 3.0)
    metrics.request_done("Produce", 7, 700.0)
    metrics.zk_request_done(30.0)
    for state in ("SUSPENDED", "CONNECTED", "SUSPENDED", "LOST", "CONNECTED"):
        metrics.zk_state_changed(state)   # kazoo's KazooState values
    after, text = scrape(Source([]))
    assert delta("kafka_server_replicamanager_isrshrinks_total") == 1
    assert delta("kafka_server_replicamanager_isrexpands_total") == 2
    assert delta("kafka_controller_controllerstats_uncleanleaderelections_total") == 1
    assert delta("kafka_controller_controllerstats_leaderelectionrateandtimems_count") == 1
    assert delta("kafka_controller_controllerstats_leaderelectionrateandtimems_sum") == 12.5
    assert delta("kafka_server_brokertopicmetrics_bytesin_total", topic="unit-topic") == 500
    assert delta("kafka_server_brokertopicmetrics_messagesin_total", topic="unit-topic") == 4
    assert delta("kafka_server_brokertopicmetrics_bytesout_total", topic="unit-topic") == 70
    assert delta("kafka_network_requestmetrics_requests_total", request="Produce", version="7") == 2
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="Produce") == 2
    assert delta("kafka_network_requestmetrics_totaltimems_sum", request="Produce") == 703.0
    assert delta("kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="5.0") == 1
    assert delta("kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="1000.0") == 2
    assert "# TYPE kafka_network_requestmetrics_totaltimems histogram" in text
    zk = "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms"
    assert delta(zk + "_count") == 1 and delta(zk + "_sum") == 30.0
    assert delta(zk + "_bucket", le="25.0") == 0 and delta(zk + "_bucket", le="50.0") == 1
    assert delta("kafka_server_sessionexpirelistener_zookeeperdisconnects_total") == 2
    assert delta("kafka_server_sessionexpirelistener_zookeeperexpires_total") == 1
    assert delta("kafka_server_sessionexpirelistener_zookeepersyncconnects_total") == 2


def test_timed_wrapper_names_requests_as_kafka_does():
    class Key:
        name = "LEADER_AND_ISR"
    header = SimpleNamespace(api_key=Key(), api_version=1)
    before = metrics._requests[("LeaderAndIsr", 1)]
    with pytest.raises(ValueError):   # a failing request is counted too
        metrics.timed(lambda h, r: (_ for _ in ()).throw(ValueError("bad")))(header, None)
    assert metrics.timed(lambda h, r: "answer")(header, None) == "answer"
    assert metrics._requests[("LeaderAndIsr", 1)] == before + 2


def test_fetch_counts_also_as_fetch_follower_or_fetch_consumer():
    from kafka_ha.protocol.primitives import Reader

    class Key:
        name = "FETCH"
    header = SimpleNamespace(api_key=Key(), api_version=77)
    handle = metrics.timed(lambda h, r: ({"replica": r.int32()}, 77))
    assert handle(header, Reader(b"\x00\x00\x00\x02rest")) == ({"replica": 2}, 77)
    handle(header, Reader(b"\xff\xff\xff\xffrest"))
    handle(header, Reader(b"\xff\xff\xff\xffrest"))
    assert metrics._requests[("Fetch", 77)] == 3
    assert metrics._requests[("FetchFollower", 77)] == 1
    assert metrics._requests[("FetchConsumer", 77)] == 2


def test_deferred_answers_are_timed_until_finished():
    class Key:
        name = "PRODUCE"
    header = SimpleNamespace(api_key=Key(), api_version=99)
    deferred = DeferredResponse(lambda: {"answer": 1})
    result = metrics.timed(lambda h, r: (deferred, 99))(header, None)
    assert metrics._requests[("Produce", 99)] == 0   # not answered yet
    assert result[0].finish() == {"answer": 1}
    assert metrics._requests[("Produce", 99)] == 1
    assert metrics.timed(lambda h, r: None)(header, None) is None   # acks=0: no answer
    assert metrics._requests[("Produce", 99)] == 2


def test_scrape_of_10k_partitions_pauses_for_the_loop():
    n = 10_000
    parts = [partition(f"t{i % 100}", i // 100, BROKER if i % 3 else 2, (1, 2, 3),
                       (1, 2, 3) if i % 5 else (1, 2)) for i in range(n)]
    tps = {p.tp: p for p in parts}
    ctx = controller_context({tp: LeaderAndIsr(p.leader, 0, p.isr, 1) for tp, p in tps.items()},
                             {tp: p.replicas for tp, p in tps.items()}, live={1, 2, 3})
    pauses = []
    started = time.perf_counter()
    samples, _ = scrape(Source(parts, ctx=ctx), pauses)
    formatted = pauses[-1]   # the last pause follows the last slice formatted
    stretches = [b - a for a, b in zip([started] + pauses, pauses)]
    print(f"scrape of {n} partitions: {(formatted - started) * 1000:.0f} ms with "
          f"{len(pauses)} pauses for the loop, longest stretch {max(stretches) * 1000:.0f} ms "
          "(the parse of the text is not included)")
    # A pause every SCRAPE_SLICE partitions in the replica and controller passes, and every
    # SCRAPE_SLICE samples formatted: 3 samples per partition are 3 * n / SCRAPE_SLICE slices.
    assert len(pauses) >= 2 * (n // metrics.SCRAPE_SLICE - 1) + 3 * n // metrics.SCRAPE_SLICE
    led = [p for p in parts if p.leader == BROKER]
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == sum(
        1 for p in led if len(p.isr) < 3)
    assert value(samples, "kafka_controller_kafkacontroller_preferredreplicaimbalancecount") == sum(
        1 for p in parts if p.leader != 1)


def expressions(path, doc):
    """The PromQL of a dashboard's panels or of a rule file's rules."""
    if path.endswith(".json"):
        return [t["expr"] for panel in doc["panels"] for t in panel["targets"]]
    return [rule["expr"] for group in doc["groups"] for rule in group["rules"]]


@pytest.mark.parametrize("path", ["examples/grafana-kafka-ha.json", "examples/prometheus-alerts.yml"])
def test_examples_reference_only_exported_metrics(path):
    text = (ROOT / path).read_text()
    # Both must parse: Grafana imports JSON, Prometheus loads YAML rule files.
    doc = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    names = {name for expr in expressions(path, doc) for name in re.findall(r"\bkafka_[a-z_]+", expr)}
    assert len(names) > 10, f"{path} references few metrics: {names}"
    # Series the example rules record (consumer lag) are there once the rules are loaded.
    rules = yaml.safe_load((ROOT / "examples/prometheus-alerts.yml").read_text())
    recorded = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    unknown = names - metrics.exported_names() - recorded
    assert not unknown, f"{path} references metrics that are not exported: {sorted(unknown)}"


def test_exported_names_match_a_scrape():
    metrics.appended("names-topic", 1, 1)
    metrics.bytes_out("names-topic", 1)
    metrics.request_done("Fetch", 11, 1.0)
    metrics.zk_request_done(2.0)
    metrics.collection_done(0, 0.001)
    tp = TopicPartition("n", 0)
    ctx = controller_context({tp: LeaderAndIsr(1, 0, (1,), 1)}, {tp: (1,)}, {1})
    samples, _ = scrape(Source([partition("n", 0, BROKER, (1,), (1,))], ctx=ctx,
                               committed={"g": {("n", 0): OffsetValue(1, "", 0)}}))
    scraped = {name for name, _ in samples if not name.endswith("_created")}
    assert scraped == metrics.exported_names()


def test_endpoint_answers_metrics_only():
    from kafka_ha.broker.metrics_http import MetricsEndpoint
    endpoint = MetricsEndpoint("127.0.0.1", 0, Source([partition("e", 0, BROKER, (1,), (1,))]))

    def get(path, method="GET"):
        answer = {}
        body = b"".join(endpoint._app({"PATH_INFO": path, "REQUEST_METHOD": method},
                                      lambda status, headers: answer.update(status=status,
                                                                            headers=dict(headers))))
        return answer["status"], answer["headers"], body
    status, headers, body = get("/metrics")
    assert status == "200 OK"
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert int(headers["Content-Length"]) == len(body)
    assert b'kafka_log_log_size{partition="0",topic="e"} 100.0' in body
    assert get("/metrics", "HEAD")[2] == b""
    assert get("/other")[0] == "404 Not Found"
    assert get("/metrics", "POST")[0] == "405 Method Not Allowed"
