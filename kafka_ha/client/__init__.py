"""A small blocking Kafka client (gevent-friendly) for kafka-ha's tools and tests.

- :class:`Producer` -- batching, per-partition ordering, retries with metadata refresh;
- :class:`Consumer` -- ``assign()``/``seek()``/``poll()``, offset reset, group offsets;
- :class:`ClusterMetadata` -- bootstrap, Metadata v1 snapshots, one connection per broker;
- :mod:`.errors` -- :class:`KafkaError` with retriable and fatal subclasses.

Objects are bound to the gevent hub of the thread that uses them: use each
client from one OS thread (any number of greenlets), monkey-patched or not.
"""
from .cluster import ClusterMetadata, MetadataSnapshot
from .consumer import Consumer, ConsumerRecord
from .errors import (FatalError, KafkaConnectionError, KafkaError, KafkaTimeoutError,
                     NoBrokersAvailable, OffsetOutOfRangeError, RetriableError)
from .future import RecordFuture, RecordMetadata
from .producer import Producer

__all__ = [
    "ClusterMetadata", "MetadataSnapshot", "Consumer", "ConsumerRecord", "Producer",
    "RecordFuture", "RecordMetadata", "KafkaError", "RetriableError", "FatalError",
    "KafkaConnectionError", "KafkaTimeoutError", "NoBrokersAvailable", "OffsetOutOfRangeError",
]
