"""kafka-consumer-groups.sh's pure parts: the reset plan of every mode, Kafka's table
layouts, and the checks of its options."""
import struct

import pytest

from kafka_ha.tools import consumer_group_reset as reset
from kafka_ha.tools import consumer_group_views as views
from kafka_ha.tools.consumer_groups import parse_args

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)
STARTS = {A0: 10, A1: 0, B0: 5}
ENDS = {A0: 100, A1: 50, B0: 5}
COMMITTED = {A0: 40, A1: 45}


def plan(mode, value=None, partitions=(A0, A1), by_time=None):
    return reset.plan(mode, value, list(partitions), COMMITTED, STARTS, ENDS, by_time)


def test_to_earliest_and_to_latest_take_the_log_start_and_end():
    assert plan("to-earliest").offsets == {A0: 10, A1: 0}
    assert plan("to-latest").offsets == {A0: 100, A1: 50}


def test_to_offset_is_clamped_into_the_log_with_kafkas_warning():
    planned = plan("to-offset", 60)
    assert planned.offsets == {A0: 60, A1: 50}
    assert planned.warnings == ["New offset (60) is higher than latest offset for topic "
                                "partition a-1. Value will be set to 50"]
    low = plan("to-offset", 3)
    assert low.offsets == {A0: 10, A1: 3}
    assert "lower than earliest offset for topic partition a-0" in low.warnings[0]


def test_shift_by_moves_the_committed_offset_and_needs_one():
    assert plan("shift-by", -5).offsets == {A0: 35, A1: 40}
    assert plan("shift-by", 10).offsets == {A0: 50, A1: 50}   # a-1 clamped at its end
    with pytest.raises(reset.ResetError, match="no current committed offset"):
        plan("shift-by", 1, partitions=(A0, B0))


def test_to_datetime_takes_the_first_offset_at_the_time_or_the_log_end():
    assert plan("to-datetime", by_time={A0: 70, A1: -1}).offsets == {A0: 70, A1: 50}


def test_topic_arguments_and_datetimes_parse_as_kafka_writes_them():
    assert reset.parse_topics(["a:1,0", "b"]) == ([("a", 1), ("a", 0)], ["b"])
    assert reset.parse_datetime("2020-01-01T00:00:00.000Z") == 1577836800000
    assert reset.parse_datetime("2020-01-01T02:00:00.000+02:00") == 1577836800000
    for bad in ("2020-01-01", "2020-01-01 00:00:00.000", "yesterday"):
        with pytest.raises(reset.ResetError, match="YYYY-MM-DDTHH:mm:SS.sss"):
            reset.parse_datetime(bad)


def assignment(*tps):
    topics = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    raw = struct.pack(">hi", 0, len(topics))
    for t, ps in topics.items():
        raw += struct.pack(">h", len(t)) + t.encode() + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return raw + struct.pack(">i", -1)


MEMBERS = [{"member_id": "m-short", "client_id": "c1", "client_host": "/127.0.0.1",
            "member_assignment": assignment(("a", 1))},
           {"member_id": "consumer-with-a-long-member-id", "client_id": "c2",
            "client_host": "/127.0.0.1", "member_assignment": assignment(("a", 0), ("b", 0))}]


def test_offset_rows_list_the_busiest_member_first_then_unowned_commits():
    rows = views.offset_rows("g", MEMBERS, {A0: 40, A1: 45, ("c", 3): 7}, {A0: 100, A1: 50})
    assert [(r[1], r[2], r[6]) for r in rows] == [
        ("a", 0, "consumer-with-a-long-member-id"), ("b", 0, "consumer-with-a-long-member-id"),
        ("a", 1, "m-short"), ("c", 3, "-")]
    assert rows[0][3:6] == (40, 100, 60) and rows[1][3:6] == (None, None, None)
    lines = views.offset_lines(rows)
    assert lines[0] == "" and lines[1].split() == list(views.OFFSET_HEADER)
    # Columns at least 15 wide, the consumer id as wide as the longest one.
    assert lines[1].index("TOPIC") == 16 and lines[1].index("PARTITION") == 32
    assert lines[1].index("HOST") - lines[1].index("CONSUMER-ID") == 31
    assert lines[2].split()[3:6] == ["40", "100", "60"] and lines[3].split()[3:6] == ["-"] * 3


def test_member_lines_show_partition_counts_and_with_verbose_the_assignment():
    plain = views.member_lines("g", MEMBERS, verbose=False)
    assert plain[1].split() == list(views.MEMBER_HEADER) and plain[1].endswith("#PARTITIONS     ")
    assert plain[2].split()[-1] == "1" and plain[3].split()[-1] == "2"
    verbose = views.member_lines("g", MEMBERS, verbose=True)
    assert verbose[1].split()[-1] == "ASSIGNMENT"
    assert verbose[3].endswith(" a(0), b(0)") and verbose[2].endswith(" a(1)")


def test_state_and_reset_lines_use_kafkas_fixed_widths():
    lines = views.state_lines("g", (2, "127.0.0.1", 9093), "range", "Stable", 3)
    assert lines[2].split() == ["g", "127.0.0.1:9093", "(2)", "range", "Stable", "3"]
    assert lines[1].index("COORDINATOR") == 26 and lines[1].index("ASSIGNMENT") == 52
    plan_lines = views.reset_plan_lines([("g", "a", 0, 10)])
    assert plan_lines[1].index("TOPIC") == 31 and plan_lines[2].index("10") == 73


@pytest.mark.parametrize("argv,message", [
    ([], "exactly one action"),
    (["--list", "--describe"], "exactly one action"),
    (["--describe"], "Option [describe] takes option [group]"),
    (["--describe", "--group", "g", "--members", "--state"], "at most one of these options"),
    (["--describe", "--group", "g", "--topic", "t"], "can't be used with option \"[describe]\""),
    (["--list", "--members"], "[members] can be used with [describe] only"),
    (["--delete", "--group", "g", "--topic", "t"], "topic-specific offset deletion"),
    (["--reset-offsets", "--group", "g", "--all-topics"], "requires one of the following scenarios"),
    (["--reset-offsets", "--group", "g", "--to-earliest"], "One of the reset scopes"),
    (["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--shift-by", "1"],
     "\"[to-earliest]\" can't be used with option \"[shift-by]\""),
    (["--reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--execute",
      "--dry-run"], "only accepts one of [execute] and [dry-run]"),
    (["--describe", "--group", "g", "--execute"], "[execute] can be used with [reset-offsets]"),
])
def test_bad_option_combinations_die_with_a_clear_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--bootstrap-server", "h:1"] + argv)
    assert exit_.value.code == 1 and message in capsys.readouterr().err


def test_reset_without_execute_or_dry_run_plans_and_warns(capsys):
    args = parse_args(["--bootstrap-server", "h:1", "--reset-offsets", "--group", "g",
                       "--topic", "a:0", "--to-offset", "5"])
    assert (args.mode, args.to_offset, args.execute) == ("to-offset", 5, False)
    assert "No action will be performed" in capsys.readouterr().err
