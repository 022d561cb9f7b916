"""The cluster benchmarks still run end to end, at a tiny size, and write results files the page
renderer accepts (each starts its own ZooKeeper ensemble and brokers; about a minute each)."""
from __future__ import annotations

import pytest

from kafka_ha.tools import controller_bench, failover_bench
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
    # the floor: the session timeout plus the raw rewrite of the same state znodes
    assert row["floor_s"] > row["session_timeout_ms"] / 1000 and row["floor_write_ms"] > 0
    assert [r["baseline"] for r in data["ratios"]] == ["floor: session timeout + raw multis",
                                                       "acks=1 writable again (max)"]
    page = render([data], tmp_path / "docs" / "benchmarks.md", tmp_path / "docs" / "img")
    assert any(p.name == "bench-failover-window.svg" for p in page)


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
