"""Writes to the end of a log file that leave it whole: all of the data or none of it.

A full disk makes ``write`` short before it fails, leaving part of the data in
the file; a later append would land after that part, where nobody expects an
entry (or an index entry) to start.  :func:`append_whole` cuts the part off
again before the error is re-raised.
"""
from __future__ import annotations

import os


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
