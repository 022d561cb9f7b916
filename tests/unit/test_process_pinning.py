"""``pin_process``: every thread of a process moves to the cores given (benchmarks give a
client its own core with it)."""
import os
import subprocess
import sys
import time

import pytest

from kafka_ha.tools.processes import pin_process

THREADED = ("import threading, time\n"
            "for _ in range(3): threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
            "print('ready', flush=True); time.sleep(30)\n")


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to move threads between")
def test_every_thread_of_the_process_is_pinned_and_can_be_moved_back():
    child = subprocess.Popen([sys.executable, "-c", THREADED], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        tasks = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        assert len(tasks) == 4
        everything = set(range(os.cpu_count()))
        pin_process(child.pid, {1})
        assert all(os.sched_getaffinity(t) == {1} for t in tasks)
        pin_process(child.pid, everything)
        assert all(os.sched_getaffinity(t) == everything for t in tasks)
    finally:
        child.kill()
        child.wait()


def test_a_process_that_is_gone_is_the_callers_to_know():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    time.sleep(0.05)
    with pytest.raises(FileNotFoundError):   # gone entirely: the caller's to know
        pin_process(child.pid, {0})
