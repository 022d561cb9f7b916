"""Local process and port helpers for the dev/test tools (stdlib only).

Processes are identified by pid files plus their command line, so that a stale pid file
(whose pid the kernel has since reused) is never mistaken for a running server.
"""

import ctypes
import os
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path

HOST = "127.0.0.1"
PR_SET_PDEATHSIG = 1


def pid_alive(pid):
    """True if ``pid`` exists and is not a zombie (reaps it first if it is our child)."""
    if not pid:
        return False
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/status") as f:
            state = next((line.split()[1] for line in f if line.startswith("State:")), "?")
    except OSError:
        return False
    return state not in ("Z", "X")


def owned_alive(proc, pid):
    """True if ``proc`` (our Popen child, or None) is ``pid`` and still running.

    Right after ``exec`` /proc/<pid>/cmdline can briefly read empty, so children we
    started ourselves are recognised by their Popen object rather than by their argv.
    """
    return proc is not None and proc.pid == pid and proc.poll() is None


def pid_cmdline(pid):
    """The argv of ``pid`` as a list of strings ([] if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process so far (Linux /proc).

    >>> process_cpu_seconds(os.getpid()) >= 0
    True
    """
    with open(f"/proc/{pid}/stat") as f:
        # the command name (field 2) may hold spaces: count fields after its ")"
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU time of the waited-for child processes (and theirs) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pin_process(pid: int, cpus: set[int]) -> None:
    """Run every thread of ``pid`` on ``cpus`` only (threads it starts later inherit it).

    Benchmarks use it to give a client its own core, as it would have on its own host,
    so that a client's CPU (librdkafka's busy wait, say) does not come out of the
    brokers' share of a small machine.  Threads that end meanwhile are skipped."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except ProcessLookupError:
            pass


def read_pid(path):
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def wait_dead(pids, timeout_s):
    """Wait until none of ``pids`` is alive; return the ones still alive at the deadline."""
    deadline = time.monotonic() + timeout_s
    alive = [p for p in pids if pid_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if pid_alive(p)]
    return alive


def terminate(pids, timeout_s=5.0, killed=None):
    """SIGTERM (and SIGCONT, in case a test stopped them), then SIGKILL after ``timeout_s``;
    the pids that needed the SIGKILL are appended to ``killed`` if given.  Returns
    whether all are gone."""
    for sig in (signal.SIGTERM, signal.SIGCONT):
        send_signal(pids, sig)
    survivors = wait_dead(pids, timeout_s)
    send_signal(survivors, signal.SIGKILL)
    if killed is not None:
        killed.extend(survivors)
    return not wait_dead(survivors, 10.0)


def send_signal(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def spawn(argv, out_path, cwd=None, env=None, die_with_parent=False):
    """Start ``argv`` in its own session with stdout/stderr appended to ``out_path``.

    ``die_with_parent`` asks the kernel to SIGKILL the child when the calling *thread*
    dies (PR_SET_PDEATHSIG, kept across exec), so a killed test run leaves no servers
    behind.  Call it from a long-lived thread (the main one in pytest).
    """
    preexec = _pdeathsig_preexec() if die_with_parent else None
    with open(out_path, "ab") as out:
        return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, close_fds=True,
                                start_new_session=True, preexec_fn=preexec)


def _pdeathsig_preexec():
    # Resolve prctl before forking: the child of a threaded parent must not import or
    # take locks, it only makes the one foreign call.
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))


def port_free(port, host=HOST):
    """True if a server could bind ``host:port`` (SO_REUSEADDR, like the JVM does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_open(port, host=HOST, timeout_s=0.5):
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def tail(path, lines=40):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return f"({path}: missing)"
    return "\n".join(text.splitlines()[-lines:])
