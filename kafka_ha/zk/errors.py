"""The project's errors for ZooKeeper: failed requests, malformed znode data, and their checks.

Failed requests: :func:`translated` turns kazoo's exceptions into the
:class:`ZkError` family below (``ZkNoNode``, ``ZkNodeExists``,
``ZkBadVersion``, ``ZkConnectionLost``, ``ZkSessionExpired``...), so that no
module outside ``kafka_ha.zk`` imports kazoo, not even its exceptions; the
stores raise only these.

Malformed data: decoders (:mod:`kafka_ha.zk.znodes`, :mod:`kafka_ha.zk.admin_znodes`)
build on the checks below, so every rejection names the znode that held the bytes and
a log line points an operator at the exact path to inspect with
``zkCli.sh get``.  The checks are strict about types (a JSON ``true`` is not
the int 1) and lenient about layout (key order, whitespace, unknown keys),
because Kafka's own readers parse JSON and other tools write these nodes too.

:func:`error_text` names errors in log lines: most of ZooKeeper's carry no text.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from kazoo.exceptions import (BadVersionError, ConnectionLoss, KazooException, NodeExistsError,
                              NoNodeError, NotEmptyError, OperationTimeoutError, RolledBackError,
                              RuntimeInconsistency, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError

from kafka_ha.model import TopicPartition


def error_text(error: BaseException) -> str:
    """The name of ``error``, and its text when it has one.

    ZooKeeper's ConnectionLoss or SessionExpired print as an empty string, which left
    log lines such as "could not write ISR [1] ()".  A :class:`ZkError` goes by the
    name of the failure it stands for, so log lines and tool output read as before.

    >>> error_text(ConnectionLoss())
    'ConnectionLoss'
    >>> error_text(ZkConnectionLost())
    'ConnectionLoss'
    >>> error_text(OSError(28, "No space left on device"))
    'OSError: [Errno 28] No space left on device'
    """
    text = str(error)
    name = error.failure if isinstance(error, ZkError) else type(error).__name__
    return f"{name}: {text}" if text else name


# --- Failed requests ------------------------------------------------------------


class ZkError(Exception):
    """A ZooKeeper request failed.

    ``failure`` names the error as the client library does, which is what log
    lines and the tools have always printed.
    """

    failure = "ZooKeeper error"


class ZkNoNode(ZkError):
    """The znode does not exist."""

    failure = "NoNodeError"


class ZkNodeExists(ZkError):
    """The znode to create exists already."""

    failure = "NodeExistsError"


class ZkBadVersion(ZkError):
    """A conditional write or delete met another version: someone changed the znode."""

    failure = "BadVersionError"


class ZkNotEmpty(ZkError):
    """The znode to delete has children."""

    failure = "NotEmptyError"


class ZkRolledBack(ZkError):
    """A multi's operation was not applied because another one of it failed."""

    failure = "RolledBackError"


class ZkUnavailable(ZkError):
    """ZooKeeper gave no answer: the request may or may not have been applied."""


class ZkConnectionLost(ZkUnavailable):
    """The connection dropped before the answer came; the session may live on."""

    failure = "ConnectionLoss"


class ZkSessionExpired(ZkUnavailable):
    """The session ended: its ephemeral znodes and watches are gone."""

    failure = "SessionExpiredError"


class ZkTimeout(ZkUnavailable):
    """No answer within the time allowed."""

    failure = "KazooTimeoutError"


# Most specific first: ConnectionClosedError is a SessionExpiredError.
_TRANSLATIONS: tuple[tuple[type[BaseException], type[ZkError]], ...] = (
    (NoNodeError, ZkNoNode), (NodeExistsError, ZkNodeExists), (BadVersionError, ZkBadVersion),
    (NotEmptyError, ZkNotEmpty), (RolledBackError, ZkRolledBack),
    (RuntimeInconsistency, ZkRolledBack), (ConnectionLoss, ZkConnectionLost),
    (SessionExpiredError, ZkSessionExpired), (OperationTimeoutError, ZkTimeout),
    (KazooTimeoutError, ZkTimeout),
)


def translated_error(error: BaseException) -> BaseException:
    """The project's error for kazoo's ``error``; any other error as it is.

    >>> type(translated_error(NoNodeError())).__name__
    'ZkNoNode'
    >>> from kazoo.exceptions import ConnectionClosedError
    >>> e = translated_error(ConnectionClosedError("closed"))
    >>> type(e).__name__, e.failure, str(e)
    ('ZkSessionExpired', 'ConnectionClosedError', 'closed')
    >>> translated_error(ValueError("x"))
    ValueError('x')
    """
    if isinstance(error, ZkError):
        return error
    for kazoo_type, ours in _TRANSLATIONS:
        if isinstance(error, kazoo_type):
            break
    else:
        if not isinstance(error, KazooException):
            return error
        ours = ZkError
    translated = ours(*error.args)
    translated.failure = type(error).__name__
    return translated


@contextmanager
def translated() -> Iterator[None]:
    """Raise the project's error in place of kazoo's one raised inside the block.

    >>> with translated():
    ...     raise NodeExistsError()
    Traceback (most recent call last):
    ...
    kafka_ha.zk.errors.ZkNodeExists
    """
    try:
        yield
    except (KazooException, KazooTimeoutError) as e:
        ours = translated_error(e)
        if ours is e:
            raise
        raise ours from e


class MalformedZnode(ValueError):
    """The data of ``path`` is not what the znode family allows.

    >>> str(MalformedZnode("/controller", "not JSON"))
    '/controller: not JSON'
    >>> isinstance(MalformedZnode("/x", "y"), ValueError)
    True
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class DuplicatePartitions(MalformedZnode):
    """A preferred-replica-election list names a partition more than once.

    Kept apart from other malformations because Kafka reports it with its own
    message (0.8.2 ``PreferredReplicaLeaderElectionCommand``), and the tool
    shows that message to the user instead of a parse error.

    >>> e = DuplicatePartitions("/admin/preferred_replica_election",
    ...                         [TopicPartition("t", 0)])
    >>> e.reason
    'Preferred replica election data contains duplicate partitions: [t,0]'
    """

    def __init__(self, path: str, duplicates: Iterable[TopicPartition]) -> None:
        self.duplicates: tuple[TopicPartition, ...] = tuple(duplicates)
        listed = ",".join(str(tp) for tp in self.duplicates)
        super().__init__(
            path, f"Preferred replica election data contains duplicate partitions: {listed}")


# --- Checks shared by the decoders ---------------------------------------------


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # The stdlib keeps the last of duplicated keys silently; for an assignment
    # or an ISR that would hide which of two values a writer meant.
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {json.dumps(key)}")
        obj[key] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(data: bytes | None, path: str) -> Any:
    """Parse znode data as strict JSON (no NaN, no duplicate keys).

    >>> parse_json(b'{ "leader" : 1 }', "/p")
    {'leader': 1}
    >>> parse_json(b'{"a":1,"a":2}', "/p")
    Traceback (most recent call last):
    ...
    kafka_ha.zk.errors.MalformedZnode: /p: not valid JSON: duplicate key "a"
    """
    if not data:
        raise MalformedZnode(path, "no data (null or empty)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedZnode(path, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicate_keys,
                          parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise MalformedZnode(path, f"not valid JSON: {exc}") from None


def parse_decimal(data: bytes | None, path: str, minimum: int) -> int:
    """A bare decimal integer, as in /controller_epoch (Kafka: ``toString``)."""
    text = (data or b"").strip().decode("ascii", errors="replace")
    # int() alone would also take "+5", "1_000" and non-ASCII digits.
    if not re.fullmatch(r"-?[0-9]+", text):
        raise MalformedZnode(path, f"expected a decimal integer, got {show(text)}")
    value = int(text)
    if value < minimum:
        raise MalformedZnode(path, f"expected an integer >= {minimum}, got {value}")
    return value


def show(value: Any) -> str:
    """A short JSON rendering of ``value`` for error messages."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def json_object(value: Any, path: str, what: str = "data") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedZnode(path, f"{what} must be a JSON object, got {show(value)}")
    return value


def required(obj: dict[str, Any], key: str, path: str, where: str = "") -> Any:
    if key not in obj:
        raise MalformedZnode(path, f"missing key {where}{json.dumps(key)}")
    return obj[key]


def check_int(value: Any, path: str, name: str, minimum: int = 0) -> int:
    """``value`` if it is a JSON integer >= ``minimum``.

    >>> check_int(True, "/p", "leader", -1)
    Traceback (most recent call last):
    ...
    kafka_ha.zk.errors.MalformedZnode: /p: leader must be an integer >= -1, got true
    """
    # type() rather than isinstance(): JSON true would pass as the int 1.
    if type(value) is not int or value < minimum:
        raise MalformedZnode(path, f"{name} must be an integer >= {minimum}, got {show(value)}")
    return value


def check_port(value: Any, path: str, name: str) -> int:
    port = check_int(value, path, name)
    if port > 65535:
        raise MalformedZnode(path, f"{name} must be at most 65535, got {port}")
    return port


def check_str(value: Any, path: str, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise MalformedZnode(path, f"{name} must be a non-empty string, got {show(value)}")
    return value


def check_version(obj: dict[str, Any], path: str) -> int | None:
    """The optional ``version`` key: Kafka's readers ignore it, but not its type."""
    if "version" not in obj:
        return None
    return check_int(obj["version"], path, "version", 1)


def check_broker_ids(value: Any, path: str, name: str, *, allow_empty: bool) -> tuple[int, ...]:
    """A replica list or ISR: distinct non-negative broker ids."""
    if not isinstance(value, list):
        raise MalformedZnode(path, f"{name} must be a list of broker ids, got {show(value)}")
    if not value and not allow_empty:
        raise MalformedZnode(path, f"{name} must not be empty")
    ids = tuple(check_int(v, path, f"{name}[{i}]") for i, v in enumerate(value))
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise MalformedZnode(path, f"{name} lists broker(s) {twice} more than once")
    return ids


def check_timestamp(value: Any, path: str) -> int:
    # Kafka writes epoch milliseconds as a JSON *string*.
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]+", value):
        raise MalformedZnode(path, f"timestamp must be a string of digits, got {show(value)}")
    return int(value)


def last_segment_id(path: str, what: str) -> int:
    """The integer id at the end of ``path`` (a broker id, a partition)."""
    tail = path.rstrip("/").rsplit("/", 1)[-1]
    if not re.fullmatch(r"[0-9]+", tail):
        raise MalformedZnode(path, f"path does not end in a {what}")
    return int(tail)
