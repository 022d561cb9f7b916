"""Kafka's small text checkpoint files, written atomically and parsed strictly.

Two formats, both ``<version 0>\\n<count>\\n`` followed by ``count`` lines:

- :class:`OffsetCheckpointFile`: ``topic partition offset`` lines
  (``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
  ``log-start-offset-checkpoint``; 0.8.2 ``OffsetCheckpoint.scala``).
- :class:`LeaderEpochCheckpointFile`: ``epoch start_offset`` lines
  (``leader-epoch-checkpoint``).

A write goes to ``<path>.tmp``, is fsynced, renamed over ``path`` and the
directory fsynced, so a crash leaves the old or the new file, never a mix.
A read that finds anything unexpected raises :class:`CorruptCheckpointError`
naming the file, the line and the reason: callers decide whether to rebuild
(epochs, recovery points) or to refuse to start (high watermarks), instead of
silently treating a damaged file as empty.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "replication-offset-checkpoint")
>>> OffsetCheckpointFile(path).write({TopicPartition("foo", 0): 1234})
>>> open(path).read()
'0\\n1\\nfoo 0 1234\\n'
>>> OffsetCheckpointFile(path).read()
{TopicPartition(topic='foo', partition=0): 1234}
"""
from __future__ import annotations

import os
from typing import Callable, Iterable, Mapping, TypeVar

from gevent import monkey

from kafka_ha.model import TopicPartition

VERSION = 0
# The standard library's close.  gevent's patched one (25.8.1 and later) closes anything
# but a regular file only on the event loop's next turn; a directory's descriptor is
# never watched by the loop, and a broker closing 10,000 logs fsyncs two directories
# per log without a turn in between: deferred, those closes reached the descriptor
# limit (EMFILE) and halted the clean shutdown.
_close_now = monkey.get_original("os", "close")
T = TypeVar("T")


class CorruptCheckpointError(ValueError):
    """A checkpoint file that does not parse; ``str()`` names file, line and reason."""

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        self.path, self.line, self.reason = path, line, reason
        where = f"{path}, line {line}" if line is not None else path
        super().__init__(f"corrupt checkpoint file {where}: {reason}")


def fsync_dir(path: str) -> None:
    """fsync a directory so that a rename or a new file in it survives a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        _close_now(fd)


def atomic_write(path: str, text: str, durable: bool = True) -> None:
    """Replace ``path`` with ``text``: write ``.tmp``, fsync, rename, fsync the directory.

    With ``durable=False`` the two fsyncs are skipped: the rename still makes
    the replacement atomic for a crashed process, only a power loss may undo it.
    """
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def _parse(path: str, parse_line: Callable[[list[str]], T]) -> list[T] | None:
    """Entries of a checkpoint file, or None if it does not exist."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptCheckpointError(path, None, "not UTF-8 text") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()                                   # the final newline
    if not lines:
        raise CorruptCheckpointError(path, 1, "file is empty, expected the version line")
    if lines[0].strip() != str(VERSION):
        raise CorruptCheckpointError(path, 1, f"unrecognized version {lines[0]!r}, expected {VERSION}")
    if len(lines) < 2:
        raise CorruptCheckpointError(path, 2, "missing the entry count line")
    count = _int(path, 2, lines[1], "entry count")
    if count < 0 or len(lines) - 2 != count:
        raise CorruptCheckpointError(path, 2, f"entry count {count} but {len(lines) - 2} entry lines follow")
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        try:
            entries.append(parse_line(line.split()))
        except ValueError as exc:
            raise CorruptCheckpointError(path, number, f"{exc}: {line!r}") from None
    return entries


def _int(path: str, number: int, text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise CorruptCheckpointError(path, number, f"{what} {text!r} is not an integer") from None


def _non_negative(text: str, what: str) -> int:
    value = int(text)                      # ValueError names the text
    if value < 0:
        raise ValueError(f"negative {what} {value}")
    return value


def _render(lines: Iterable[str], count: int) -> str:
    return f"{VERSION}\n{count}\n" + "".join(line + "\n" for line in lines)


class OffsetCheckpointFile:
    """``topic partition offset`` checkpoint (high watermarks, recovery points)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        items = sorted(offsets.items())
        for topic in {tp.topic for tp in offsets}:   # per topic, not per partition (10,000s)
            if not topic or any(c.isspace() for c in topic):
                raise ValueError(f"topic name {topic!r} cannot be written to a checkpoint")
        atomic_write(self.path, _render((f"{tp.topic} {tp.partition} {offset}" for tp, offset in items),
                                        len(items)))

    def read(self) -> dict[TopicPartition, int]:
        """The checkpointed offsets; ``{}`` if the file does not exist."""
        entries = _parse(self.path, self._parse_line) or []
        result = dict(entries)
        if len(result) != len(entries):
            raise CorruptCheckpointError(self.path, None, "a partition is listed twice")
        return result

    @staticmethod
    def _parse_line(fields: list[str]) -> tuple[TopicPartition, int]:
        if len(fields) != 3:
            raise ValueError(f"expected 'topic partition offset', found {len(fields)} fields")
        topic, partition, offset = fields
        return (TopicPartition(topic, _non_negative(partition, "partition")),
                _non_negative(offset, "offset"))


class LeaderEpochCheckpointFile:
    """``epoch start_offset`` checkpoint of one partition's leader epoch cache."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, entries: Iterable[tuple[int, int]], durable: bool = True) -> None:
        """Replace the file (see :func:`atomic_write` for ``durable``)."""
        entries = list(entries)
        atomic_write(self.path, _render((f"{epoch} {start}" for epoch, start in entries), len(entries)),
                     durable=durable)

    def read(self) -> list[tuple[int, int]] | None:
        """The ``(epoch, start_offset)`` pairs in file order; None if the file does not exist."""
        return _parse(self.path, self._parse_line)

    @staticmethod
    def _parse_line(fields: list[str]) -> tuple[int, int]:
        if len(fields) != 2:
            raise ValueError(f"expected 'epoch start_offset', found {len(fields)} fields")
        return _non_negative(fields[0], "epoch"), _non_negative(fields[1], "start offset")
