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

from collections.abc import Mapping
from typing import Any, Callable

from kafka_ha.protocol.primitives import Buffer, ProtocolError, Reader, Writer

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

        def encode(writer: Writer, items: Any) -> None:
            if items is None and not nullable:
                raise ProtocolError("null is not allowed for a non-nullable array")
            writer.array(items, write_item)
        return encode

    def _make_decoder(self) -> DecodeFn:
        nullable = self.nullable
        if isinstance(self.item, _FixedInt):
            code, size = self.item.code, self.item.size

            def read_items(reader: Reader) -> list | None:
                return reader.fixed_array(code, size)
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


class Struct(Type):
    """An ordered sequence of named fields, encoded back to back.

    Field names must be unique; a ``MissingFieldError`` (a ``KeyError``) or a
    ``ProtocolError`` raised while processing a nested field carries the full
    dotted path of that field.
    """

    __slots__ = ("fields", "names")

    def __init__(self, *fields: tuple[str, Type]) -> None:
        self.fields = tuple(fields)
        self.names = tuple(name for name, _ in fields)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"duplicate field names in {self.names}")
        encoders = tuple((name, typ.encode) for name, typ in fields)
        decoders = tuple((name, typ.decode) for name, typ in fields)
        super().__init__(f"Struct{self.names}",
                         self._make_encoder(encoders), self._make_decoder(decoders))

    @staticmethod
    def _make_encoder(encoders: tuple[tuple[str, EncodeFn], ...]) -> EncodeFn:
        def encode(writer: Writer, value: Any) -> None:
            name = "?"
            try:
                for name, enc in encoders:
                    enc(writer, value[name])
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
    def _make_decoder(decoders: tuple[tuple[str, DecodeFn], ...]) -> DecodeFn:
        def decode(reader: Reader) -> dict[str, Any]:
            out: dict[str, Any] = {}
            name = "?"
            try:
                for name, dec in decoders:
                    out[name] = dec(reader)
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
