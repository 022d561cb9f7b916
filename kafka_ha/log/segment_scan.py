"""Read a segment file as whole entries in large chunks (recovery's CRC-checking pass,
the log cleaner's reads).

Apart from :mod:`.segment` to keep that module small; the header-only scans that
serve reads stay there (``LogSegment.headers``).
"""
from __future__ import annotations

import os
from typing import Callable, Iterator

from kafka_ha.records.format import LEGACY_PREFIX, LOG_OVERHEAD, V0_MIN_SIZE
from kafka_ha.records.shallow import Entry, iter_entries, read_header


def whole_entries(fd: int, size: int, chunk: int,
                  on_read: Callable[[int], None] = lambda _n: None) -> Iterator[tuple[bytes, Entry]]:
    """``(buffer, entry)`` pairs with whole entries of the first ``size`` bytes of ``fd``,
    ``entry.position`` relative to ``buffer``; stops at a partial or impossible entry.
    ``on_read(n)`` is told of each read of ``n`` bytes (the cleaner's throttle)."""
    pos = 0
    while pos + LOG_OVERHEAD <= size:
        buf = os.pread(fd, min(chunk, size - pos), pos)
        on_read(len(buf))
        consumed = 0
        for entry in iter_entries(buf):
            yield buf, entry
            consumed = entry.end
        if not consumed:                      # one entry larger than the chunk
            _, length = LEGACY_PREFIX.unpack_from(buf, 0)
            if length < V0_MIN_SIZE or pos + LOG_OVERHEAD + length > size:
                return                        # garbage size or partial tail: stop here
            buf = os.pread(fd, LOG_OVERHEAD + length, pos)
            on_read(len(buf))
            entry = read_header(buf, 0)
            yield buf, entry
            consumed = entry.end
        pos += consumed
