"""One greenlet that drains the controller's event queue and dispatches each event.

Only this greenlet touches the controller's state, so the state needs no
locks and events are handled strictly one after another in arrival order.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

import gevent
from gevent.queue import Queue

log = logging.getLogger("kafka_ha.controller")


class EventLoop:
    def __init__(self, handlers: dict[type, Callable[[Any], None]],
                 on_error: Callable[[Any, BaseException], None]) -> None:
        self._handlers = handlers
        self._on_error = on_error
        self._queue: Queue = Queue()
        self._greenlet: gevent.Greenlet | None = None
        self.processed = 0

    def put(self, event: Any) -> None:
        """Enqueue from any greenlet (watch callbacks included); never blocks."""
        self._queue.put(event)

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._run)

    def stop(self, timeout: float = 5.0) -> None:
        if self._greenlet is not None:
            self._queue.put(_STOP)
            self._greenlet.join(timeout)
            self._greenlet.kill(block=False)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is _STOP:
                return
            self.dispatch(event)

    def dispatch(self, event: Any) -> None:
        """Handle one event on the calling greenlet (the loop's, or a unit test's)."""
        handler = self._handlers.get(type(event))
        if handler is None:
            log.error("No handler for controller event %r", event)
            return
        started = time.monotonic()
        try:
            handler(event)
        except gevent.GreenletExit:
            raise
        except BaseException as e:  # a controller never dies from one event
            self._report(event, e)
        self.processed += 1
        elapsed_ms = (time.monotonic() - started) * 1000
        log.debug("Processed %s in %.1f ms", type(event).__name__, elapsed_ms)

    def _report(self, event: Any, error: BaseException) -> None:
        try:
            self._on_error(event, error)
        except gevent.GreenletExit:
            raise
        except BaseException:
            # The error handler talks to ZooKeeper too (re-election after a
            # controller move); its failure must not end this greenlet.
            log.exception("Error recovering from the failure of %s", type(event).__name__)


_STOP = object()
