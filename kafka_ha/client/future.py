"""A small future for produce results, resolved by the producer's sender.

Callbacks run synchronously in the greenlet that resolves the future (the
sender), never in the gevent hub, so a callback may block or call
``Producer.send()`` again.  The wait event is created only when someone
actually waits on an unfinished future: most futures in a perf run are
resolved before anybody looks at them.

>>> f = RecordFuture()
>>> seen = []
>>> f.add_done_callback(lambda fut: seen.append(fut.get()))
>>> f.set_result(RecordMetadata(0, 42))
>>> f.done(), f.get(), seen
(True, RecordMetadata(partition=0, offset=42), [RecordMetadata(partition=0, offset=42)])
"""
from __future__ import annotations

import logging
from typing import Callable, NamedTuple

from gevent.event import Event

from .errors import KafkaTimeoutError

log = logging.getLogger(__name__)


class RecordMetadata(NamedTuple):
    """Where a record was written; ``offset`` is -1 for acks=0."""

    partition: int
    offset: int


class RecordFuture:
    __slots__ = ("_done", "_value", "_exception", "_callbacks", "_event")

    def __init__(self) -> None:
        self._done = False
        self._value: RecordMetadata | None = None
        self._exception: BaseException | None = None
        # None until a callback is added, then the callback itself, and a list
        # only from the second one on: every tracked object per buffered
        # record is work for the cyclic GC, which dominated the producer's CPU.
        self._callbacks: Callable[[RecordFuture], None] | list | None = None
        self._event: Event | None = None

    def done(self) -> bool:
        return self._done

    def succeeded(self) -> bool:
        return self._done and self._exception is None

    def exception(self) -> BaseException | None:
        return self._exception

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Block until resolved; return the metadata or raise the failure."""
        if not self._done:
            if self._event is None:
                self._event = Event()
            if not self._event.wait(timeout):
                raise KafkaTimeoutError(f"no produce result within {timeout} s")
        if self._exception is not None:
            raise self._exception
        return self._value  # type: ignore[return-value]

    def add_done_callback(self, fn: Callable[[RecordFuture], None]) -> None:
        """Call ``fn(future)`` once resolved (immediately if it already is)."""
        if self._done:
            self._run(fn)
        elif self._callbacks is None:
            self._callbacks = fn
        elif type(self._callbacks) is list:
            self._callbacks.append(fn)
        else:
            self._callbacks = [self._callbacks, fn]

    def set_result(self, value: RecordMetadata) -> None:
        self._resolve(value, None)

    def set_exception(self, exc: BaseException) -> None:
        self._resolve(None, exc)

    def _resolve(self, value: RecordMetadata | None, exc: BaseException | None) -> None:
        if self._done:
            return
        self._done, self._value, self._exception = True, value, exc
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, None
        if type(callbacks) is list:
            for fn in callbacks:
                self._run(fn)
        elif callbacks is not None:
            self._run(callbacks)

    def _run(self, fn: Callable[[RecordFuture], None]) -> None:
        # A failing user callback must not break the sender or other callbacks.
        try:
            fn(self)
        except Exception:
            log.exception("produce callback %r raised", fn)
