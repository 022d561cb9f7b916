"""What a Produce request's version allows in its record sets (Kafka's
ProduceRequest.validateRecords and the transactional check of handleProduceRequest).

Produce v3+ (KIP-98) carries exactly one magic 2 batch per partition; anything
else gets INVALID_RECORD, as Kafka answers since KIP-467 (Kafka 2.1 answered
CORRUPT_MESSAGE, the code of InvalidRecordException's parent then).

Transactions are out of scope here.  A transactional write (a non-null
transactional_id, or a batch with the transactional attribute) is refused
with TRANSACTIONAL_ID_AUTHORIZATION_FAILED: it is what Kafka answers a producer
whose transactional id it may not use, so clients stop with a clear, fatal
error instead of retrying; UNSUPPORTED_FOR_MESSAGE_FORMAT would say the topic's
message format is too old, which is not the reason.

>>> from kafka_ha.records.builder import Record, build_v2_batch, build_legacy_message_set
>>> v3_refusal(build_v2_batch([Record(None, b"v")])) is None
True
>>> v3_refusal(build_legacy_message_set([Record(None, b"v")], magic=1)).name
'INVALID_RECORD'

zstd (KIP-110) is accepted from Produce v7 only, as in Kafka 2.1: an older
request carrying a zstd batch gets UNSUPPORTED_COMPRESSION_TYPE.

>>> zstd_batch = build_v2_batch([Record(None, b"v")], compression="zstd")
>>> produce_refusal(6)(zstd_batch).name, produce_refusal(7)(zstd_batch)
('UNSUPPORTED_COMPRESSION_TYPE', None)
"""
from __future__ import annotations

import itertools

from typing import Callable

from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.produce_api import TRANSACTIONAL_PRODUCE_VERSION, ZSTD_PRODUCE_VERSION
from kafka_ha.records.errors import RecordsError
from kafka_ha.records.format import CODEC_ZSTD, MAGIC_V2, TRANSACTIONAL_MASK
from kafka_ha.records.shallow import iter_entries


def v3_refusal(records) -> ErrorCode | None:
    """The error for a Produce v3+ partition's record set, or None if the version allows it.

    A set that cannot be walked at all is left to the append's own checks (which
    answer CORRUPT_MESSAGE with the reason)."""
    try:
        first_two = list(itertools.islice(iter_entries(records), 2))
    except RecordsError:
        return None
    if len(first_two) != 1 or first_two[0].magic != MAGIC_V2:
        return ErrorCode.INVALID_RECORD
    if first_two[0].attributes & TRANSACTIONAL_MASK:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None



def zstd_refusal(records) -> ErrorCode | None:
    """UNSUPPORTED_COMPRESSION_TYPE if any entry of ``records`` is zstd (a header walk)."""
    try:
        return next((ErrorCode.UNSUPPORTED_COMPRESSION_TYPE for e in iter_entries(records)
                     if e.codec == CODEC_ZSTD), None)
    except RecordsError:
        return None   # left to the append's own checks, as in v3_refusal


def produce_refusal(version: int) -> Callable[[object], ErrorCode | None]:
    """The check a Produce request of ``version`` applies to each partition's records."""
    def refusal(records) -> ErrorCode | None:
        if version >= TRANSACTIONAL_PRODUCE_VERSION:
            error = v3_refusal(records)
            if error is not None:
                return error
        return zstd_refusal(records) if version < ZSTD_PRODUCE_VERSION else None
    return refusal
