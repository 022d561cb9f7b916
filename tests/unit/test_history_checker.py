"""The history checker of the system tests (tests.harness.load.judge) on made-up histories:
each kind of damage it exists to report is reported, and a clean history is clean."""

from kafka_ha.client.consumer import ConsumerRecord
from tests.harness.load import judge


def records(*placed):
    """ConsumerRecords from (partition, offset, value) triples."""
    return [ConsumerRecord("t", p, o, 0, None, v) for p, o, v in placed]


def clean_log():
    """Values 0..5 sent, alternating between partitions 0 and 1, each acked where it is."""
    acked = {n: (n % 2, n // 2) for n in range(6)}
    return records(*((p, o, b"%d" % n) for n, (p, o) in acked.items())), acked


def test_a_clean_history_is_clean():
    log, acked = clean_log()
    assert judge(log, 6, acked) == (6, [], {}, [], {}, 6, 0)


def test_an_acknowledged_value_overwritten_or_missing_is_lost():
    log, acked = clean_log()
    log[2] = log[2]._replace(value=b"4")   # offset (0, 1) now holds 4 (and 4 a second copy)
    del log[5]                             # 5, acked at (1, 2), is gone
    history = judge(log, 6, acked)
    assert history.lost == {2: (0, 1), 5: (1, 2)}
    assert history.surviving == 4 and history.unseen == 2
    assert history.duplicates == {0: 1}


def test_first_copies_out_of_send_order_are_reordered():
    log, acked = clean_log()
    swapped = records((0, 0, b"2"), (0, 1, b"0"), (0, 2, b"4"))
    history = judge(swapped + log[1::2], 6, {})
    assert history.reordered == [(0, 1, 0, 2)]
    assert not history.corrupt and not history.duplicates


def test_damaged_unsent_or_misplaced_values_are_corrupt():
    log, acked = clean_log()
    damaged = records((0, 3, b"garbage"), (0, 4, b"17"), (0, 5, None), (0, 6, b"1"))
    history = judge(log + damaged, 6, acked)
    # b"1" was acknowledged in partition 1, so partition 0 cannot hold it.
    assert [offset for _, offset, _ in history.corrupt] == [3, 4, 5, 6]
    assert history.lost == {} and history.surviving == 6


def test_acks0_values_carry_no_offset_and_can_only_be_unseen():
    acked = {n: (0, -1) for n in range(4)}
    history = judge(records((0, 0, b"0"), (0, 1, b"2"), (0, 2, b"2")), 4, acked)
    assert history.lost == {} and history.surviving == 0
    assert history.unseen == 2 and history.duplicates == {0: 1}
    assert judge(records((1, 0, b"3")), 4, acked).corrupt == [(1, 0, b"3")]
