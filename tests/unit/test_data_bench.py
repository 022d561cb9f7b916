"""The data benchmark's same-run baselines (real processes on loopback)."""
from __future__ import annotations

import multiprocessing

from kafka_ha.tools.data_bench import relay_floor


def test_relay_floor_measures_every_message_and_leaves_no_process_behind():
    result = relay_floor(200)       # raises if a message comes back altered
    assert result["messages"] == 200
    assert 0 < result["p50"] <= result["p99"] <= result["p999"]
    assert result["avg"] > 0
    # The relay processes end when the client hangs up (they are joined, not killed).
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]
