"""Exceptions raised while parsing, validating or building record data.

Each carries the protocol error code the broker answers with (``.code``), so
the request handler maps them without a lookup table of its own.

>>> CorruptRecordError("bad crc").code.name
'CORRUPT_MESSAGE'
>>> isinstance(RecordTooLargeError("x"), ValueError)
True
"""
from __future__ import annotations

from kafka_ha.protocol.errors import ErrorCode


class RecordsError(ValueError):
    """Base class: the record data cannot be accepted as it is."""

    code: ErrorCode = ErrorCode.CORRUPT_MESSAGE


class CorruptRecordError(RecordsError):
    """CRC mismatch, impossible sizes, truncated or empty input (CORRUPT_MESSAGE)."""

    code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLargeError(RecordsError):
    """One entry is larger than ``max.message.bytes`` (MESSAGE_TOO_LARGE)."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class UnsupportedCompressionError(RecordsError):
    """Unknown codec id, or a codec whose library is not installed."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class OffsetMismatchError(RecordsError):
    """Follower data that does not continue the local log (gap or overlap).

    The leader sent offsets already assigned; a gap means the two logs
    disagree, which Kafka also reports as corruption of the fetched data.
    """

    code = ErrorCode.CORRUPT_MESSAGE


class InvalidTimestampError(RecordsError):
    """A CreateTime timestamp beyond ``message.timestamp.difference.max.ms`` (INVALID_TIMESTAMP)."""

    code = ErrorCode.INVALID_TIMESTAMP
