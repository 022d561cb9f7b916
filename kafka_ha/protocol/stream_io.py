"""Socket I/O shared by both ends of a connection: frames in, bytes out.

Frames in (:class:`FrameReader`).  Both ends of a Kafka connection read the same framing: an int32 size, then that
many bytes.  Reading the size and then the body costs two ``recv`` calls, and
under gevent two trips through its socket layer, for every frame.  A small
request or response arrives whole, often with the next one behind it, so this
reader receives into a buffer and cuts frames out of it: one call per frame or
fewer.  A frame larger than what is buffered gets its own buffer, and the rest
of it is received straight into that.  That buffer grows with what arrives
(doubling, from 64 KiB), never to the claimed size up front: a peer that claims
100 MB and sends ten bytes costs this end kilobytes, not 100 MB.  A caller may
pass ``reserve(size)``, called once the size is known and before the body is
read; the broker reserves the size in its request memory pool there, and a
reservation that has to wait stops this connection from reading.

Every frame is a fresh ``bytearray``: a handler may keep ``memoryview`` slices
of it (produced records) after the next frame has been read.

Bytes out (:func:`send_all`): gevent's ``sendall`` asks the kernel for the
socket's send buffer size on every call (it sizes chunks for PyPy) and passes
through three Python functions; a frame almost always leaves in one ``send``.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from kafka_ha.protocol.primitives import ProtocolError

#: ``recv_into(view, nbytes) -> bytes received`` (0 when the peer has closed).
RecvInto = Callable[[memoryview, int], int]

BUFFER_BYTES = 16 * 1024   # per connection; larger frames are received straight into their own buffer
GROW_MIN_BYTES = 64 * 1024  # a large frame's buffer starts here and doubles as its bytes arrive

#: ``reserve(size)``: called with a frame's size before its body is read (may block).
Reserve = Callable[[int], None]


class FrameSizeError(ProtocolError):
    """The size prefix is outside what this end accepts (checked before allocating)."""

    def __init__(self, size: int, min_size: int, max_size: int) -> None:
        super().__init__(f"frame size {size} outside {min_size}..{max_size}")
        self.size = size


class TruncatedFrame(EOFError):
    """The stream ended inside a frame (or inside its size prefix)."""

    def __init__(self, got: int, total: int) -> None:
        super().__init__(f"EOF after {got} of {total} bytes")
        self.got, self.total = got, total


class FrameReader:
    """Reads the frames of one connection; ``reset()`` when the socket is replaced.

    >>> chunks = [b"\\x00\\x00\\x00\\x02ab\\x00\\x00", b"\\x00\\x01c", b""]
    >>> def recv_into(view, n):
    ...     data = chunks.pop(0)
    ...     view[:len(data)] = data
    ...     return len(data)
    >>> reader = FrameReader(min_size=1, max_size=100)
    >>> reader.read(recv_into), reader.read(recv_into), reader.read(recv_into)
    (bytearray(b'ab'), bytearray(b'c'), None)
    """

    __slots__ = ("min_size", "max_size", "_buf", "_view", "_start", "_end")

    def __init__(self, min_size: int, max_size: int, buffer_bytes: int = BUFFER_BYTES) -> None:
        self.min_size, self.max_size = min_size, max_size
        self._buf = bytearray(buffer_bytes)
        self._view = memoryview(self._buf)
        self._start = self._end = 0          # the unread bytes are _buf[_start:_end]

    def reset(self) -> None:
        """Forget buffered bytes: they belonged to a socket that is gone."""
        self._start = self._end = 0

    def read(self, recv_into: RecvInto, reserve: Reserve | None = None) -> bytearray | None:
        """The next frame without its size prefix; None if the stream ended between frames.

        ``reserve(size)`` runs after the size is checked and before any of
        the body is taken from the buffer or the socket.

        Raises :class:`FrameSizeError` for an impossible size and
        :class:`TruncatedFrame` for a stream that ends inside a frame; after
        either the connection is out of step and must be closed.
        """
        while self._end - self._start < 4:
            if not self._fill(recv_into):
                buffered = self._end - self._start
                if buffered == 0:
                    return None
                raise TruncatedFrame(buffered, 4)
        start = self._start
        size = int.from_bytes(self._buf[start:start + 4], "big", signed=True)
        if not self.min_size <= size <= self.max_size:
            raise FrameSizeError(size, self.min_size, self.max_size)
        if reserve is not None:
            reserve(size)
        start += 4
        have = min(size, self._end - start)
        self._start = start + have
        if have == size:
            return bytearray(self._view[start:start + size])
        frame = bytearray(self._view[start:start + have])
        self._recv_growing(recv_into, frame, size)
        return frame

    def _fill(self, recv_into: RecvInto) -> bool:
        """Receive more bytes after the buffered ones; False at end of stream."""
        if self._start == self._end:
            self._start = self._end = 0
        elif self._end == len(self._buf):
            # Only a partial size prefix can be left here (a frame's body is
            # never waited for in the buffer): move it to the front.
            left = self._end - self._start
            self._buf[:left] = self._buf[self._start:self._end]
            self._start, self._end = 0, left
        n = recv_into(self._view[self._end:], len(self._buf) - self._end)
        self._end += n
        return n > 0

    @staticmethod
    def _recv_growing(recv_into: RecvInto, frame: bytearray, size: int) -> None:
        """Receive the rest of a ``size``-byte frame into ``frame``, growing it as bytes arrive.

        Each step at most doubles what has arrived, so the memory held is
        under twice the received bytes (plus ``GROW_MIN_BYTES``), and the
        copies that growing costs add up to less than the frame itself.
        """
        got = len(frame)
        while got < size:
            end = min(size, got + max(got, GROW_MIN_BYTES))
            frame.extend(bytes(end - got))
            view = memoryview(frame)
            try:
                while got < end:
                    n = recv_into(view[got:end], end - got)
                    if n == 0:
                        raise TruncatedFrame(got, size)
                    got += n
            finally:
                view.release()


def send_all(sock: Any, data: bytes | bytearray | memoryview, deadline: float | None = None) -> None:
    """Send all of ``data`` on a (gevent) socket, waiting while its buffer is full.

    Each wait is bounded by the socket's timeout; with a ``deadline``
    (``time.monotonic()``), a send that had to be continued gets what is left
    of it, so a slow reader cannot stretch the whole beyond the deadline.
    Raises ``TimeoutError`` (``socket.timeout``) when it passes.
    """
    sent = sock.send(data)
    if sent == len(data):
        return
    view = memoryview(data).cast("B")
    while sent < len(view):
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("timed out")
            sock.settimeout(remaining)
        sent += sock.send(view[sent:])
