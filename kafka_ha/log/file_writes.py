"""Writes to the end of a log file that leave it whole: all of the data or none of it.

A full disk makes ``write`` short before it fails, leaving part of the data in
the file; a later append would land after that part, where nobody expects an
entry (or an index entry) to start.  :func:`append_whole` cuts the part off
again before the error is re-raised.
"""
from __future__ import annotations

import contextlib
import os
from typing import Callable, Iterator


class PartialWriteError(OSError):
    """An append failed and the part of it already in the file could not be cut off."""


def write_all(fd: int, data) -> None:
    """Write all of ``data`` at the file position of ``fd`` (several writes if short)."""
    # The view is released even when a write fails: a traceback kept by a caller
    # must not pin ``data`` (an exported bytearray cannot grow).
    with memoryview(data) as view:
        written = os.write(fd, view)
        while written < len(view):
            written += os.write(fd, view[written:])


def append_whole(fd: int, data, size: int) -> None:
    """Append ``data`` to the file of ``fd``, ``size`` bytes long, or leave it at ``size`` bytes.

    Raises the write's OSError after cutting the file back, or PartialWriteError
    if the cut fails too.
    """
    try:
        write_all(fd, data)
    except OSError as write_error:
        try:
            os.ftruncate(fd, size)
        except OSError as cut_error:
            raise PartialWriteError(write_error.errno, f"{write_error.strerror}; cutting the partial write "
                                                       f"back to {size} bytes failed too: {cut_error}") \
                from write_error
        raise


@contextlib.contextmanager
def appending(path: str) -> Iterator[int]:
    """A descriptor of ``path`` opened for appends only while the block runs: one kept open
    for every partition's index would double a broker's open files (10k partitions on a
    broker is 20k descriptors), and the indexes live in memory anyway."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        yield fd
    finally:
        os.close(fd)


def append_index_entries(index, sync: bool, fsync: Callable[[int], None] | None) -> None:
    """Append ``index.unwritten`` (whole entries or nothing, so that a retry does not follow
    a partial one) to ``index.path``; fsync it with ``sync``, by ``fsync`` if given (it may
    run in a thread).  Once appended the entries are no longer unwritten, even if the fsync
    then fails."""
    if index.unwritten or sync:
        with appending(index.path) as fd:
            append_whole(fd, index.unwritten, os.fstat(fd).st_size)
            index.unwritten = bytearray()
            if sync:
                (fsync or os.fsync)(fd)


def replace_contents(path: str, data: bytes) -> None:
    """Write ``data`` over the whole file (an index rebuilt or cut back)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
