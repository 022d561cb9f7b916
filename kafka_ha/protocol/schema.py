"""Declarative message schemas: field types composed into ``Struct``/``Array``.

A schema is built once at import time; each type exposes two plain callables,
``encode(writer, value)`` and ``decode(reader)``, and ``Struct`` keeps a
precomputed ``(name, callable)`` list so that encoding or decoding a message is
a straight loop with no per-call reflection.

Values are plain dicts keyed by the snake_case field names; arrays are lists.

>>> PARTITION = Struct(("topic", STRING), ("partition", INT32))
>>> data = PARTITION.to_bytes({"topic": "t", "partition": 3})
>>> data.hex()
'00017400000003'
>>> PARTITION.from_bytes(data)
{'topic': 't', 'partition': 3}
>>> PARTITION.to_bytes({"topic": "t"})
Traceback (most recent call last):
...
kafka_ha.protocol.schema.MissingFieldError: "missing field 'partition'"
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Callable

from kafka_ha.protocol.primitives import Buffer, ProtocolError, Reader, Writer, read_items, write_items

EncodeFn = Callable[[Writer, Any], None]
DecodeFn = Callable[[Reader], Any]


class MissingFieldError(KeyError):
    """A dict passed to ``Struct.encode`` lacks a field; ``path`` names it."""

    def __init__(self, path: tuple[str, ...]) -> None:
        super().__init__(f"missing field {'.'.join(path)!r}")
        self.path = path


class Type:
    """A wire type: a name plus its encode/decode callables."""

    __slots__ = ("name", "encode", "decode")

    def __init__(self, name: str, encode: EncodeFn, decode: DecodeFn) -> None:
        self.name = name
        self.encode = encode
        self.decode = decode

    def __repr__(self) -> str:
        return self.name


class _FixedInt(Type):
    """An integer type of fixed width; arrays of it decode with one unpack."""

    __slots__ = ("code", "size")

    def __init__(self, name: str, encode: EncodeFn, decode: DecodeFn,
                 code: str, size: int) -> None:
        super().__init__(name, encode, decode)
        self.code = code
        self.size = size


INT8 = _FixedInt("INT8", Writer.int8, Reader.int8, "b", 1)
INT16 = _FixedInt("INT16", Writer.int16, Reader.int16, "h", 2)
INT32 = _FixedInt("INT32", Writer.int32, Reader.int32, "i", 4)
INT64 = _FixedInt("INT64", Writer.int64, Reader.int64, "q", 8)
BOOLEAN = Type("BOOLEAN", Writer.boolean, Reader.boolean)
STRING = Type("STRING", Writer.string, Reader.string)
NULLABLE_STRING = Type("NULLABLE_STRING", Writer.nullable_string, Reader.nullable_string)
BYTES = Type("BYTES", Writer.bytes_, Reader.bytes_)
NULLABLE_BYTES = Type("NULLABLE_BYTES", Writer.nullable_bytes, Reader.nullable_bytes)


class Array(Type):
    """``[T]``: an i32 count then the items; count -1 is null if ``nullable``."""

    __slots__ = ("item", "nullable")

    def __init__(self, item: Type, nullable: bool = False) -> None:
        self.item = item
        self.nullable = nullable
        name = f"Array({item!r}{', nullable=True' if nullable else ''})"
        super().__init__(name, self._make_encoder(), self._make_decoder())

    def _make_encoder(self) -> EncodeFn:
        write_item, nullable = self.item.encode, self.nullable
        packer = getattr(self.item, "packer", None)
        if packer is not None:
            names, pack = self.item.names, packer.pack

            def encode_fixed(writer: Writer, items: Any) -> None:
                if items is None:             # null (or refused), as below
                    encode(writer, items)
                    return
                try:
                    # One C call per item instead of one per field (see Struct.packer).
                    data = b"".join([pack(*[item[n] for n in names]) for item in items])
                    count = len(items)
                except (KeyError, TypeError, struct.error):
                    encode(writer, items)     # raises the error of the exact field
                    return
                writer.int32(count)
                writer.raw(data)

        def encode(writer: Writer, items: Any) -> None:
            if items is None and not nullable:
                raise ProtocolError("null is not allowed for a non-nullable array")
            writer.array(items, write_item)
        return encode_fixed if packer is not None else encode

    def _make_decoder(self) -> DecodeFn:
        nullable = self.nullable
        packer = getattr(self.item, "packer", None)
        if isinstance(self.item, _FixedInt):
            code, size = self.item.code, self.item.size

            def read_items(reader: Reader) -> list | None:
                return reader.fixed_array(code, size)
        elif packer is not None:
            names, read_item = self.item.names, self.item.decode

            def read_items(reader: Reader) -> list | None:
                start = reader.offset
                try:
                    count = reader.int32()
                    if count == -1:
                        return None
                    if count < 0:
                        raise ProtocolError("negative count")
                    block = reader.raw(count * packer.size)
                except ProtocolError:
                    reader.seek(start)        # again item by item, for the exact error
                    return reader.array(read_item)
                return [dict(zip(names, values)) for values in packer.iter_unpack(block)]
        else:
            read_item = self.item.decode

            def read_items(reader: Reader) -> list | None:
                return reader.array(read_item)

        def decode(reader: Reader) -> list | None:
            items = read_items(reader)
            if items is None and not nullable:
                raise ProtocolError("null (-1) count for a non-nullable array")
            return items
        return decode


# -- Flexible versions (KIP-482) ---------------------------------------------
# Lengths and counts become unsigned varints holding length + 1 (0 is null), and
# structs end with a tagged-field section: a varint count, then per field its
# tag and size (varints, tags strictly increasing) and that many bytes.

_MAX_VARINT_BYTES = 5  # an unsigned 32-bit value


def write_unsigned_varint(writer: Writer, value: int) -> None:
    """>>> w = Writer(); write_unsigned_varint(w, 300); w.getvalue().hex()
    'ac02'
    """
    if not 0 <= value < 1 << 32:
        raise ProtocolError(f"cannot encode {value!r} as an unsigned varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    writer.raw(out)


def read_unsigned_varint(reader: Reader) -> int:
    """>>> read_unsigned_varint(Reader(b"\\xac\\x02"))
    300
    """
    value = shift = 0
    for _ in range(_MAX_VARINT_BYTES):
        byte = reader.raw(1)[0]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    raise ProtocolError(f"unsigned varint longer than {_MAX_VARINT_BYTES} bytes")


def skip_tagged_fields(reader: Reader) -> None:
    """Read past a tagged-field section: no tag we serve has a meaning for us."""
    count = read_unsigned_varint(reader)
    if count > reader.remaining():
        raise ProtocolError(f"tagged field count {count} exceeds the {reader.remaining()} bytes left")
    previous = -1
    for _ in range(count):
        tag = read_unsigned_varint(reader)
        if tag <= previous:
            raise ProtocolError(f"tagged field {tag} out of order after {previous}")
        previous = tag
        reader.raw(read_unsigned_varint(reader))


def _compact_length(reader: Reader, what: str, nullable: bool) -> int | None:
    n = read_unsigned_varint(reader) - 1
    if n == -1:
        if nullable:
            return None
        raise ProtocolError(f"null {what} where it is not nullable")
    return n


def _write_compact_blob(writer: Writer, data: Buffer | None, what: str, nullable: bool) -> None:
    if data is None:
        if not nullable:
            raise ProtocolError(f"null is not allowed for a non-nullable {what}")
        writer.raw(b"\x00")
        return
    write_unsigned_varint(writer, len(data) + 1)
    writer.raw(data)


def _compact_string(nullable: bool) -> Type:
    def encode(writer: Writer, value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise ProtocolError(f"expected str, got {type(value).__name__}")
        _write_compact_blob(writer, None if value is None else value.encode("utf-8"),
                            "string", nullable)

    def decode(reader: Reader) -> str | None:
        n = _compact_length(reader, "string", nullable)
        if n is None:
            return None
        try:
            return str(reader.raw(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"invalid UTF-8 in compact string: {exc}") from None
    return Type("COMPACT_NULLABLE_STRING" if nullable else "COMPACT_STRING", encode, decode)


def _compact_bytes(nullable: bool) -> Type:
    def decode(reader: Reader) -> bytes | None:
        n = _compact_length(reader, "bytes", nullable)
        return None if n is None else bytes(reader.raw(n))
    return Type("COMPACT_NULLABLE_BYTES" if nullable else "COMPACT_BYTES",
                lambda w, v: _write_compact_blob(w, v, "bytes", nullable), decode)


COMPACT_STRING = _compact_string(False)
COMPACT_NULLABLE_STRING = _compact_string(True)
COMPACT_BYTES = _compact_bytes(False)
COMPACT_NULLABLE_BYTES = _compact_bytes(True)


class CompactArray(Type):
    """``COMPACT_ARRAY[T]``: a varint count + 1, then the items; 0 is null if ``nullable``."""

    __slots__ = ("item", "nullable")

    def __init__(self, item: Type, nullable: bool = False) -> None:
        self.item, self.nullable = item, nullable
        write_item, read_item = item.encode, item.decode

        def encode(writer: Writer, items: Any) -> None:
            if items is None:
                _write_compact_blob(writer, None, "array", nullable)
                return
            write_unsigned_varint(writer, len(items) + 1)
            write_items(writer, items, write_item)

        def decode(reader: Reader) -> list | None:
            count = _compact_length(reader, "array", nullable)
            if count is None:
                return None
            # Every item takes at least one byte: a larger count is corrupt.
            if count > reader.remaining():
                raise ProtocolError(f"compact array count {count} exceeds the "
                                    f"{reader.remaining()} bytes left")
            return read_items(reader, read_item, count)
        super().__init__(f"CompactArray({item!r}{', nullable=True' if nullable else ''})",
                         encode, decode)


# One step of a Struct's loop: (name, type, None, ()) for a field, or
# (first name, None, packer, fields) for a run of integer fields read and written
# with one struct call (the loops over thousands of partitions spend their time in
# per-field calls otherwise).
_Step = tuple[str, Any, "struct.Struct | None", tuple[tuple[str, Type], ...]]


def _steps(fields: tuple[tuple[str, Type], ...]) -> tuple[_Step, ...]:
    steps: list[_Step] = []
    i = 0
    while i < len(fields):
        j = i
        while j < len(fields) and isinstance(fields[j][1], _FixedInt):
            j += 1
        if j - i >= 2:
            run = fields[i:j]
            packer = struct.Struct(">" + "".join(t.code for _, t in run))  # type: ignore[attr-defined]
            steps.append((run[0][0], None, packer, run))
            i = j
        else:
            name, typ = fields[i]
            steps.append((name, typ, None, ()))
            i += 1
    return tuple(steps)


class Struct(Type):
    """An ordered sequence of named fields, encoded back to back.

    Field names must be unique; a ``MissingFieldError`` (a ``KeyError``) or a
    ``ProtocolError`` raised while processing a nested field carries the full
    dotted path of that field.  ``tagged=True`` (flexible versions, KIP-482)
    ends the struct with a tagged-field section: written empty, and on reading
    every tag is skipped, since none we serve carries meaning for us.
    """

    __slots__ = ("fields", "names", "tagged", "packer")

    def __init__(self, *fields: tuple[str, Type], tagged: bool = False) -> None:
        self.fields = tuple(fields)
        self.names = tuple(name for name, _ in fields)
        self.tagged = tagged
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"duplicate field names in {self.names}")
        steps = _steps(self.fields)
        # A struct of integers alone (a fetch position, a partition error) is one
        # struct.Struct, which arrays of it use for all their items at once.
        self.packer = steps[0][2] if len(steps) == 1 and steps[0][2] and not tagged else None
        super().__init__(f"Struct{self.names}",
                         self._make_encoder(steps, tagged),
                         self._make_decoder(steps, tagged))

    @staticmethod
    def _make_encoder(steps: tuple[_Step, ...], tagged: bool) -> EncodeFn:
        steps = tuple((name, typ and typ.encode, packer, run) for name, typ, packer, run in steps)

        def encode(writer: Writer, value: Any) -> None:
            name = "?"
            try:
                for name, enc, packer, run in steps:
                    if packer is None:
                        enc(writer, value[name])
                        continue
                    try:
                        writer.raw(packer.pack(*[value[n] for n, _ in run]))
                    except (KeyError, TypeError, struct.error):
                        # Field by field, for the error of the exact field.
                        for name, typ in run:
                            typ.encode(writer, value[name])
                        raise
                if tagged:
                    writer.raw(b"\x00")  # no tagged fields
            except MissingFieldError as exc:
                raise MissingFieldError((name,) + exc.path) from None
            except KeyError:
                # Raised by value[name] itself: this very field is absent.
                raise MissingFieldError((name,)) from None
            except ProtocolError as exc:
                exc.path = (name,) + exc.path
                raise
            except TypeError:
                if not isinstance(value, Mapping):
                    raise ProtocolError(
                        f"expected a dict, got {type(value).__name__}") from None
                raise
        return encode

    @staticmethod
    def _make_decoder(steps: tuple[_Step, ...], tagged: bool) -> DecodeFn:
        steps = tuple((name, typ and typ.decode, packer, run) for name, typ, packer, run in steps)

        def decode(reader: Reader) -> dict[str, Any]:
            out: dict[str, Any] = {}
            name = "?"
            try:
                for name, dec, packer, run in steps:
                    if packer is None:
                        out[name] = dec(reader)
                        continue
                    start = reader.offset
                    try:
                        values = reader.unpack(packer, "integers")
                    except ProtocolError:
                        reader.seek(start)    # field by field, for the exact error
                        for name, typ in run:
                            out[name] = typ.decode(reader)
                        raise
                    for (n, _), v in zip(run, values):
                        out[n] = v
                if tagged:
                    name = "_tagged_fields"
                    skip_tagged_fields(reader)
            except ProtocolError as exc:
                exc.path = (name,) + exc.path
                raise
            return out
        return decode

    def to_bytes(self, value: dict[str, Any]) -> bytes:
        """Encode one value on its own (tests, fixed-size bodies)."""
        writer = Writer()
        self.encode(writer, value)
        return writer.getvalue()

    def from_bytes(self, data: Buffer) -> dict[str, Any]:
        """Decode one value that must span all of ``data``."""
        reader = Reader(data)
        value = self.decode(reader)
        if reader.remaining():
            raise ProtocolError(f"{reader.remaining()} trailing bytes after {self.name}")
        return value
