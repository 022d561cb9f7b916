"""kill -USR1 / -USR2 append stack dumps to stacks.log (broker/stack_dumps.py)."""
import os
import signal

import gevent
from gevent.event import Event

from kafka_ha.broker import stack_dumps


def _parked_on_an_event(event):
    event.wait()


def test_sigusr1_appends_every_greenlets_stack_and_sigusr2_the_threads(tmp_path):
    event = Event()
    parked = gevent.spawn(_parked_on_an_event, event)
    gevent.sleep(0)                      # the greenlet starts and parks
    raw = stack_dumps.install(tmp_path)
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR2)
        raw.flush()
    finally:
        stack_dumps.uninstall(raw)
        event.set()
        parked.join()
    text = (tmp_path / stack_dumps.FILE_NAME).read_text()
    assert text.count("==== stacks at ") == 2          # appended, not overwritten
    assert "_parked_on_an_event" in text               # a parked greenlet's frame shows
    assert "test_sigusr1_appends_every_greenlets_stack" in text
    assert "Current thread" in text or "Thread 0x" in text   # faulthandler's dump
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
