"""Rack-aware replica assignment (Kafka's AdminUtils.assignReplicasToBrokersRackAware)."""
from collections import Counter

import pytest

from kafka_ha.admin.assignment import (
    InvalidReplicaAssignment, assign_replicas, assign_replicas_rack_aware, rack_alternated)
from kafka_ha.admin.reassign_command import generate, with_racks
from kafka_ha.model import TopicPartition

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_kafka_s_own_example():
    """AdminRackAwareTest's expectations for these six brokers on three racks."""
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas_rack_aware(RACKS, 7, 3) == {
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3),
        6: (0, 4, 2)}


@pytest.mark.parametrize("racks, partitions, rf", [
    ({1: "a", 2: "b", 3: "c"}, 12, 3),
    ({1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}, 30, 3),
    ({1: "a", 2: "a", 3: "a", 4: "b"}, 8, 2),                 # uneven racks
    ({1: "a", 2: "b"}, 4, 2),
])
def test_every_partition_spans_as_many_racks_as_it_can_and_leaders_spread(racks, partitions, rf):
    plan = assign_replicas(racks, partitions, rf)
    n_racks = len(set(racks.values()))
    for replicas in plan.values():
        assert len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == min(rf, n_racks)
    leaders = Counter(replicas[0] for replicas in plan.values())
    assert max(leaders.values()) - min(leaders[b] for b in racks) <= 1


def test_racks_must_be_all_or_none_unless_safe_mode():
    with pytest.raises(InvalidReplicaAssignment, match="Not all brokers have rack information"):
        assign_replicas({1: "a", 2: None, 3: "b"}, 3, 2)
    assert assign_replicas({1: "a", 2: None, 3: "b"}, 3, 2, rack_aware=False) == \
        assign_replicas([1, 2, 3], 3, 2)
    assert assign_replicas({1: None, 2: None}, 2, 2) == assign_replicas([1, 2], 2, 2)


def test_generate_proposes_a_rack_aware_assignment(capsys):
    current = {TopicPartition("t", p): (1, 2) for p in range(4)}
    generate(current, with_racks([1, 2, 3, 4], {1: "a", 2: "a", 3: "b", 4: "b"}), None)
    proposed = capsys.readouterr().out.split("Proposed partition reassignment configuration")[1]
    import json
    plan = json.loads(proposed.strip())
    for entry in plan["partitions"]:
        assert {1: "a", 2: "a", 3: "b", 4: "b"}[entry["replicas"][0]] != \
            {1: "a", 2: "a", 3: "b", 4: "b"}[entry["replicas"][1]]
