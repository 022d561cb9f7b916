"""Stack dumps on demand, for a broker or controller that seems to hang.

``kill -USR1 <pid>`` appends every greenlet's and thread's stack (gevent's run
info) to ``stacks.log`` in the broker's log directory: it shows which greenlet
waits on what, e.g. a controller event stuck on a ZooKeeper answer that never came.
It runs as a plain Python signal handler, between two bytecodes of whatever the
main thread does, so it also answers while a greenlet hogs the loop.

``kill -USR2 <pid>`` appends the threads' stacks with :mod:`faulthandler`, which
works even when the interpreter is stuck inside C code and no Python handler can run.

A broker also registers a describer of its ZooKeeper client (:func:`add_describer`),
whose queued and unanswered requests follow the stacks: a greenlet waiting on a
ZooKeeper answer shows which of the two its request is stuck in.
"""
from __future__ import annotations

import faulthandler
import signal
import time
from pathlib import Path
from typing import IO, Callable

FILE_NAME = "stacks.log"
# The last line of every SIGUSR1 dump: a reader waits for it, not for the file to grow
# (a large dump reaches the file in several writes).
END_MARKER = "==== end of stacks ====\n"

# More state to write after the stacks, each a function returning text.
_describers: list[Callable[[], str]] = []


def add_describer(describe: Callable[[], str]) -> None:
    _describers.append(describe)


def format_stacks() -> str:
    """Every thread's and greenlet's stack, as text with a time stamp header.

    >>> text = format_stacks()
    >>> text.startswith("==== stacks at ") and "format_stacks" in text
    True
    """
    from gevent.util import format_run_info
    header = f"==== stacks at {time.strftime('%Y-%m-%d %H:%M:%S')} ====\n"
    extra = []
    for describe in list(_describers):
        try:
            extra.append(describe())
        except Exception as e:   # a dump must come out whatever a describer does
            extra.append(f"({describe!r} failed: {type(e).__name__}: {e})\n")
    return header + "\n".join(format_run_info()) + "\n" + "".join(extra) + END_MARKER


def install(log_dir: Path) -> IO:
    """Dump on SIGUSR1 (greenlets and threads) and SIGUSR2 (threads, from C) into
    ``log_dir/stacks.log``; returns the file kept open for faulthandler, which
    must stay open for as long as the handler is registered."""
    path = Path(log_dir) / FILE_NAME

    def dump(_signum, _frame) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(format_stacks())

    signal.signal(signal.SIGUSR1, dump)
    raw = open(path, "a", encoding="utf-8")  # noqa: SIM115  (kept for faulthandler)
    faulthandler.register(signal.SIGUSR2, file=raw, all_threads=True)
    return raw


def uninstall(raw: IO) -> None:
    """Undo :func:`install` (tests)."""
    faulthandler.unregister(signal.SIGUSR2)
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    _describers.clear()
    raw.close()
