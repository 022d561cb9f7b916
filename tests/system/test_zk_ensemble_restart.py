"""``Ensemble.kill`` then ``start_node``: the restart must start a new process.

A multi-threaded process that is being killed goes through a window in which its main
thread is already a zombie ("Z" in /proc/<pid>/status) while its other threads are still
exiting.  The kernel will not let the parent reap it until the last thread is gone, so
its ``Popen`` still reports it running.  A SIGSTOPped ZooKeeper JVM hit by SIGKILL spends
a few milliseconds there (seen in /proc with 2 threads left); ``kill()`` used to stop
waiting as soon as /proc said "Z", ``start_node()`` then found the old process "running"
and started nothing, and ``wait_ready()`` failed with "zk-N exited during startup" when
the old process was finally reaped (the CI flake of the hung-ZooKeeper-server test).

The stand-in below holds that window open for a second, so no real JVM is needed: its
main thread exits at once (pthread_exit, leaving the process "Z" with one live thread),
and its other thread waits for SIGTERM and takes a second to exit after it.
"""

import signal
import sys

import pytest

from kafka_ha.tools.zk_ensemble import Ensemble
from tests.harness.cluster import wait_until
from tests.harness.ports import free_port_block

pytestmark = pytest.mark.system

# The thread that takes SIGTERM blocks it and collects it with sigwait; the main thread
# blocks it too, before it exits, so the signal can only go to that thread.
EXITS_SLOWLY = """
import ctypes, os, signal, threading, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
def exit_slowly():
    signal.sigwait({signal.SIGTERM})
    time.sleep(1.0)
    os._exit(0)
threading.Thread(target=exit_slowly).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def proc_state(pid):
    """The one-letter state of ``pid`` in /proc ('' once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(line.split()[1] for line in f if line.startswith("State:"))
    except OSError:
        return ""


def slowly_exiting_node(tmp_path, monkeypatch):
    ens = Ensemble(tmp_path / "zk", nodes=1, zk_port=free_port_block([0]))
    ens.dir.mkdir(parents=True)
    monkeypatch.setattr(ens, "_command", lambda i: [sys.executable, "-c", EXITS_SLOWLY])
    return ens


def test_restart_after_kill_starts_a_new_process(tmp_path, monkeypatch):
    ens = slowly_exiting_node(tmp_path, monkeypatch)
    try:
        old = ens.start_node(1)
        # The window is open: /proc says zombie, yet the process runs and cannot be reaped.
        wait_until(lambda: proc_state(old) == "Z", timeout=30,
                   message="the stand-in's main thread did not exit")
        assert ens.node_pid(1) == old

        ens.kill(1, signal.SIGTERM)
        assert ens.node_pid(1) is None, "kill() returned while the node was still exiting"
        new = ens.start_node(1)
        assert new != old, "start_node() found the killed node still exiting and started nothing"
    finally:
        ens.stop()
    assert ens.node_pid(1) is None


def test_stop_returns_once_the_nodes_are_reaped(tmp_path, monkeypatch):
    ens = slowly_exiting_node(tmp_path, monkeypatch)
    old = ens.start_node(1)
    wait_until(lambda: proc_state(old) == "Z", timeout=30,
               message="the stand-in's main thread did not exit")
    assert ens.stop() == [1]
    assert proc_state(old) == "", "stop() returned while the node was still exiting"
    assert ens.start_node(1) != old
    ens.stop()
