"""Logs opened in gevent's threadpool at start-up (kafka_ha/broker/log_loading.py) and the
log manager's runner for it (kafka_ha/log/log_manager.py)."""

import logging
import threading

import pytest

from kafka_ha.broker.log_loading import BATCH, RecordsFromThreads, run_in_threads
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import TopicPartition
from kafka_ha.records.builder import Record, build_v2_batch

log = logging.getLogger("kafka_ha.log.test_log_loading")


def test_results_come_back_in_order_from_threads_other_than_the_callers():
    caller = threading.get_ident()
    threads = set()

    def opener(i):
        def open_():
            threads.add(threading.get_ident())
            return i
        return open_
    n = BATCH * 5 + 3
    assert run_in_threads([opener(i) for i in range(n)], threads=3) == list(range(n))
    assert caller not in threads


def test_the_first_error_of_an_opener_is_raised():
    def broken():
        raise OSError("bad index")
    with pytest.raises(OSError, match="bad index"):
        run_in_threads([lambda: 1] * BATCH + [broken] + [lambda: 2] * BATCH, threads=2)


def test_records_logged_on_pool_threads_reach_the_handlers_on_the_callers_thread(caplog):
    seen_on = []

    class Where(logging.Handler):
        def emit(self, record):
            seen_on.append((record.getMessage(), threading.get_ident()))
    handler = Where()
    log.addHandler(handler)
    try:
        def opener(i):
            def open_():
                log.warning("opened %d", i)
                return i
            return open_
        run_in_threads([opener(i) for i in range(BATCH * 2)], threads=2)
    finally:
        log.removeHandler(handler)
    assert [m for m, _ in seen_on] == [f"opened {i}" for i in range(BATCH * 2)]
    assert {t for _, t in seen_on} == {threading.get_ident()}
    assert not any(isinstance(f, RecordsFromThreads) for f in log.filters)   # uninstalled


def test_a_log_manager_gets_the_logs_its_runner_opens(tmp_path):
    first = LogManager([str(tmp_path)], LogConfig())
    for p in range(3):
        first.get_or_create_log(TopicPartition("t", p)).append_as_leader(
            bytearray(build_v2_batch([Record(None, b"v")] * (p + 1))), 0)
    first.close()
    runs = []

    def runner(openers):
        runs.append(len(openers))
        return run_in_threads(openers, threads=2)
    again = LogManager([str(tmp_path)], LogConfig(), open_logs=runner)
    assert runs == [3]
    assert {tp.partition: lg.log_end_offset for tp, lg in again.all_logs().items()} == {0: 1, 1: 2, 2: 3}
    again.close()


def test_the_event_loop_runs_while_logs_open():
    """What issue 23's broker lacked: other greenlets (its ZooKeeper heartbeats) run while
    the logs open.  Run on the loop, the openers would leave no room for a tick between
    the first opener's start and the last one's end."""
    import time

    import gevent
    events = []

    def ticker():
        while True:
            events.append("tick")
            gevent.sleep(0.005)

    def opener(i):
        def open_():
            events.append(f"open {i}")
            time.sleep(0.02)          # file work: this thread, not the loop, waits
            events.append(f"opened {i}")
            return i
        return open_
    ticks = gevent.spawn(ticker)
    try:
        gevent.sleep(0)
        run_in_threads([opener(i) for i in range(BATCH + 1)], threads=1)
    finally:
        ticks.kill()
    during = events[events.index("open 0"):events.index(f"opened {BATCH}")]
    assert "tick" in during


def test_a_run_of_info_lines_from_the_threads_reaches_the_handlers_as_one_record():
    """A broker loading 10,000 logs logged a line for each: 10,000 records through the
    file handler's format, rollover check and flush on the loop's thread, which the
    loading threads waited on.  A run of INFO lines of one logger goes as one record of
    those lines (the broker's formatter prefixes each line); a warning stays its own."""
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append((record.levelname, record.getMessage()))
    handler = Keep()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        def opener(i):
            def open_():
                if i == 5:
                    log.warning("odd file in %d", i)
                log.info("loaded %d", i)
                return i
            return open_
        run_in_threads([opener(i) for i in range(BATCH)], threads=1)
    finally:
        log.removeHandler(handler)
        log.setLevel(logging.NOTSET)
    assert records == [("INFO", "\n".join(f"loaded {i}" for i in range(5))),
                       ("WARNING", "odd file in 5"),
                       ("INFO", "\n".join(f"loaded {i}" for i in range(5, BATCH)))]


def test_what_start_up_loaded_is_left_out_of_later_garbage_collections(tmp_path):
    """Applying a LeaderAndIsr for the 10,000 partitions of the logs a broker had just
    loaded spent most of its time in collections that walked those logs' objects again
    and again (1.2-1.4 s applied, 0.7-0.9 s with them frozen)."""
    import gc

    from kafka_ha.broker.log_loading import load_logs
    gc.unfreeze()
    try:
        manager = load_logs(lambda open_logs: LogManager([str(tmp_path)], LogConfig(),
                                                         open_logs=open_logs), threads=1)
        assert gc.get_freeze_count() > 0
        manager.close()
    finally:
        gc.unfreeze()
