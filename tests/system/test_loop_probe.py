"""The loop probe measures the broker, not the process that runs it.

The failover bench parses tens of megabytes of client debug log with regular
expressions while its probe runs, and a regular expression holds the GIL for as
long as it searches.  A probe that lived in threads of that process recorded the
search as a broker stall (2.5 s "stalls" on two brokers at once, after every
partition was writable again).  Here a stand-in broker in a process of its own
answers at once, and the test's process holds its GIL for a while: the probe must
not see that hold.
"""
from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_ha.tools.availability_probes import LoopProbe

pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]

# A server that answers every size-prefixed frame at once with an empty frame.
ANSWER_AT_ONCE = r"""
import socket, struct, threading
from tests.harness.raw_socket import recv_frame
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
print(server.getsockname()[1], flush=True)
def serve(conn):
    while True:
        try:
            recv_frame(conn)
        except (EOFError, OSError):
            return
        conn.sendall(struct.pack(">ii", 4, 0))
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


def hold_the_gil(seconds: float) -> float:
    """Run one regular-expression search (it keeps the GIL throughout) that lasts about
    ``seconds``; returns how long it really held it."""
    n = 18
    while True:
        started = time.monotonic()
        re.search(r"(a+)+b", "a" * n)              # backtracks 2**n times, in C
        took = time.monotonic() - started
        if took >= seconds:
            return took
        n += 1 if took > seconds / 4 else 2


@pytest.fixture
def quick_server():
    proc = subprocess.Popen([sys.executable, "-c", ANSWER_AT_ONCE], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()


def test_a_busy_parent_process_is_not_reported_as_a_broker_stall(quick_server):
    with socket.create_connection(("127.0.0.1", quick_server)):
        pass
    with LoopProbe({1: quick_server}, interval_s=0.02) as probe:
        time.sleep(0.3)
        started = time.time()
        held = hold_the_gil(2.0)
        time.sleep(0.3)
        summary = probe.summary(since=started)
    assert summary[1]["probes"] > 10           # it kept probing while the parent was busy
    # The server answered every probe at once; only the parent's GIL could delay it.
    assert summary[1]["max_ms"] < held * 1000 / 2, (summary, held)


def test_a_stopped_broker_is_no_longer_probed(quick_server):
    with LoopProbe({1: quick_server, 2: quick_server}, interval_s=0.02) as probe:
        time.sleep(0.2)
        probe.stop_broker(2)
        stopped = time.time() + 0.1
        time.sleep(0.3)
        after = probe.summary(since=stopped)
    assert set(after) == {1}


def wait_for_probes(probe: LoopProbe, broker: int, at_least: int) -> None:
    deadline = time.monotonic() + 30
    while probe.summary().get(broker, {}).get("probes", 0) < at_least:
        assert time.monotonic() < deadline, "the probe did not probe"
        time.sleep(0.05)


def test_the_samples_stay_readable_after_the_probe_stopped(quick_server):
    with LoopProbe({1: quick_server}, interval_s=0.02) as probe:
        wait_for_probes(probe, 1, 4)
    summary = probe.summary()
    assert summary[1]["probes"] > 3
    assert probe.summary() == summary           # nothing more arrives once it stopped
