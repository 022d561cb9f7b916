"""The collector's log and times (kafka_ha/broker/gc_log.py): each collection is counted per
generation for /metrics, and one of at least LOGGED_MS is written to kafkaServer-gc.log."""
from __future__ import annotations

import gc
import logging

import pytest

from kafka_ha.broker import gc_log, logging_setup
from tests.unit.test_metrics import Source, scrape


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def collect(log, clock, generation, seconds, collected=0):
    log.on_gc("start", {"generation": generation})
    clock.now += seconds
    log.on_gc("stop", {"generation": generation, "collected": collected, "uncollectable": 0})


def test_a_long_collection_is_logged_and_every_one_is_counted():
    clock = Clock()
    log = gc_log.CollectorLog(clock=clock, wall=lambda: 1796000000.5)
    before, _ = scrape(Source([]))
    collect(log, clock, 0, 0.002)          # counted only
    collect(log, clock, 2, 0.2455, collected=48)
    [line] = log.take_lines()
    assert line.startswith("GC(2) Pause generation 2 245.5ms, 48 collected, 0 uncollectable, started ")
    assert log.take_lines() == []
    after, _ = scrape(Source([]))

    def grown(suffix, generation):
        key = ("python_gc_collection_seconds" + suffix, (("generation", generation),))
        return after[key] - before[key]
    assert grown("_count", "0") == 1 and grown("_count", "2") == 1
    assert grown("_sum", "2") == pytest.approx(0.2455)


def test_a_burst_beyond_what_is_held_is_summed_up_in_one_line():
    clock = Clock()
    log = gc_log.CollectorLog(clock=clock)
    for _ in range(gc_log.MAX_PENDING + 3):
        collect(log, clock, 1, 0.02)
    lines = log.take_lines()
    assert len(lines) == gc_log.MAX_PENDING + 1
    assert lines[-1] == "3 more collections of at least 10ms not logged"


def test_a_real_collection_is_counted():
    log = gc_log.CollectorLog()
    before, _ = scrape(Source([]))
    gc.callbacks.append(log.on_gc)
    try:
        gc.collect(2)
    finally:
        gc.callbacks.remove(log.on_gc)
    after, _ = scrape(Source([]))
    key = ("python_gc_collection_seconds_count", (("generation", "2"),))
    assert after[key] == before[key] + 1


def test_the_lines_go_to_their_own_file(tmp_path, clean_logging):
    logging_setup.configure(tmp_path)
    clock = Clock()
    log = gc_log.CollectorLog(clock=clock)
    collect(log, clock, 2, 0.3)
    collect(log, clock, 1, 0.05)
    log.write(logging.getLogger(gc_log.LOGGER_NAME))
    for h in logging.getLogger(gc_log.LOGGER_NAME).handlers:
        h.flush()
    lines = (tmp_path / "kafkaServer-gc.log").read_text().splitlines()
    assert len(lines) == 2 and all(line.endswith("(kafka_ha.gc)") for line in lines)
    assert "Pause generation 2 300.0ms" in lines[0] and "Pause generation 1 50.0ms" in lines[1]
    assert "Pause generation" not in (tmp_path / "server.log").read_text()
