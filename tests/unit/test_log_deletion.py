"""Deleting a partition's log: rename first, remove later, never half a log that loads.

``delete_log`` renames ``<topic>-<p>`` to ``<topic>-<p>.<unique id>-delete``
(as Kafka does) and nothing else: the files are removed later, off the
request path, by ``delete_doomed_logs``, and their descriptors closed after
file.delete.delay.ms.  A directory ending in ``-delete`` is
never loaded; start-up queues it for removal.
"""
import os
import re
import shutil
import threading
import time

import pytest

from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log import LogConfig, LogManager
from kafka_ha.model import TopicPartition as TP
from kafka_ha.records import Record, build_v2_batch, decode_records

CONFIG = LogConfig(segment_bytes=4000, retention_ms=-1, file_delete_delay_ms=60000)
DOOMED = re.compile(r"^a-0\.[0-9a-f]{32}-delete$")


def batch(n=4):
    return build_v2_batch([Record(None, b"x" * 200, 1000)] * n)


@pytest.fixture
def log_dir(tmp_path):
    return str(tmp_path / "logs")


def manager_with_a_log(log_dir, batches=10):
    mgr = LogManager([log_dir], CONFIG)
    lg = mgr.get_or_create_log(TP("a", 0))
    for _ in range(batches):
        lg.append_as_leader(batch(), 0)
    return mgr, lg


def doomed_dirs(log_dir):
    return [n for n in os.listdir(log_dir) if DOOMED.match(n)]


class Crash(BaseException):
    """The process dies here: nothing after it runs, no handler catches it."""


def crash_on_unlink(monkeypatch, after):
    real = os.unlink
    calls = []

    def unlink(path, *args, **kwargs):
        if len(calls) == after:
            raise Crash()
        calls.append(path)
        return real(path, *args, **kwargs)
    monkeypatch.setattr(os, "unlink", unlink)


def open_files_under(path):
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue                                        # the descriptor of the listing itself
        if target.startswith(path):
            found.append(target)
    return found


def test_deleting_a_log_renames_it_and_removes_it_later(log_dir):
    mgr, lg = manager_with_a_log(log_dir)
    in_flight = lg.read(0, 10**6)                           # e.g. a fetch response still being sent
    assert mgr.delete_log(TP("a", 0))
    renamed_at = time.monotonic()
    assert mgr.get_log(TP("a", 0)) is None and not os.path.exists(os.path.join(log_dir, "a-0"))
    [doomed] = doomed_dirs(log_dir)                         # nothing removed on the request path
    doomed = os.path.join(log_dir, doomed)
    assert "00000000000000000000.log" in os.listdir(doomed)
    assert mgr.delete_doomed_logs(now=time.monotonic()) == 1
    assert doomed_dirs(log_dir) == []
    # file.delete.delay.ms: the descriptors stay open for what is still being sent
    assert next(decode_records(in_flight.to_bytes())).offset == 0 and open_files_under(doomed)
    assert mgr.delete_doomed_logs(now=renamed_at + 60) == 0
    assert open_files_under(doomed) == []
    mgr.close()


def test_a_partition_created_again_gets_a_new_empty_log(log_dir):
    mgr, _ = manager_with_a_log(log_dir)
    mgr.delete_log(TP("a", 0))
    again = mgr.get_or_create_log(TP("a", 0))
    assert (again.log_start_offset, again.log_end_offset) == (0, 0) and len(doomed_dirs(log_dir)) == 1
    mgr.close()


def test_a_crash_after_the_rename_loads_nothing_and_start_up_cleans_up(log_dir):
    mgr, _ = manager_with_a_log(log_dir)
    mgr.delete_log(TP("a", 0))                              # then the process dies: no close()
    restarted = LogManager([log_dir], CONFIG)
    assert restarted.all_logs() == {}
    assert restarted.delete_doomed_logs(now=0) == 1         # leftovers go at once: nobody reads them
    assert [n for n in os.listdir(log_dir) if os.path.isdir(os.path.join(log_dir, n))] == []
    restarted.close()


def test_a_crash_halfway_through_the_removal_never_leaves_half_a_log_that_loads(log_dir, monkeypatch):
    mgr, _ = manager_with_a_log(log_dir)
    with monkeypatch.context() as m:
        crash_on_unlink(m, after=2)                         # the first segment's files are gone
        with pytest.raises(Crash):
            mgr.delete_log(TP("a", 0))
            mgr.delete_doomed_logs(now=time.monotonic() + 60)
    restarted = LogManager([log_dir], CONFIG)
    assert restarted.get_log(TP("a", 0)) is None, "the rest of a deleted log must not come back"
    restarted.delete_doomed_logs(now=0)
    assert doomed_dirs(log_dir) == [] and not os.path.exists(os.path.join(log_dir, "a-0"))
    restarted.close()


def test_a_removal_that_fails_is_retried(log_dir, monkeypatch, caplog):
    mgr, _ = manager_with_a_log(log_dir)
    mgr.delete_log(TP("a", 0))
    later = time.monotonic() + 60

    def failing(path):
        raise PermissionError(13, "Permission denied", path)
    assert mgr.delete_doomed_logs(now=later, remove_tree=failing) == 0
    assert "Permission denied" in caplog.text and len(doomed_dirs(log_dir)) == 1
    assert mgr.delete_doomed_logs(now=later, remove_tree=shutil.rmtree) == 1
    assert doomed_dirs(log_dir) == []
    mgr.close()


def test_close_leaves_doomed_logs_for_the_next_start(log_dir):
    mgr, _ = manager_with_a_log(log_dir)
    mgr.delete_log(TP("a", 0))
    mgr.close()
    restarted = LogManager([log_dir], CONFIG)
    assert restarted.all_logs() == {} and len(doomed_dirs(log_dir)) == 1
    restarted.delete_doomed_logs(now=0)
    assert doomed_dirs(log_dir) == []
    restarted.close()


def test_the_broker_removes_deleted_logs_in_a_native_thread(log_dir, monkeypatch):
    mgr, _ = manager_with_a_log(log_dir)
    rm = ReplicaManager(BrokerConfig({"broker.id": 1, "zookeeper.connect": "127.0.0.1:1"}), mgr, None,
                        lambda t: 1, lambda t: CONFIG, lambda b: None)
    mgr.delete_log(TP("a", 0))
    removed_in = []
    real = shutil.rmtree
    monkeypatch.setattr(shutil, "rmtree", lambda path: (removed_in.append(threading.get_ident()), real(path)))
    rm._delete_doomed_logs()
    assert doomed_dirs(log_dir) == [] and removed_in and removed_in[0] != threading.get_ident()
    mgr.close()


def test_a_partition_created_again_never_inherits_the_old_logs_checkpointed_offsets(log_dir):
    mgr, lg = manager_with_a_log(log_dir)
    lg.maybe_increment_log_start_offset(22)
    mgr.flush_all()                                         # checkpointed: log start 22, recovery point 40
    mgr.delete_log(TP("a", 0))
    again = mgr.get_or_create_log(TP("a", 0))
    for _ in range(10):
        again.append_as_leader(batch(), 1)                  # then a crash before the next checkpoint
    restarted = LogManager([log_dir], CONFIG)
    assert restarted.get_log(TP("a", 0)).log_start_offset == 0, "offsets 0..21 of the new log hidden"
    restarted.close()
