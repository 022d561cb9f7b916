"""Response bytes that stay in their files until the socket takes them (sendfile).

A Fetch response is mostly record data that already sits in segment files in
wire format.  Instead of reading it into Python and copying it again into the
response buffer, the data plane hands the encoder a :class:`FileRegions`: the
encoder writes the i32 length prefix, and the server passes the ranges to
``os.sendfile`` between the encoded parts (see ``framing.encode_response_parts``).

The regions own private duplicates of the segment fds, taken when the data was
read.  Between the read and the send the connection may wait for the client's
socket buffer, and meanwhile retention, a follower's truncation or a topic
deletion may close the segment: a duplicated fd still points at the same open
file (even an unlinked one), never at whatever file reuses the number.  A file
*truncated* below a range cannot be sent in full; that raises
:class:`ShortFileRegion`, and the server closes the connection (as Kafka does),
because the length prefix has promised bytes that no longer exist.

Small regions are not worth a dup, a sendfile and a separate write: the
encoder reads those inline (``read()``), one copy of a few KiB.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Protocol

# Below this many bytes a fetch's records are read and copied into the
# response buffer: one syscall and a small copy beat dup + sendfile + close,
# and the response leaves in one write.  Measured (kafka-data-bench.sh, sender
# CPU per GiB): at 16 KiB sendfile costs as much or more than pread + send,
# from 64 KiB it costs less (docs/benchmarks.md).
SENDFILE_MIN_BYTES = 32 * 1024


class FileRange(Protocol):
    """What the log hands out for a read (``kafka_ha.log.segment.FileSlice``)."""

    fileno: int
    position: int
    length: int


class ShortFileRegion(OSError):
    """The file ended before a region's last byte (truncated after the read)."""


class FileRegions:
    """``length`` bytes made of ``(fd, position, length)`` ranges of open files."""

    __slots__ = ("_ranges", "length")

    def __init__(self, ranges: list[tuple[int, int, int]]) -> None:
        self._ranges = ranges
        self.length = sum(n for _, _, n in ranges)

    @classmethod
    def pin(cls, slices: Iterable[FileRange]) -> FileRegions:
        """Duplicate each slice's fd now, so the ranges stay readable until closed."""
        ranges: list[tuple[int, int, int]] = []
        try:
            for s in slices:
                if s.length:
                    ranges.append((os.dup(s.fileno), s.position, s.length))
        except OSError:
            for fd, _, _ in ranges:
                os.close(fd)
            raise
        return cls(ranges)

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """All the bytes (tests, and callers that need a copy)."""
        return _read_ranges(self._ranges)

    def send_to(self, sock: Any) -> None:
        """Write every range to ``sock`` with sendfile (cooperative for gevent sockets)."""
        out = sock.fileno()
        for fd, position, length in self._ranges:
            while length:
                try:
                    sent = os.sendfile(out, fd, position, length)
                except BlockingIOError:
                    _wait_writable(sock)
                    continue
                if sent == 0:
                    raise ShortFileRegion(f"file ended {length} bytes early at position "
                                          f"{position}")
                position += sent
                length -= sent

    def close(self) -> None:
        ranges, self._ranges = getattr(self, "_ranges", []), []
        for fd, _, _ in ranges:
            os.close(fd)

    def __del__(self) -> None:
        # A response dropped before it was sent (the connection failed while
        # encoding) must not leak descriptors.
        self.close()


def fetch_payload(slices: list[FileRange]) -> bytes | FileRegions:
    """The records field for ``slices``: sendfile regions, or bytes when small."""
    ranges = [(s.fileno, s.position, s.length) for s in slices]
    if sum(n for _, _, n in ranges) < SENDFILE_MIN_BYTES:
        return _read_ranges(ranges)
    try:
        return FileRegions.pin(slices)
    except OSError:
        # Out of descriptors (EMFILE): a copy still answers the fetch.
        return _read_ranges(ranges)


def _read_ranges(ranges: list[tuple[int, int, int]]) -> bytes:
    chunks = []
    for fd, position, length in ranges:
        data = os.pread(fd, length, position)
        if len(data) != length:
            raise ShortFileRegion(f"file ended {length - len(data)} bytes early "
                                  f"at position {position + len(data)}")
        chunks.append(data)
    return b"".join(chunks)


def _wait_writable(sock: Any) -> None:
    from gevent.socket import wait_write

    wait_write(sock.fileno(), timeout=sock.gettimeout())
