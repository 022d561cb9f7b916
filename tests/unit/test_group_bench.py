"""The group benchmark's pure parts: the members' range assignment and when a group
counts as settled, and how results become tables and ratios."""
from kafka_ha.tools.consumer_group_views import decode_assignment
from kafka_ha.tools.group_bench import GroupBench, ratios, tables
from kafka_ha.tools.group_members import range_assign, subscription


class Seen:
    def __init__(self, synced, sizes=None):
        self.synced = dict.fromkeys(synced, 0.0)
        self.group_sizes = sizes or {}


def test_range_assignment_covers_every_partition_once():
    members = [f"m{i}" for i in range(4)]
    got = {m: decode_assignment(a) for m, a in range_assign(members, "t", 6).items()}
    assert got == {"m0": [("t", 0), ("t", 1)], "m1": [("t", 2), ("t", 3)], "m2": [("t", 4)],
                   "m3": [("t", 5)]}
    more = range_assign([f"m{i}" for i in range(8)], "t", 6)
    assert sum(len(decode_assignment(a)) for a in more.values()) == 6
    assert subscription(["t"]) == b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"


def test_a_group_is_settled_when_all_have_synced_a_generation_of_their_size():
    leader, other = Seen({1, 2}, {1: 3, 2: 2}), Seen({1, 2})
    assert GroupBench.settled([leader, other]) == 2
    assert GroupBench.settled([leader, other], after_generation=2) is None
    assert GroupBench.settled([leader, other, Seen({1})]) == 1
    assert GroupBench.settled([leader, Seen({1})]) is None   # generation 1 had 3 members


def test_results_become_tables_and_ratios():
    results = {"rebalances": [{"members": 3, "formation_ms": 3100.0, "formation_generations": 1,
                               "formation_floor_ms": 3000, "failure_ms": 8000.0,
                               "failure_generations": 1, "failure_floor_ms": 6000,
                               "member_errors": {}}],
               "commits": [{"committers": 1, "commits": 10, "failed": 0, "seconds": 1.0,
                            "per_second": 10.0, "p50_ms": 1.0, "p99_ms": 2.0}],
               "reads": {"best": {
                   "assign": {"per_second": 100.0, "mb_per_second": 1.0, "assigned_ms": 0,
                              "first_record_ms": 5},
                   "group": {"per_second": 90.0, "mb_per_second": 0.9, "assigned_ms": 3000,
                             "first_record_ms": 3005}}}}
    rebalance, commits, reads = tables(results)
    assert rebalance.rows[1] == [3, "member killed", 6000, 8000.0, 2000.0, 1]
    assert [r[0] for r in reads.rows] == ["assign()", "group (subscribe())"]
    assert [r["ratio"] for r in ratios(results)] == [1.0333, 1.3333, 0.9]
