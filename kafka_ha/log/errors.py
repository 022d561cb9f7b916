"""Errors of the log layer, each carrying the protocol error code it answers with.

>>> OffsetOutOfRangeError("x").code.name
'OFFSET_OUT_OF_RANGE'
"""
from __future__ import annotations

from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records.errors import RecordsError


class OffsetOutOfRangeError(ValueError):
    """A read outside ``[log_start_offset, log_end_offset]``."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class RecordSetTooLargeError(RecordsError):
    """One append larger than a whole segment (Kafka's RecordBatchTooLargeException)."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE
