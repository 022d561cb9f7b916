"""Spark's Kafka read schema in Arrow, and ConsumerRecords turned into RecordBatches.

The schemas are exactly what Spark's ``to_arrow_schema(schema, timezone="UTC")``
makes of :data:`kafka_ha.spark.source.SCHEMA` (a test checks it): Spark rejects
batches whose schema differs.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                          ("partition", pa.int32()), ("offset", pa.int64()),
                          ("timestamp", TIMESTAMP_TYPE), ("timestampType", pa.int32())])
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA.append(pa.field("headers", HEADERS_TYPE))


def records_to_batch(topic: str, partition: int, records: list,
                     include_headers: bool = False) -> pa.RecordBatch:
    """ConsumerRecords of one partition as a RecordBatch in :data:`ARROW_SCHEMA`
    (or :data:`ARROW_SCHEMA_WITH_HEADERS`: a record without headers has null ones, as in Spark).

    >>> from kafka_ha.client import ConsumerRecord
    >>> records = [ConsumerRecord("t", 1, 7, 1500, None, b"v", (("h", b"x"),), 0),
    ...            ConsumerRecord("t", 1, 8, -1, b"k", b"w", (), -1)]
    >>> b = records_to_batch("t", 1, records, include_headers=True)
    >>> b.column("timestamp").to_pylist()[0].isoformat(), b.column("timestamp").to_pylist()[1]
    ('1970-01-01T00:00:01.500000+00:00', None)
    >>> b.column("headers").to_pylist()
    [[{'key': 'h', 'value': b'x'}], None]
    """
    n = len(records)
    _, _, offsets, stamps, keys, values, headers, types = zip(*records)
    millis = pa.array(stamps, pa.int64())
    if -1 in types:   # magic-0 records carry no timestamp: null, as Spark's source does
        millis = pc.if_else(pa.array([t == -1 for t in types]), pa.scalar(None, pa.int64()), millis)
    columns = [
        pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n), pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()), pc.multiply(millis, 1000).cast(TIMESTAMP_TYPE),
        pa.array(types, pa.int32())]
    if not include_headers:
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
    columns.append(pa.array([[{"key": k, "value": v} for k, v in h] if h else None
                             for h in headers], HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA_WITH_HEADERS)
