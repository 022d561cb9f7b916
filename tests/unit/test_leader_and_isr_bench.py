"""The LeaderAndIsr benchmark's measurement, at a size a unit test affords: it applies what it
says it applies (a third led, the rest followed, then a failover to this broker) and leaves
every log on disk once the deferred pass has run."""
import cProfile

import pytest

from kafka_ha.tools.leader_and_isr_bench import apply_once, breakdown, request


def test_the_request_spreads_leaders_over_three_brokers():
    states = request(6)["partition_states"]
    assert [s["leader"] for s in states] == [1, 2, 3, 1, 2, 3]
    assert all(s["leader"] == 1 and s["leader_epoch"] == 2 for s in request(6, 2, leader=1)["partition_states"])


def test_apply_once_measures_both_rounds(tmp_path):
    profile = cProfile.Profile()
    result = apply_once(str(tmp_path), 30, profile)
    assert (result["led"], result["followed"]) == (10, 20)
    assert {"apply_ms", "deferred_pass_ms", "failover_apply_ms", "longest_stall_ms"} <= set(result)
    steps, own = breakdown(profile, 5)
    assert steps[0][0] == "the whole request" and steps[0][2] == pytest.approx(100)
    assert "creating the logs" in [step for step, _, _ in steps] and len(own) == 5
