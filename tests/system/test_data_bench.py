"""The data benchmark's same-run baselines (real processes on loopback) and its CPU accounting."""
from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time

import pytest

from kafka_ha.tools.data_baselines import relay_floor
from kafka_ha.tools.processes import children_cpu_seconds, process_cpu_seconds

pytestmark = pytest.mark.system


def test_relay_floor_measures_every_message_and_leaves_no_process_behind():
    result = relay_floor(200)       # raises if a message comes back altered
    assert result["messages"] == 200
    assert 0 < result["p50"] <= result["p99"] <= result["p999"]
    assert result["avg"] > 0
    # The relay processes end when the client hangs up (they are joined, not killed).
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]


def test_cpu_accounting_sees_a_waited_child_and_a_live_process():
    before = children_cpu_seconds()
    subprocess.run([sys.executable, "-c", "x = 0\nfor i in range(3_000_000): x += i"], check=True)
    assert children_cpu_seconds() > before
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline = time.monotonic() + 30
        while process_cpu_seconds(burner.pid) < 0.05:     # clock ticks are 10 ms
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        burner.kill()
        burner.wait()


def test_the_null_sink_takes_a_confluent_producers_records_and_acknowledges_them_all():
    """The ceiling is only a ceiling if the sink is a real protocol peer: librdkafka must
    negotiate, load metadata, and get every record acknowledged (else produce_run raises)."""
    pytest.importorskip("confluent_kafka")
    from kafka_ha.tools.client_ceiling import SinkProcess, produce_in_child

    with SinkProcess(partitions=3) as sink:
        result = produce_in_child(sink.bootstrap, "ceiling", 20000, 100, "all")
    assert result["msgs_s"] > 0 and result["mb_s"] > 0
    assert result["producer_cpu_ms_per_mb"] > 0


def test_the_null_sink_holds_each_produce_answer_for_its_delay():
    """The idempotence bench's model of a replicated write: a sink that answers each Produce
    only after a fixed delay (a lower bound, so a slow machine cannot fail it)."""
    pytest.importorskip("confluent_kafka")
    from kafka_ha.tools.client_ceiling import SinkProcess, produce_in_child

    with SinkProcess(partitions=1, answer_delay_ms=400) as sink:
        result = produce_in_child(sink.bootstrap, "slow", 3, 100, "all", idempotence=True,
                                  settings={"linger.ms": 0})
    assert result["seconds"] >= 0.4
