"""The schema's fast paths (a run of integer fields in one struct call, an array of
all-integer structs in one unpack) give the same bytes, values and errors as the
field-by-field walk they replace."""
from __future__ import annotations

import pytest

from kafka_ha.protocol.api import REQUEST_SCHEMAS, RESPONSE_SCHEMAS
from kafka_ha.protocol.primitives import ProtocolError, Reader, Writer
from kafka_ha.protocol.schema import (INT8, INT16, INT32, INT64, STRING, Array, CompactArray,
                                      MissingFieldError, Struct, Type)
from tests.harness.protocol_samples import REQUESTS, RESPONSES, i16, i32, i64, plain


def walk_encode(writer: Writer, typ: Type, value) -> None:
    """The reference: every field with its own primitive, no runs, no block packing."""
    if isinstance(typ, Struct):
        for name, field in typ.fields:
            walk_encode(writer, field, value[name])
        if typ.tagged:
            writer.raw(b"\x00")
    elif isinstance(typ, Array):
        writer.array(value, lambda w, item: walk_encode(w, typ.item, item))
    elif isinstance(typ, CompactArray) and value is not None:
        writer.raw(_varint(len(value) + 1))
        for item in value:
            walk_encode(writer, typ.item, item)
    else:
        typ.encode(writer, value)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


SAMPLES = [(f"request {k.name} v{v}", REQUEST_SCHEMAS[(k, v)], body) for (k, v), body in REQUESTS.items()] + \
          [(f"response {k.name} v{v}", RESPONSE_SCHEMAS[(k, v)], body) for (k, v), body in RESPONSES.items()]


@pytest.mark.parametrize("name, schema, body", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_every_sample_encodes_as_the_field_by_field_walk(name, schema, body):
    reference = Writer()
    walk_encode(reference, schema, body)
    assert schema.to_bytes(body) == reference.getvalue()
    assert plain(schema.from_bytes(reference.getvalue())) == body


POSITION = Struct(("partition", INT32), ("epoch", INT32), ("offset", INT64), ("max_bytes", INT32))
TOPIC = Struct(("topic", STRING), ("flags", INT8), ("count", INT16), ("positions", Array(POSITION)),
               ("last", INT64))


def test_a_struct_of_integers_is_one_packer_and_its_arrays_round_trip():
    assert POSITION.packer is not None and POSITION.packer.format == ">iiqi"
    assert TOPIC.packer is None                     # a string among its fields
    value = {"topic": "t", "flags": -1, "count": 2,
             "positions": [{"partition": p, "epoch": 3, "offset": 1 << 40, "max_bytes": 5} for p in range(3)],
             "last": -9}
    data = TOPIC.to_bytes(value)
    assert data == (i16(1) + b"t" + b"\xff" + i16(2) + i32(3)
                    + b"".join(i32(p, 3) + i64(1 << 40) + i32(5) for p in range(3)) + i64(-9))
    assert TOPIC.from_bytes(data) == value
    empty = {**value, "positions": []}
    assert TOPIC.from_bytes(TOPIC.to_bytes(empty)) == empty
    nullable = Struct(("positions", Array(POSITION, nullable=True)))
    assert nullable.to_bytes({"positions": None}) == i32(-1)
    assert nullable.from_bytes(i32(-1)) == {"positions": None}


def test_errors_inside_a_run_name_the_exact_field():
    ok = {"partition": 1, "epoch": 2, "offset": 3, "max_bytes": 4}
    with pytest.raises(MissingFieldError) as missing:
        POSITION.to_bytes({k: v for k, v in ok.items() if k != "offset"})
    assert missing.value.path == ("offset",)
    with pytest.raises(ProtocolError, match=r"^max_bytes: cannot encode 4294967296 as int32"):
        POSITION.to_bytes({**ok, "max_bytes": 1 << 32})
    with pytest.raises(ProtocolError, match="expected a dict"):
        POSITION.to_bytes([1, 2, 3, 4])
    data = POSITION.to_bytes(ok)
    for cut, field in ((3, "partition"), (6, "epoch"), (12, "offset"), (19, "max_bytes")):
        with pytest.raises(ProtocolError) as cut_short:
            POSITION.decode(Reader(data[:cut]))
        assert cut_short.value.path == (field,)


def test_errors_in_an_array_of_integer_structs_are_the_item_by_item_ones():
    schema = Struct(("positions", Array(POSITION)))
    items = [{"partition": p, "epoch": 0, "offset": p, "max_bytes": 1} for p in range(2)]
    data = schema.to_bytes({"positions": items})
    with pytest.raises(ProtocolError) as cut_short:        # inside the second item's offset
        schema.decode(Reader(data[:4 + 20 + 10]))
    assert cut_short.value.path == ("positions", "offset")
    with pytest.raises(ProtocolError, match="invalid array count -3"):
        schema.from_bytes(i32(-3))
    with pytest.raises(ProtocolError, match="non-nullable array"):
        schema.from_bytes(i32(-1))
    with pytest.raises(ProtocolError, match="non-nullable array"):
        schema.to_bytes({"positions": None})
    with pytest.raises(MissingFieldError) as missing:
        schema.to_bytes({"positions": [items[0], {"partition": 1}]})
    assert missing.value.path == ("positions", "epoch")
    with pytest.raises(ProtocolError, match=r"^positions\.epoch: cannot encode"):
        schema.to_bytes({"positions": [{**items[0], "epoch": 1 << 31}]})
    with pytest.raises(ProtocolError, match="expected a list"):
        schema.to_bytes({"positions": 7})
