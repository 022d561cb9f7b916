"""docs/benchmarks.md is rendered from bench-results/*.json: the renderer on a small fixture,
and the committed page against what the committed results files give."""
from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kafka_ha.tools.bench_report import IMG_DIR, PAGE, ResultsError, load, render, stale, write

FIXTURE = {
    "schema": 1, "bench": "failover", "title": "Availability after kill -9 of a leader",
    "command": "bin/kafka-failover-bench.sh --partitions 100,300",
    "date": "2026-11-25T15:00:00+00:00", "commit": "0123456789abcdef0123", "code_modified": False,
    "machine": {"cores": 2, "memory_gib": 23.5, "cpu_model": "Test CPU", "kernel": "Linux 6.1",
                "python": "CPython 3.11.7"},
    "load_average": {"start": [3.5, 3.0, 2.5], "end": [4.25, 3.1, 2.6]},
    "method": "One topic, a kill -9, two producers.", "note": "A loaded machine.",
    "ratios": [{"target": "acks=all writable again (max), 300 partitions", "value": 7.125,
                "baseline": "floor: session timeout + raw multis", "baseline_value": 6.25,
                "unit": "s", "ratio": 1.14, "goal": None}],
    "tables": [{"title": "Unavailability window", "note": "",
                "columns": [{"heading": "partitions", "unit": "", "decimals": 0},
                            {"heading": "acks=all max", "unit": "s", "decimals": 2},
                            {"heading": "stall", "unit": "ms", "decimals": 0}],
                "rows": [[100, 6.4321, 87.4], [300, 7.125, None]]}],
    "plots": [{"file": "failover-window", "kind": "bar", "title": "Window by partitions",
               "x_label": "partitions", "y_label": "seconds", "x": [100, 300],
               "series": {"acks=all (max)": [6.4321, 7.125], "floor": [6.25, None]}},
              {"file": "latency-curve", "kind": "line", "title": "Latency against load",
               "x_label": "load %", "y_label": "ms", "x": [0, 1, 5, 10],
               "series": {"p99": [2, 5, 7, 7], "p99.9": [5, 11, 15, 11]}}],
    "results": {"runs": []},
}


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    results = tmp_path / "bench-results"
    results.mkdir()
    (results / "failover.json").write_text(json.dumps(FIXTURE))
    return results, tmp_path / "docs" / "benchmarks.md", tmp_path / "docs" / "img"


def test_the_page_shows_each_run_with_its_tables_ratios_and_plots(layout):
    results, page, img = layout
    files = render(load(results), page, img)
    assert set(files) == {page, img / "bench-failover-window.svg", img / "bench-latency-curve.svg"}
    text = files[page]
    for expected in ["## Availability after kill -9 of a leader (`bin/kafka-failover-bench.sh`)",
                     "[Availability after kill -9 of a leader]"
                     "(#availability-after-kill--9-of-a-leader-binkafka-failover-benchsh)",
                     "One topic, a kill -9, two producers.",
                     "`bin/kafka-failover-bench.sh --partitions 100,300`", "`0123456789ab`",
                     "2026-11-25T15:00:00+00:00", "2 cores (Test CPU), 23.5 GiB, Linux 6.1, CPython 3.11.7",
                     "load average 3.5 at the start, 4.25 at the end", "**Note:** A loaded machine.",
                     "git log -p docs/benchmarks.md",
                     # the ratio to the baseline, with both sides
                     "| acks=all writable again (max), 300 partitions | 7.12 s | floor: session timeout "
                     "+ raw multis | 6.25 s | 1.14x | - |",
                     # a results table: units, decimals, a missing cell, numbers aligned right
                     "| partitions | acks=all max | stall |", "|---:|---:|---:|",
                     "| 100 | 6.43 s | 87 ms |", "| 300 | 7.12 s | - |",
                     "![Window by partitions](img/bench-failover-window.svg)",
                     "![Latency against load](img/bench-latency-curve.svg)"]:
        assert expected in text
    for svg in (img / "bench-failover-window.svg", img / "bench-latency-curve.svg"):
        assert ET.fromstring(files[svg]).tag == "{http://www.w3.org/2000/svg}svg"   # well-formed
    bars = files[img / "bench-failover-window.svg"]
    assert bars.count("<rect x=") >= 3 + 2       # three bars (one value is missing), two legend keys
    for label in ("6.43", "7.12", "6.25", "Window by partitions", "acks=all (max)", ">100<", ">300<"):
        assert label in bars
    line = files[img / "bench-latency-curve.svg"]
    assert line.count("<polyline") == 2 and line.count("<circle") == 8
    assert "p99.9 at 5: 15" in line


def test_check_names_a_changed_page_a_missing_plot_and_an_orphaned_one(layout):
    results, page, img = layout
    files = render(load(results), page, img)
    write(files, img)
    assert stale(files, img) == []
    page.write_text(page.read_text().replace("6.43 s", "6.40 s"))
    (img / "bench-latency-curve.svg").unlink()
    (img / "bench-gone.svg").write_text("<svg/>")
    (img / "design-diagram.svg").write_text("<svg/>")     # not the renderer's: left alone
    assert stale(files, img) == [f"{page}: differs", f"{img / 'bench-latency-curve.svg'}: missing",
                                 f"{img / 'bench-gone.svg'}: no results file draws it"]
    write(files, img)
    assert stale(files, img) == []
    assert (img / "design-diagram.svg").exists() and not (img / "bench-gone.svg").exists()


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("machine"), "missing machine"),
    (lambda d: d.update(bench="data"), "holds the results of 'data'"),
    (lambda d: d.update(schema=2), "schema 2"),
    (lambda d: d["plots"][0].update(kind="pie"), "unknown kind 'pie'"),
])
def test_a_results_file_the_page_cannot_be_made_from_is_named(layout, change, message):
    results, _, _ = layout
    data = json.loads(json.dumps(FIXTURE))
    change(data)
    (results / "failover.json").write_text(json.dumps(data))
    with pytest.raises(ResultsError, match="failover.json") as error:
        load(results)
    assert message in str(error.value)


def test_docs_benchmarks_md_is_up_to_date_with_bench_results():
    files = render(load())
    assert stale(files, IMG_DIR) == [], "run bin/kafka-bench-report.sh and commit docs/"
    assert PAGE in files


def test_a_scratch_dir_is_removed_when_the_benchmark_exits(tmp_path):
    # A benchmark run without --dir must not leave its gigabytes of logs behind.
    code = ("import pathlib; from kafka_ha.bench_results import scratch_dir; "
            "p = pathlib.Path(scratch_dir('kafka-ha-test-scratch-')); (p / 'a' / 'b').mkdir(parents=True); "
            "(p / 'a' / 'b' / 'log').write_bytes(b'x' * 4096); print(p)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    path = Path(done.stdout.strip())
    assert path.name.startswith("kafka-ha-test-scratch-") and not path.exists()
