"""Client-side exceptions: protocol error codes sorted into retriable and fatal.

Every failure the client surfaces is a :class:`KafkaError` carrying the
protocol ``code`` (an :class:`ErrorCode`, or ``None`` for purely client-side
failures such as an unreachable cluster).  Callers that only want to know
whether trying again can help check ``retriable`` (or catch
:class:`RetriableError`).

>>> err = error_for(6, "partition [t,0] on broker 2")
>>> type(err).__name__, err.retriable, err.needs_metadata_refresh
('RetriableError', True, True)
>>> str(err)
'NOT_LEADER_FOR_PARTITION (6): partition [t,0] on broker 2'
>>> error_for(21).retriable
False
"""
from __future__ import annotations

from kafka_ha.protocol.errors import ErrorCode

E = ErrorCode

# Kafka's RetriableException subclasses (Errors.java) that this protocol subset can return.
RETRIABLE_CODES = frozenset({
    E.CORRUPT_MESSAGE, E.UNKNOWN_TOPIC_OR_PARTITION, E.LEADER_NOT_AVAILABLE,
    E.NOT_LEADER_FOR_PARTITION, E.REQUEST_TIMED_OUT, E.BROKER_NOT_AVAILABLE,
    E.REPLICA_NOT_AVAILABLE, E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS,
    E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.NOT_ENOUGH_REPLICAS,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.KAFKA_STORAGE_ERROR, E.FENCED_LEADER_EPOCH,
    E.UNKNOWN_LEADER_EPOCH,
})

# Errors that mean our idea of who leads the partition is stale.
METADATA_REFRESH_CODES = frozenset({
    E.UNKNOWN_TOPIC_OR_PARTITION, E.LEADER_NOT_AVAILABLE, E.NOT_LEADER_FOR_PARTITION,
    E.BROKER_NOT_AVAILABLE, E.REPLICA_NOT_AVAILABLE, E.KAFKA_STORAGE_ERROR,
    E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH, E.NETWORK_EXCEPTION,
})

COORDINATOR_CODES = frozenset({
    E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR})


class KafkaError(Exception):
    """A failed client operation; ``code`` is the protocol error code or None."""

    retriable = False

    def __init__(self, code: ErrorCode | int | None = None, message: str = "") -> None:
        self.code = None if code is None else _as_error_code(code)
        self.message = message
        super().__init__(self.code, message)

    @property
    def needs_metadata_refresh(self) -> bool:
        return self.code in METADATA_REFRESH_CODES

    def __str__(self) -> str:
        if self.code is None:
            return self.message or type(self).__name__
        text = f"{getattr(self.code, 'name', 'UNKNOWN')} ({int(self.code)})"
        return f"{text}: {self.message}" if self.message else text


class RetriableError(KafkaError):
    """A transient failure: the same operation may succeed later."""

    retriable = True


class FatalError(KafkaError):
    """The operation cannot succeed by retrying (bad request, bad config...)."""


class KafkaConnectionError(RetriableError):
    """A broker connection failed (refused, reset, or timed out)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class KafkaUnreachableError(KafkaConnectionError):
    """The connection could not be established, so the request was never sent."""


class KafkaNotSentError(KafkaConnectionError):
    """The connection the request was drained for dropped before it was sent."""


class NoBrokersAvailable(FatalError):
    """None of the bootstrap or known brokers answered a Metadata request."""

    def __init__(self, servers: list[str], detail: str = "") -> None:
        self.servers = list(servers)
        text = f"no broker reachable; tried {', '.join(self.servers) or '(none)'}"
        super().__init__(None, f"{text} (last error: {detail})" if detail else text)


class KafkaTimeoutError(FatalError):
    """A deadline (max_block_ms, delivery_timeout_ms, poll...) passed."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class OffsetOutOfRangeError(FatalError):
    """Fetch position is outside the log and auto_offset_reset is "none"."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)


def _as_error_code(code: ErrorCode | int) -> ErrorCode | int:
    try:
        return ErrorCode(code)
    except ValueError:
        return int(code)  # an unknown code still prints as its number


def error_for(code: ErrorCode | int, message: str = "") -> KafkaError:
    """The exception for a non-zero protocol ``code``: retriable or fatal."""
    cls = RetriableError if code in RETRIABLE_CODES else FatalError
    return cls(code, message)


def check(code: ErrorCode | int, message: str = "") -> None:
    """Raise :func:`error_for` ``code`` unless it is NONE."""
    if code != ErrorCode.NONE:
        raise error_for(code, message)
