"""The client CLI tools: argument handling, exact output formats, and runs against the fake cluster."""
from __future__ import annotations

import io
import re

import pytest

from kafka_ha.client.cli import UsageError, java_date, parse_properties, producer_kwargs
from tests.harness.fake_cluster import FakeCluster
from kafka_ha.client.consumer import ConsumerRecord
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.tools import (console_consumer, console_producer, consumer_perf, e2e_latency,
                            producer_perf, replica_verification as rv)

TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"          # yyyy-MM-dd HH:mm:ss,SSS
PERF_TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"     # yyyy-MM-dd HH:mm:ss:SSS


@pytest.fixture
def cluster():
    fake = FakeCluster((1, 2, 3)).start()
    fake.create_topic("t", 2, assignment=[[1, 2], [2, 3]])
    yield fake
    fake.stop()


def fill(cluster, tp, values):
    for value in values:
        cluster.append(tp, build_v2_batch([Record(None, value)]))


# -- shared helpers ------------------------------------------------------------------------


def test_java_date_formats():
    assert java_date(1_000_123, sep=",", utc=True) == "1970-01-01 00:16:40,123"
    assert java_date(5, sep=":", utc=True) == "1970-01-01 00:00:00:005"


def test_properties_and_producer_config_mapping():
    assert parse_properties(["a=b=c"]) == {"a": "b=c"}
    with pytest.raises(UsageError):
        parse_properties(["novalue"])
    kwargs, unknown = producer_kwargs({"compression.type": "gzip", "batch.size": "100",
                                       "foo.bar": "1"})
    assert kwargs == {"compression": "gzip", "batch_size": 100} and unknown == ["foo.bar"]
    with pytest.raises(UsageError, match="linger.ms"):
        producer_kwargs({"linger.ms": "soon"})


# -- console producer --------------------------------------------------------------------


def test_line_reader_splits_keys_and_reports_missing_separator():
    reader = console_producer.LineReader({"parse.key": "true", "key.separator": "::"})
    assert reader.parse(b"k::v::w") == (b"k", b"v::w")
    with pytest.raises(UsageError, match="No key found on line 2: plain"):
        reader.parse(b"plain")
    assert console_producer.LineReader({}).parse(b"a\tb") == (None, b"a\tb")


def test_console_producer_flags_map_to_producer_config():
    args = console_producer.build_parser().parse_args(
        ["--broker-list", "h:1", "--topic", "t", "--request-required-acks", "all",
         "--compression-codec", "--producer-property", "linger.ms=7"])
    config = console_producer.producer_config(args)
    assert (config["acks"], config["compression"], config["linger_ms"]) == ("all", "gzip", 7)


def test_console_producer_missing_topic_exits_1(capsys):
    with pytest.raises(SystemExit) as info:
        console_producer.main(["--broker-list", "h:1"])
    assert info.value.code == 1
    assert 'Missing required argument "[topic]"' in capsys.readouterr().err


def test_console_producer_sends_one_message_per_line(cluster):
    stdin = io.BytesIO(b"k1:v1\nk2:v2\r\nk1:v3")
    rc = console_producer.main(["--broker-list", cluster.bootstrap, "--topic", "t", "--timeout",
                                "5", "--property", "parse.key=true", "--property",
                                "key.separator=:"], stdin=stdin)
    assert rc == 0
    records = cluster.records(TopicPartition("t", 0)) + cluster.records(TopicPartition("t", 1))
    assert sorted((r.key, r.value) for r in records) == [(b"k1", b"v1"), (b"k1", b"v3"),
                                                         (b"k2", b"v2")]


def test_console_producer_unreachable_cluster_exits_1(capsys):
    rc = console_producer.main(["--broker-list", "127.0.0.1:1", "--topic", "t"],
                               stdin=io.BytesIO(b"x\n"))
    assert rc == 1
    assert "127.0.0.1:1" in capsys.readouterr().err


# -- console consumer --------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["--offset", "5"], "The partition is required when offset is specified."),
    (["--partition", "0", "--offset", "5", "--from-beginning"],
     "Options from-beginning and offset cannot be specified together."),
    (["--partition", "0", "--offset", "-3"],
     "The provided offset value '-3' is incorrect. Valid values are 'earliest', 'latest', "
     "or a non-negative long."),
])
def test_console_consumer_offset_rules(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        console_consumer.main(["--bootstrap-server", "h:1", "--topic", "t", *argv])
    assert info.value.code == 1
    assert capsys.readouterr().err.startswith(message + "\n")


def test_console_consumer_formatter():
    record = ConsumerRecord("t", 0, 5, 1234, None, b"v")
    fmt = console_consumer.MessageFormatter({"print.key": "true", "print.timestamp": "true"})
    assert fmt.format(record) == b"CreateTime:1234\tnull\tv\n"
    fmt = console_consumer.MessageFormatter({"print.key": "true", "key.separator": "|",
                                             "print.value": "false"})
    assert fmt.format(record._replace(key=b"k")) == b"k\n"
    assert console_consumer.MessageFormatter({}).format(record) == b"v\n"
    # KIP-431 (Kafka 2.7): headers after the timestamp, NO_HEADERS when there are none.
    fmt = console_consumer.MessageFormatter({"print.headers": "true", "print.timestamp": "true"})
    assert fmt.format(record) == b"CreateTime:1234\tNO_HEADERS\tv\n"
    with_headers = record._replace(headers=(("a", b"1"), ("b", None)), timestamp_type=1)
    assert fmt.format(with_headers) == b"LogAppendTime:1234\ta:1,b:null\tv\n"
    fmt = console_consumer.MessageFormatter({"print.headers": "true", "headers.separator": ";",
                                             "print.value": "false"})
    assert fmt.format(with_headers) == b"a:1;b:null\n"


def test_console_consumer_from_beginning_max_messages(cluster, capsys):
    fill(cluster, TopicPartition("t", 0), [b"a", b"b", b"c"])
    out = io.BytesIO()
    rc = console_consumer.main(["--bootstrap-server", cluster.bootstrap, "--topic", "t",
                                "--from-beginning", "--max-messages", "2"], out=out)
    assert rc == 0 and out.getvalue() == b"a\nb\n"
    assert capsys.readouterr().err.endswith("Processed a total of 2 messages\n")


def test_console_consumer_partition_offset_and_timeout(cluster, capsys):
    fill(cluster, TopicPartition("t", 1), [b"x", b"y", b"z"])
    out = io.BytesIO()
    rc = console_consumer.main(["--bootstrap-server", cluster.bootstrap, "--topic", "t",
                                "--partition", "1", "--offset", "1", "--timeout-ms", "300",
                                "--property", "print.key=true"], out=out)
    assert rc == 0 and out.getvalue() == b"null\ty\nnull\tz\n"
    err = capsys.readouterr().err
    assert re.search(rf"^\[{TS}\] ERROR Error processing message, terminating consumer process:  "
                     r"\(kafka.tools.ConsoleConsumer\$\)$", err, re.M)
    assert err.endswith("Processed a total of 2 messages\n")


def test_console_consumer_group_commits_what_it_printed(cluster):
    fill(cluster, TopicPartition("t", 0), [b"a", b"b", b"c"])
    rc = console_consumer.main(["--bootstrap-server", cluster.bootstrap, "--topic", "t",
                                "--group", "g", "--from-beginning", "--max-messages", "2"],
                               out=io.BytesIO())
    assert rc == 0
    assert cluster.committed[("g", TopicPartition("t", 0))] == 2


# -- producer perf ------------------------------------------------------------------------


def test_producer_perf_window_and_total_lines():
    out, clock = io.StringIO(), [0.0]
    stats = producer_perf.Stats(4, out=out, now_ms=lambda: clock[0], reporting_interval_ms=5000)
    for i, (latency, now) in enumerate([(10, 1000.0), (20, 2000.0), (30, 5000.0), (40, 6000.0)]):
        stats.record(i, latency, 1024 * 1024, now)
    clock[0] = 8000.0
    stats.print_total()
    assert out.getvalue().splitlines() == [
        "3 records sent, 0.6 records/sec (0.60 MB/sec), 20.0 ms avg latency, 30.0 ms max latency.",
        "4 records sent, 0.500000 records/sec (0.50 MB/sec), 25.00 ms avg latency, "
        "40.00 ms max latency, 30 ms 50th, 40 ms 95th, 40 ms 99th, 40 ms 99.9th."]


def test_producer_perf_needs_exactly_one_payload_source(capsys):
    with pytest.raises(SystemExit) as info:
        producer_perf.main(["--topic", "t", "--num-records", "1", "--throughput", "-1",
                            "--producer-props", "bootstrap.servers=h:1"])
    assert info.value.code == 1
    assert "Either --record-size or --payload-file" in capsys.readouterr().err


def test_producer_perf_run(cluster, capsys):
    rc = producer_perf.main(["--topic", "t", "--num-records", "500", "--record-size", "50",
                             "--throughput", "-1", "--producer-props",
                             f"bootstrap.servers={cluster.bootstrap}", "acks=all",
                             "compression.type=gzip", "linger.ms=2"])
    assert rc == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"500 records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), "
                        r"\d+\.\d\d ms avg latency, \d+\.\d\d ms max latency, \d+ ms 50th, "
                        r"\d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.", line)
    total = sum(len(cluster.records(TopicPartition("t", p))) for p in (0, 1))
    assert total == 500


def test_producer_perf_unreachable_cluster(capsys):
    rc = producer_perf.main(["--topic", "t", "--num-records", "1", "--record-size", "1",
                             "--throughput", "-1", "--producer-props",
                             "bootstrap.servers=127.0.0.1:1"])
    assert rc == 1 and "no broker reachable" in capsys.readouterr().err


# -- consumer perf ------------------------------------------------------------------------


def test_consumer_perf_header_and_row_format():
    assert consumer_perf.header(False) == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    row = consumer_perf.summary_row(0, 4000, 1024 * 1024, 100)
    assert re.fullmatch(rf"{PERF_TS}, {PERF_TS}, 1\.0000, 0\.2500, 100, 25\.0000, 0, 4000, "
                        r"0\.2500, 25\.0000", row)


def test_consumer_perf_run(cluster, capsys):
    fill(cluster, TopicPartition("t", 0), [b"x" * 10] * 6)
    fill(cluster, TopicPartition("t", 1), [b"y" * 10] * 4)
    rc = consumer_perf.main(["--broker-list", cluster.bootstrap, "--topic", "t",
                             "--messages", "10", "--threads", "1"])
    assert rc == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header == consumer_perf.header(False)
    assert row.split(", ")[2:5] == ["0.0001", row.split(", ")[3], "10"]


def test_consumer_perf_timeout_warning(cluster, capsys):
    rc = consumer_perf.main(["--broker-list", cluster.bootstrap, "--topic", "t",
                             "--messages", "5", "--timeout", "200"])
    assert rc == 0
    assert "WARNING: Exiting before consuming the expected number of messages: timeout " \
           "(200 ms) exceeded." in capsys.readouterr().out


# -- end-to-end latency --------------------------------------------------------------------


def test_e2e_summary_format():
    assert e2e_latency.summary([2_500_000] * 10) == [
        "Avg latency: 2.5000 ms", "", "Percentiles: 50th = 2, 99th = 2, 99.9th = 2"]


def test_e2e_usage_and_acks_checks(capsys):
    assert e2e_latency.main(["h:1", "t", "10"]) == 1
    assert capsys.readouterr().err.startswith("USAGE: ")
    assert e2e_latency.main(["h:1", "t", "10", "0", "100"]) == 1
    assert "Please use 1 or all" in capsys.readouterr().err


def test_e2e_run(cluster, capsys):
    assert e2e_latency.main([cluster.bootstrap, "t", "3", "all", "20"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"0\t\d+\.\d+", lines[0])
    assert re.fullmatch(r"Avg latency: \d+\.\d{4} ms", lines[1]) and lines[2] == ""
    assert re.fullmatch(r"Percentiles: 50th = \d+, 99th = \d+, 99\.9th = \d+", lines[3])


def test_e2e_consumer_busy_polls_unless_the_properties_file_says_otherwise(cluster, tmp_path):
    def fetch_waits():
        return {body["max_wait_ms"] for _, key, _, body in cluster.requests if key == ApiKey.FETCH}

    assert e2e_latency.main([cluster.bootstrap, "t", "2", "1", "20"]) == 0
    assert fetch_waits() == {0}                                  # Kafka's tool: always 0
    cluster.requests.clear()
    props = tmp_path / "consumer.properties"
    props.write_text("fetch.max.wait.ms=250\n")
    assert e2e_latency.main([cluster.bootstrap, "t", "2", "1", "20", str(props)]) == 0
    assert fetch_waits() == {250}


# -- replica verification -------------------------------------------------------------------

TP = TopicPartition("foo", 0)


def batches(*values, base=0):
    data = b""
    for value in values:
        data += build_v2_batch([Record(None, value)], base_offset=base, timestamp_ms=1)
        base += 1
    return data


def verifier(lines, replicas=(1, 2)):
    return rv.ReplicaVerifier({TP: replicas}, {TP: 0}, 30000, 0, lines.append)


def test_verifier_advances_over_identical_replicas_up_to_the_high_watermarks():
    lines = []
    v = verifier(lines)
    v.verify({TP: {1: rv.ReplicaFetch(3, batches(b"a", b"b", b"c")),
                   2: rv.ReplicaFetch(2, batches(b"a", b"b"))}}, now=1000)
    assert v.offsets[TP] == 2 and lines == [] and v.max_lag == 1


def test_verifier_reports_checksum_mismatch_in_kafkas_words():
    lines = []
    v = verifier(lines)
    v.verify({TP: {1: rv.ReplicaFetch(2, batches(b"a", b"b")),
                   2: rv.ReplicaFetch(2, batches(b"a", b"X"))}}, now=1000)
    (line,) = lines
    assert re.fullmatch(rf"{TS}: partition \[foo,0\] has unmatched checksum at offset 1; "
                        r"replica 1's checksum \d+; replica 2's checksum \d+", line)
    assert v.offsets[TP] == 2 and v.problems == 1


def test_verifier_offset_mismatch_is_fatal():
    lines = []
    two = build_v2_batch([Record(None, b"a"), Record(None, b"b")], timestamp_ms=1)
    with pytest.raises(rv.OffsetMismatch):
        verifier(lines).verify({TP: {1: rv.ReplicaFetch(2, batches(b"a", b"b")),
                                     2: rv.ReplicaFetch(2, two)}}, now=0)
    assert re.fullmatch(rf"{TS}: partition \[foo,0\]: replica 1's offset 0 doesn't match "
                        r"replica 2's offset 1", lines[0])


def test_verifier_max_lag_report_after_the_interval():
    lines = []
    v = verifier(lines)
    v.verify({TP: {1: rv.ReplicaFetch(5, b""), 2: rv.ReplicaFetch(4, b"")}}, now=30001)
    assert re.fullmatch(rf"{TS}: max lag is 5 for partition \[foo,0\] at offset 0 among "
                        r"1 paritions", lines[0])


def test_whitelist_regex_rules():
    assert rv.whitelist_regex("a,b").fullmatch("b")
    with pytest.raises(ValueError, match="is an invalid regex"):
        rv.whitelist_regex("(")


def test_replica_verification_once_identical(cluster, capsys):
    fill(cluster, TopicPartition("t", 0), [b"a", b"b"])
    fill(cluster, TopicPartition("t", 1), [b"c"])
    rc = rv.main(["--broker-list", cluster.bootstrap, "--time", "-2", "--once",
                  "--max-wait-ms", "50"])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert re.fullmatch(rf"{TS}: verification process is started\.", lines[0])
    assert re.fullmatch(rf"{TS}: max lag is 0 for partition \[t,\d\] at offset \d among 2 "
                        r"paritions", lines[-1])


def test_replica_verification_once_finds_a_diverged_follower(cluster, capsys):
    tp = TopicPartition("t", 0)
    fill(cluster, tp, [b"a", b"b"])
    follower = cluster.log(tp, 2)
    first, last, raw = follower.entries[1]
    follower.entries[1] = (first, last, raw[:-1] + bytes([raw[-1] ^ 1]))
    rc = rv.main(["--broker-list", cluster.bootstrap, "--time", "-2", "--once",
                  "--topic-white-list", "t", "--max-wait-ms", "50"])
    assert rc == 1
    assert "partition [t,0] has unmatched checksum at offset 1; replica 1's checksum" in \
        capsys.readouterr().out


def test_replica_verification_uses_debug_consumer_fetches(cluster):
    assert rv.main(["--broker-list", cluster.bootstrap, "--once", "--max-wait-ms", "50"]) == 0
    fetches = cluster.requests_of(ApiKey.FETCH)
    assert {b for b, _ in fetches} == {1, 2, 3}
    assert {body["replica_id"] for _, body in fetches} == {-2}


def test_replica_verification_no_matching_topic(cluster, capsys):
    rc = rv.main(["--broker-list", cluster.bootstrap, "--topic-white-list", "nope"])
    assert rc == 1
    assert capsys.readouterr().err.startswith("No topics found. nope, if specified")


def test_throttler_sleeps_only_when_two_ms_ahead(monkeypatch):
    slept = []
    monkeypatch.setattr(producer_perf.gevent, "sleep", slept.append)
    throttler = producer_perf.Throttler(1000, start=100.0)        # one record per ms
    throttler.throttle(1, now=100.0)          # 1 ms ahead: keep sending
    throttler.throttle(2, now=100.0005)       # 1.5 ms ahead
    assert slept == []
    throttler.throttle(3, now=100.0)          # 3 ms ahead: sleep it off at once
    assert slept == [pytest.approx(0.003)]
    producer_perf.Throttler(-1, start=0.0).throttle(10**6, now=0.0)   # unthrottled
    assert len(slept) == 1
