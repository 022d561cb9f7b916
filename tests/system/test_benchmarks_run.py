"""The cluster benchmarks still run end to end, at a tiny size, and write results files the page
renderer accepts (each starts its own ZooKeeper ensemble and brokers; about a minute each)."""
from __future__ import annotations

import pytest

from kafka_ha.tools import controller_bench, failover_bench, group_bench, topic_admin_bench
from kafka_ha.tools.bench_report import load, render

pytestmark = pytest.mark.system


def test_failover_bench_writes_its_window_and_floor(tmp_path):
    results = tmp_path / "bench-results"
    assert failover_bench.main(["--partitions", "6", "--dir", str(tmp_path / "work"),
                                "--json", str(results / "failover.json")]) == 0
    [data] = load(results)
    [row] = data["results"]["runs"]
    assert row["partitions"] == 6 and row["acks_all"]["n"] == row["led"] > 0
    assert row["acks_all_failed"] == row["acks_1_failed"] == 0
    assert row["acks_all_max_runs"] == [row["acks_all"]["max"]]     # one run (--repeat 1)
    # the floor: the session timeout plus the raw rewrite of the same state znodes
    assert row["floor_s"] > row["session_timeout_ms"] / 1000 and row["floor_write_ms"] > 0
    assert [r["baseline"] for r in data["ratios"]] == ["floor: session timeout + raw multis",
                                                       "acks=1 writable again (max)"]
    page = render([data], tmp_path / "docs" / "benchmarks.md", tmp_path / "docs" / "img")
    assert any(p.name == "bench-failover-window.svg" for p in page)
    # each survivor logged the UpdateMetadata that carried the new leaders
    received = [v for k, v in row["phases"].items() if "UpdateMetadata" in k]
    assert len(received) == 2 and all(v is not None and v > 0 for v in received)


def test_controller_bench_writes_its_writes_against_the_floor(tmp_path):
    results = tmp_path / "bench-results"
    assert controller_bench.main(["--partitions", "30", "--partitions-per-topic", "10",
                                  "--load-partitions", "", "--watch-topics", "10",
                                  "--dir", str(tmp_path / "work"),
                                  "--json", str(results / "controller.json")]) == 0
    [data] = load(results)
    [row] = data["results"]["rows"]
    assert row["partitions"] == 30 and row["written"] == 30 and row["floor_ms"] > 0
    assert data["results"]["watches"]["topics"] == 10 and data["results"]["watches"]["count"] > 0
    [target] = data["ratios"]
    assert target["baseline_value"] == row["floor_ms"] and target["value"] == row["event_write_ms"]


def test_group_bench_writes_rebalances_commits_and_read_rates(tmp_path):
    pytest.importorskip("confluent_kafka", reason="the read-rate part uses confluent-kafka")
    results = tmp_path / "bench-results"
    assert group_bench.main(["--members", "3", "--committers", "1,2", "--commit-seconds", "1",
                             "--messages", "2000", "--initial-rebalance-delay-ms", "500",
                             "--dir", str(tmp_path / "work"),
                             "--json", str(results / "groups.json")]) == 0
    [data] = load(results)
    [row] = data["results"]["rebalances"]
    # Neither can finish before its floor: the initial delay, the session timeout.
    assert row["members"] == 3 and row["formation_ms"] >= 500
    assert row["failure_ms"] >= row["failure_floor_ms"] == 6000
    assert [c["committers"] for c in data["results"]["commits"]] == [1, 2]
    assert all(c["commits"] > 0 and c["failed"] == 0 for c in data["results"]["commits"])
    best = data["results"]["reads"]["best"]
    assert best["assign"]["records"] == best["group"]["records"] == 2000
    assert [r["baseline"] for r in data["ratios"]] == ["floor: initial rebalance delay",
                                                       "floor: session timeout",
                                                       "assign() read rate"]
    render([data], tmp_path / "docs" / "benchmarks.md", tmp_path / "docs" / "img")


def test_idempotence_bench_writes_both_producers_for_both_settings(tmp_path):
    pytest.importorskip("confluent_kafka", reason="the bench's producer is confluent-kafka")
    from kafka_ha.tools import idempotence_bench
    results = tmp_path / "bench-results"
    assert idempotence_bench.main(["--records", "2000", "--repeat", "1", "--partitions", "3",
                                   "--sink-delays", "0,5", "--dir", str(tmp_path / "work"),
                                   "--json", str(results / "idempotence.json")]) == 0
    [data] = load(results)
    runs = data["results"]["runs"]
    assert set(runs) == {"client defaults", "64 KiB batches", idempotence_bench.OWN_CORE,
                         idempotence_bench.SINK}
    assert all(len(by_mode[mode]) == 1 and by_mode[mode][0]["mb_s"] > 0
               for by_mode in runs.values() for mode in ("plain", "idempotent"))
    # The goal is stated for the producer on a core of its own; the shared-cores ratio is beside it.
    own_core, shared = data["ratios"]
    assert own_core["goal"] == ">= 0.9x" and shared["goal"] is None
    assert own_core["baseline_value"] == runs[idempotence_bench.OWN_CORE]["plain"][0]["mb_s"]
    assert shared["baseline_value"] == runs["client defaults"]["plain"][0]["mb_s"]
    # The producer's own CPU is shown: librdkafka busy-waits while idempotence holds a batch back.
    headings = [c["heading"] for c in data["tables"][0]["columns"]]
    assert headings.index("producer's CPU per MB") == headings.index("brokers' CPU per MB") + 1
    # The round trip alone: both producers into the null sink at each answer delay.
    delayed = data["results"]["delayed_sink"]
    assert set(delayed) == {"0", "5"}
    assert all(len(by_mode[mode]) == 1 and by_mode[mode][0]["mb_s"] > 0
               for by_mode in delayed.values() for mode in ("plain", "idempotent"))
    assert [row[0] for row in data["tables"][1]["rows"]] == [0, 5]
    render([data], tmp_path / "docs" / "benchmarks.md", tmp_path / "docs" / "img")


def test_topic_admin_bench_writes_each_paths_rate(tmp_path):
    results = tmp_path / "bench-results"
    assert topic_admin_bench.main(["--topics", "6", "--round", "3", "--dir", str(tmp_path / "work"),
                                   "--json", str(results / "topic-admin.json")]) == 0
    [data] = load(results)
    assert {path: r["topics"] for path, r in data["results"].items()} == \
        {"zookeeper": 6, "api-single": 6, "api-batch": 6}
    assert all(r["per_second"] > 0 for r in data["results"].values())
    assert [r["baseline"] for r in data["ratios"]] == ["ZooKeeper script path (AdminStore)"] * 2
