"""Idempotent producers' batches on a partition: the leader's decision, table-style
(producer_state.check_batch), and the state kept in step with a real log."""
import pytest

from kafka_ha.broker.producer_state import (MAX_SEQUENCE, BatchMetadata, ProducerBatch,
                                            ProducerStates, check_batch)
from kafka_ha.broker.producer_state_log import LogProducers
from kafka_ha.protocol.errors import ErrorCode as E
from kafka_ha.records import Record, build_v2_batch
from tests.harness.leader_setup import open_log

PID = 7
# The producer's cached batches: epoch 2, sequences 0-9 at offsets 100-109, 10-14 at 110-114.
CACHED = (BatchMetadata(2, 0, 9, 100, 109), BatchMetadata(2, 10, 14, 110, 114))


@pytest.mark.parametrize("cached, epoch, seq, count, error, duplicate_of", [
    # a producer this partition has never seen
    ((), 0, 0, 5, E.NONE, None),
    ((), 3, 0, 5, E.NONE, None),
    ((), 0, 5, 5, E.UNKNOWN_PRODUCER_ID, None),
    # the next batch, in sequence
    (CACHED, 2, 15, 1, E.NONE, None),
    # retries of batches it holds: their offsets, nothing appended
    (CACHED, 2, 0, 10, E.NONE, 100),
    (CACHED, 2, 10, 5, E.NONE, 110),
    # a range that overlaps a cached one but is not one: not a duplicate
    (CACHED, 2, 10, 3, E.OUT_OF_ORDER_SEQUENCE_NUMBER, None),
    # a gap, and a step back
    (CACHED, 2, 16, 1, E.OUT_OF_ORDER_SEQUENCE_NUMBER, None),
    (CACHED, 2, 5, 1, E.OUT_OF_ORDER_SEQUENCE_NUMBER, None),
    # a fenced (older) epoch, even with a cached sequence range
    (CACHED, 1, 15, 1, E.INVALID_PRODUCER_EPOCH, None),
    (CACHED, 1, 0, 10, E.INVALID_PRODUCER_EPOCH, None),
    # a new epoch starts at 0
    (CACHED, 3, 0, 1, E.NONE, None),
    (CACHED, 3, 15, 1, E.OUT_OF_ORDER_SEQUENCE_NUMBER, None),
    # sequences wrap after 2**31 - 1
    ((BatchMetadata(2, MAX_SEQUENCE - 1, MAX_SEQUENCE, 0, 1),), 2, 0, 1, E.NONE, None),
])
def test_check_batch(cached, epoch, seq, count, error, duplicate_of):
    decision = check_batch(cached, ProducerBatch(PID, epoch, seq, count))
    assert decision.error == error
    assert (decision.duplicate and decision.duplicate.first_offset) == duplicate_of
    if error != E.NONE:
        assert str(PID) in decision.message


def test_a_batch_without_producer_id_is_always_appended():
    assert check_batch(CACHED, ProducerBatch(-1, -1, -1, 3)).error == E.NONE


def test_only_the_last_five_batches_are_recognized_as_retries():
    states = ProducerStates()
    for i in range(6):
        states.record(ProducerBatch(PID, 0, i * 2, 2), i * 2)
    assert states.check_all([ProducerBatch(PID, 0, 2, 2)]).duplicate.first_offset == 2
    assert states.check_all([ProducerBatch(PID, 0, 0, 2)]).error == E.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_batches_of_one_record_set_are_checked_as_if_the_earlier_ones_were_appended():
    states = ProducerStates()
    assert states.check_all([ProducerBatch(PID, 0, 0, 2), ProducerBatch(PID, 0, 2, 1)]).error == E.NONE
    assert states.check_all([ProducerBatch(PID, 0, 0, 2), ProducerBatch(PID, 0, 3, 1)]).error == \
        E.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_new_epoch_forgets_the_old_epochs_batches():
    states = ProducerStates()
    states.record(ProducerBatch(PID, 0, 0, 5), 0)
    states.record(ProducerBatch(PID, 1, 0, 2), 5)
    assert states.batches(PID) == (BatchMetadata(1, 0, 1, 5, 6),)


def test_truncation_keeps_what_is_below_the_log_end_or_asks_for_a_rebuild():
    states = ProducerStates()
    states.record(ProducerBatch(PID, 0, 0, 5), 0)     # offsets 0-4
    states.record(ProducerBatch(8, 0, 0, 1), 5)       # 5
    states.record(ProducerBatch(PID, 0, 5, 5), 6)     # 6-10
    assert states.truncate(11)
    assert states.batches(PID)[-1].last_sequence == 9
    assert states.truncate(8)
    assert states.batches(PID) == (BatchMetadata(0, 0, 4, 0, 4),)
    assert states.check_all([ProducerBatch(8, 0, 1, 1)]).error == E.NONE
    # producer 8 loses the only batch cached: what came before it is unknown here
    assert not states.truncate(5)


def idempotent(pid, epoch, seq, n=2):
    return build_v2_batch([Record(None, b"v%d" % i) for i in range(n)], producer=(pid, epoch, seq))


def test_the_state_is_rebuilt_from_the_log_and_follows_appends_and_truncation(tmp_path):
    log_ = open_log(tmp_path)
    try:
        log_.append_as_leader(idempotent(PID, 0, 0), 1)                # offsets 0-1
        log_.append_as_leader(build_v2_batch([Record(None, b"x")]), 1)  # 2: no producer id
        log_.append_as_leader(idempotent(PID, 0, 2), 1)                # 3-4
        producers = LogProducers(log_, "t-0")
        # the first need scans the log: a retry of the batch at 3-4 gets its offsets
        decision, _ = producers.check(idempotent(PID, 0, 2))
        assert decision.duplicate.first_offset == 3
        decision, batches = producers.check(idempotent(PID, 0, 4))
        assert decision.error == E.NONE
        producers.appended(batches, log_.append_as_leader(idempotent(PID, 0, 4), 1).first_offset)
        assert producers.check(idempotent(PID, 0, 4))[0].duplicate.first_offset == 5
        # a truncation below that batch: the producer is expected at sequence 4 again
        log_.truncate_to(5)
        producers.truncated(log_.log_end_offset)
        assert producers.check(idempotent(PID, 0, 4))[0].duplicate is None
        assert producers.check(idempotent(PID, 0, 6))[0].error == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        # a truncation below everything the producer had: rebuilt from what is left
        log_.truncate_to(1)
        producers.truncated(log_.log_end_offset)
        assert producers.check(idempotent(PID, 0, 0))[0].error == E.NONE
    finally:
        log_.close()


def test_a_follower_records_the_batches_it_appends(tmp_path):
    leader_log, follower_log = open_log(tmp_path / "l"), open_log(tmp_path / "f")
    try:
        follower = LogProducers(follower_log, "t-0")
        assert len(follower.states()) == 0           # built (empty), so appends are recorded
        for seq in (0, 2):
            info = leader_log.append_as_leader(idempotent(PID, 0, seq), 1)
            data = leader_log.read(info.first_offset, 1 << 20).to_bytes()
            follower_log.append_as_follower(data)
            follower.appended_as_follower(data)
        assert follower.check(idempotent(PID, 0, 2))[0].duplicate.first_offset == 2
        assert follower.check(idempotent(PID, 1, 5))[0].error == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    finally:
        leader_log.close()
        follower_log.close()


def pausing_at_entry(monkeypatch, meanwhile, at=0):
    """The rebuild's scan pauses after its entry ``at``, and ``meanwhile`` runs there,
    as another greenlet would (once)."""
    import kafka_ha.broker.producer_state_log as module
    calls = []

    def yielding(items):
        for i, item in enumerate(items):
            yield item
            if i == at and not calls:
                calls.append(1)
                meanwhile()
    monkeypatch.setattr(module, "yielding", yielding)


def test_appends_while_the_rebuild_pauses_are_in_the_state(tmp_path, monkeypatch):
    log_ = open_log(tmp_path)
    try:
        for seq in (0, 2, 4):
            log_.append_as_leader(idempotent(PID, 0, seq), 1)            # offsets 0-5
        producers = LogProducers(log_, "t-0")
        pausing_at_entry(monkeypatch, lambda: [
            log_.append_as_leader(idempotent(PID, 0, 6), 1),             # 6-7, appended as a leader
            log_.append_as_leader(idempotent(9, 0, 0), 1)])              # 8-9, would be without state
        assert producers.check(idempotent(PID, 0, 6))[0].duplicate.first_offset == 6
        assert producers.check(idempotent(9, 0, 0))[0].duplicate.first_offset == 8
        assert producers.check(idempotent(PID, 0, 8))[0].error == E.NONE
    finally:
        log_.close()


def test_a_truncation_while_the_rebuild_pauses_starts_it_over(tmp_path, monkeypatch):
    log_ = open_log(tmp_path)
    try:
        for seq in (0, 2, 4):
            log_.append_as_leader(idempotent(PID, 0, seq), 1)            # offsets 0-5
        producers = LogProducers(log_, "t-0")

        def truncate():
            log_.truncate_to(2)
            producers.truncated(log_.log_end_offset)
        # the scan has seen the batch at 2-3 when the truncation removes it
        pausing_at_entry(monkeypatch, truncate, at=1)
        assert producers.check(idempotent(PID, 0, 2))[0].duplicate is None
        assert producers.check(idempotent(PID, 0, 4))[0].error == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    finally:
        log_.close()
