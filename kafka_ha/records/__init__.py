"""Kafka record formats: magic 0/1 message sets and v2 record batches.

Broker side: :mod:`.shallow` (walk entries by header), :mod:`.validate`
(offset assignment, follower checks).  Client side: :mod:`.builder`,
:mod:`.reader`.  Layouts and CRCs: :mod:`.format`; codecs: :mod:`.compression`.
"""
from .builder import Record, build_legacy_message_set, build_v2_batch
from .errors import (CorruptRecordError, OffsetMismatchError, RecordsError, RecordTooLargeError,
                     UnsupportedCompressionError)
from .reader import DecodedRecord, decode_records
from .shallow import Entry, iter_entries, valid_length, validate_entry
from .validate import Assigned, FollowerRecords, assign_offsets, validate_follower_records

__all__ = [
    "Assigned", "CorruptRecordError", "DecodedRecord", "Entry", "FollowerRecords",
    "OffsetMismatchError", "Record", "RecordTooLargeError", "RecordsError",
    "UnsupportedCompressionError", "assign_offsets", "build_legacy_message_set", "build_v2_batch",
    "decode_records", "iter_entries", "valid_length", "validate_entry", "validate_follower_records",
]
