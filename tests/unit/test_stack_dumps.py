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


def test_describers_follow_the_stacks_and_one_that_fails_does_not_spoil_the_dump(tmp_path):
    raw = stack_dumps.install(tmp_path)
    try:
        stack_dumps.add_describer(lambda: "ZooKeeper client: queued, not sent (1)\n")
        stack_dumps.add_describer(lambda: 1 / 0)
        os.kill(os.getpid(), signal.SIGUSR1)
    finally:
        stack_dumps.uninstall(raw)
    text = (tmp_path / stack_dumps.FILE_NAME).read_text()
    assert text.index("* Greenlets") < text.index("ZooKeeper client: queued, not sent (1)")
    assert "failed: ZeroDivisionError" in text
    assert stack_dumps._describers == []                # uninstall forgets them


def test_a_kazoo_client_that_never_connected_is_described_without_a_pipe():
    from kazoo.client import KazooClient
    from kafka_ha.zk.client import describe_connection
    text = describe_connection(KazooClient(hosts="127.0.0.1:1"))
    assert "session none" in text and "wake-up bytes no pipe" in text
    assert "queued, not sent (0): []" in text and "sent, not answered (0): []" in text
