"""Kafka wire primitives: a bounds-checked ``Reader`` and an appending ``Writer``.

Everything is big-endian and signed except ``uint32`` (the legacy message CRC).
Strings carry an i16 length, byte blobs and arrays an i32 length; -1 means null
where the field is nullable (Kafka's protocol guide, "Protocol Primitive Types").

The reader never trusts a length prefix: a length that is negative (other than
the null marker) or larger than the bytes left raises ``ProtocolError`` before
anything is allocated, so a hostile frame cannot make us build huge objects.
"""
from __future__ import annotations

import struct
from typing import Callable, Iterable, TypeVar

from kafka_ha.protocol.file_region import FileRegions

T = TypeVar("T")
Buffer = bytes | bytearray | memoryview

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

_MAX_STRING = 0x7FFF  # i16 length prefix

# Arrays longer than this are read and written in chunks of as many items, with the
# hook of pause_long_arrays (if one is set) called between two.  The broker sets a
# yield to its event loop: in one piece, decoding a LeaderAndIsr of 10,000
# partitions held the loop for 0.2 s on a quiet machine, and no request was
# answered meanwhile.  By count, not by time as ``cooperative.yielding``: that would
# add a clock read to every item of every array, and 1,000 items of the largest
# arrays (LeaderAndIsr states, about 15 us each) take about 20 ms anyway.
ARRAY_CHUNK = 1000
_pause_hook: Callable[[], None] | None = None


def pause_long_arrays(hook: Callable[[], None] | None) -> None:
    """Call ``hook()`` between two chunks of every long array read or written (None: never)."""
    global _pause_hook
    _pause_hook = hook


def read_items(reader: "Reader", read_item: Callable[["Reader"], T], count: int) -> list[T]:
    """``count`` items, read by ``read_item(reader)``, in chunks (see ``ARRAY_CHUNK``)."""
    pause = _pause_hook
    if pause is None or count <= ARRAY_CHUNK:
        return [read_item(reader) for _ in range(count)]
    items: list[T] = []
    for start in range(0, count, ARRAY_CHUNK):
        if start:
            pause()
        items += [read_item(reader) for _ in range(min(ARRAY_CHUNK, count - start))]
    return items


def write_items(writer: "Writer", items: Iterable[T], write_item: Callable[["Writer", T], None]) -> None:
    """Write each item with ``write_item(writer, item)``, in chunks (see ``ARRAY_CHUNK``)."""
    pause = _pause_hook
    if pause is None:
        for item in items:
            write_item(writer, item)
        return
    for i, item in enumerate(items):
        if i and not i % ARRAY_CHUNK:
            pause()
        write_item(writer, item)


class ProtocolError(ValueError):
    """Malformed or truncated wire data (or a value that cannot be encoded).

    ``path`` names the schema field(s) being processed, outermost first; the
    schema layer fills it in while the exception propagates.
    """

    def __init__(self, message: str, path: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        if self.path:
            return f"{'.'.join(self.path)}: {self.message}"
        return self.message


class Reader:
    """Sequential decoder over a bytes-like object.

    Reads never copy large payloads: ``nullable_bytes`` returns a memoryview
    slice of the underlying buffer (which it therefore keeps alive).

    >>> r = Reader(b"\\x00\\x03abc\\xff\\xff\\x00\\x00\\x00\\x2a")
    >>> r.string(), r.nullable_string(), r.int32(), r.remaining()
    ('abc', None, 42, 0)
    >>> Reader(b"\\x00\\x05ab").string()
    Traceback (most recent call last):
    ...
    kafka_ha.protocol.primitives.ProtocolError: truncated: need 5 bytes for string at offset 2, 2 left
    """

    __slots__ = ("_buf", "_pos", "_end")

    def __init__(self, data: Buffer, offset: int = 0) -> None:
        self._buf = data if isinstance(data, memoryview) else memoryview(data)
        self._pos = offset
        self._end = len(self._buf)

    @property
    def offset(self) -> int:
        """Current position from the start of the buffer."""
        return self._pos

    def remaining(self) -> int:
        return self._end - self._pos

    def _take(self, n: int, what: str) -> int:
        """Reserve ``n`` bytes and return their start offset."""
        pos = self._pos
        if n > self._end - pos:
            raise ProtocolError(
                f"truncated: need {n} bytes for {what} at offset {pos}, "
                f"{self._end - pos} left")
        self._pos = pos + n
        return pos

    def int8(self) -> int:
        return _I8.unpack_from(self._buf, self._take(1, "int8"))[0]

    def int16(self) -> int:
        return _I16.unpack_from(self._buf, self._take(2, "int16"))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self._buf, self._take(4, "int32"))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self._buf, self._take(8, "int64"))[0]

    def unpack(self, packer: struct.Struct, what: str) -> tuple:
        """Several fixed-width values at once (a schema's run of integer fields)."""
        return packer.unpack_from(self._buf, self._take(packer.size, what))

    def seek(self, offset: int) -> None:
        """Go back to ``offset`` (one this reader returned), to read again field by field."""
        if not 0 <= offset <= self._end:
            raise ValueError(f"offset {offset} outside the buffer")
        self._pos = offset

    def peek_int32(self) -> int | None:
        """The next int32 without reading past it; None if fewer than 4 bytes are left.

        >>> r = Reader(b"\\x00\\x00\\x00\\x07")
        >>> r.peek_int32(), r.int32(), r.peek_int32()
        (7, 7, None)
        """
        if self._end - self._pos < 4:
            return None
        return _I32.unpack_from(self._buf, self._pos)[0]

    def uint32(self) -> int:
        return _U32.unpack_from(self._buf, self._take(4, "uint32"))[0]

    def boolean(self) -> bool:
        # Kafka treats any non-zero byte as true.
        return self._buf[self._take(1, "boolean")] != 0

    def raw(self, n: int) -> memoryview:
        """The next ``n`` bytes as a zero-copy slice."""
        if n < 0:
            raise ProtocolError(f"negative raw length {n}")
        pos = self._take(n, "raw bytes")
        return self._buf[pos:pos + n]

    def _length(self, size: int, what: str, nullable: bool) -> int | None:
        # Returns None for the null marker; validates everything else.
        if size == -1 and nullable:
            return None
        if size < 0:
            raise ProtocolError(f"invalid {what} length {size} at offset {self._pos}")
        return size

    def _text(self, n: int) -> str:
        pos = self._take(n, "string")
        try:
            return str(self._buf[pos:pos + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"invalid UTF-8 in string at offset {pos}: {exc}") from None

    def string(self) -> str:
        n = self._length(self.int16(), "string", False)
        return self._text(n)  # type: ignore[arg-type]

    def nullable_string(self) -> str | None:
        n = self._length(self.int16(), "string", True)
        return None if n is None else self._text(n)

    def bytes_(self) -> bytes:
        """A non-null i32-length blob, copied (use ``nullable_bytes`` for no copy)."""
        n = self._length(self.int32(), "bytes", False)
        pos = self._take(n, "bytes")  # type: ignore[arg-type]
        return bytes(self._buf[pos:pos + n])  # type: ignore[operator]

    def nullable_bytes(self) -> memoryview | None:
        n = self._length(self.int32(), "bytes", True)
        if n is None:
            return None
        pos = self._take(n, "bytes")
        return self._buf[pos:pos + n]

    def array(self, read_item: Callable[["Reader"], T]) -> list[T] | None:
        """An i32-counted array; ``None`` for the null count -1.

        ``read_item`` is called as ``read_item(self)`` -- pass an unbound
        method such as ``Reader.int32`` or a schema's ``decode``.
        """
        count = self.int32()
        if count == -1:
            return None
        # Every element in our schemas takes at least one byte, so a count
        # larger than what is left is corrupt; reject it before looping.
        if count < 0 or count > self._end - self._pos:
            raise ProtocolError(
                f"invalid array count {count} at offset {self._pos - 4}, "
                f"{self._end - self._pos} bytes left")
        return read_items(self, read_item, count)

    def fixed_array(self, code: str, size: int) -> list[int] | None:
        """Fast path for arrays of one fixed-width integer type.

        ``code`` is a struct code ('b', 'h', 'i', 'q') of ``size`` bytes.
        """
        count = self.int32()
        if count == -1:
            return None
        if count < 0:
            raise ProtocolError(f"invalid array count {count} at offset {self._pos - 4}")
        pos = self._take(count * size, f"array of {count} int{size * 8}")
        return list(struct.unpack_from(f">{count}{code}", self._buf, pos))


class Writer:
    """Appends encoded primitives to a growing bytearray.

    >>> w = Writer()
    >>> w.int16(18); w.string("id"); w.array([1, 2], Writer.int32)
    >>> w.getvalue().hex()
    '001200026964000000020000000100000002'
    """

    __slots__ = ("_buf", "_parts")

    def __init__(self) -> None:
        self._buf = bytearray()
        # Set once a FileRegions value is written: the encoded bytes before it,
        # then the regions, and so on; ``_buf`` holds what follows the last one.
        self._parts: list[bytearray | FileRegions] | None = None

    def __len__(self) -> int:
        return len(self._buf) + (sum(len(p) for p in self._parts) if self._parts else 0)

    def getvalue(self) -> bytes:
        if self._parts:
            return b"".join(p.read() if isinstance(p, FileRegions) else p
                            for p in (*self._parts, self._buf))
        return bytes(self._buf)

    def parts(self) -> list[bytearray | FileRegions]:
        """The output as written: buffers and, between them, regions to sendfile."""
        return [*self._parts, self._buf] if self._parts else [self._buf]

    def buffer(self) -> bytearray:
        """The live buffer (no copy) -- for callers that patch a size prefix."""
        return self._buf

    def patch_int32(self, offset: int, value: int) -> None:
        """Overwrite an already written int32 of the first part, e.g. a frame size."""
        _I32.pack_into(self._parts[0] if self._parts else self._buf, offset, value)

    def _pack(self, packer: struct.Struct, value: int, what: str) -> None:
        try:
            self._buf += packer.pack(value)
        except struct.error as exc:
            raise ProtocolError(f"cannot encode {value!r} as {what}: {exc}") from None

    def int8(self, value: int) -> None:
        self._pack(_I8, value, "int8")

    def int16(self, value: int) -> None:
        self._pack(_I16, value, "int16")

    def int32(self, value: int) -> None:
        self._pack(_I32, value, "int32")

    def int64(self, value: int) -> None:
        self._pack(_I64, value, "int64")

    def uint32(self, value: int) -> None:
        self._pack(_U32, value, "uint32")

    def boolean(self, value: bool) -> None:
        self._buf.append(1 if value else 0)

    def raw(self, data: Buffer) -> None:
        self._buf += data

    def string(self, value: str) -> None:
        if value is None:
            raise ProtocolError("null is not allowed for a non-nullable string")
        self._text(value)

    def nullable_string(self, value: str | None) -> None:
        if value is None:
            self._buf += b"\xff\xff"
        else:
            self._text(value)

    def _text(self, value: str) -> None:
        try:
            data = value.encode("utf-8")
        except AttributeError:
            raise ProtocolError(f"expected str, got {type(value).__name__}") from None
        if len(data) > _MAX_STRING:
            raise ProtocolError(f"string of {len(data)} bytes exceeds the i16 length limit")
        self._buf += _I16.pack(len(data))
        self._buf += data

    def bytes_(self, value: Buffer) -> None:
        if value is None:
            raise ProtocolError("null is not allowed for non-nullable bytes")
        self._blob(value)

    def nullable_bytes(self, value: Buffer | None) -> None:
        if value is None:
            self._buf += b"\xff\xff\xff\xff"
        else:
            self._blob(value)

    def _blob(self, value: Buffer | FileRegions) -> None:
        if isinstance(value, FileRegions):
            self._buf += _I32.pack(value.length)
            if self._parts is None:
                self._parts = []
            self._parts += (self._buf, value)
            self._buf = bytearray()
            return
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ProtocolError(f"expected bytes, got {type(value).__name__}")
        self._buf += _I32.pack(len(value))
        self._buf += value

    def array(self, items: Iterable[T] | None,
              write_item: Callable[["Writer", T], None]) -> None:
        """An i32-counted array; ``None`` writes the null count -1.

        ``items`` must be sized (list/tuple); ``write_item(self, item)`` writes one.
        """
        if items is None:
            self._buf += b"\xff\xff\xff\xff"
            return
        try:
            count = len(items)  # type: ignore[arg-type]
        except TypeError:
            raise ProtocolError(f"expected a list, got {type(items).__name__}") from None
        self._buf += _I32.pack(count)
        write_items(self, items, write_item)
