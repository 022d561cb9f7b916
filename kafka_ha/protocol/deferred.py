"""An answer that is finished later, after the request itself has taken effect.

An acks=all Produce appends at once but may answer only when its records are
replicated.  Had the request held its connection for that wait, a client that
pipelines one request per partition (librdkafka does, with up to a million in
flight) would see its partitions replicated one round after another: 1,000
partitions after a failover took 1,000 follower round trips, 20-35 s.  So a
handler may return a ``DeferredResponse`` instead of a body: the protocol server
reads and handles the connection's next requests, in order, while the wait runs,
and sends every answer in request order (see ``server.py``).
"""
from __future__ import annotations

from typing import Any, Callable


class DeferredResponse:
    """``finish()`` waits for what the answer depends on and returns the response body."""

    __slots__ = ("finish",)

    def __init__(self, finish: Callable[[], dict[str, Any]]) -> None:
        self.finish = finish


def resolved(response: Any) -> Any:
    """The body of ``response``, waiting for it if it is deferred (for callers that
    are not the protocol server, such as tests and in-process tools).

    >>> resolved({"a": 1}), resolved(DeferredResponse(lambda: {"b": 2}))
    ({'a': 1}, {'b': 2})
    """
    return response.finish() if isinstance(response, DeferredResponse) else response
