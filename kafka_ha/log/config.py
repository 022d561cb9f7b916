"""Per-log settings (topic-level configs of Kafka's ``LogConfig``).

>>> LogConfig(segment_bytes=1024).segment_bytes
1024
>>> LogConfig(segment_bytes=10)
Traceback (most recent call last):
...
ValueError: segment_bytes must be between 26 and 2147483647, not 10
>>> LogConfig(cleanup_policy="compact,delete").compact, LogConfig().compact
(True, False)
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka_ha.records.format import LOG_OVERHEAD, V0_MIN_SIZE
from kafka_ha.records.recompress import TOPIC_CODECS, topic_codec

from .segment import MAX_SEGMENT_BYTES


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30              # log.segment.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000  # log.retention.hours=168; < 0: unlimited
    retention_bytes: int = -1                 # log.retention.bytes; < 0: unlimited
    max_message_bytes: int = 1000012          # message.max.bytes (one entry incl. its 12-byte prefix)
    index_interval_bytes: int = 4096          # log.index.interval.bytes
    flush_messages: int | None = None         # flush.messages: fsync after this many; None: never
    flush_ms: int | None = None               # flush.ms: fsync when unflushed this long; None: never
    file_delete_delay_ms: int = 60000         # file.delete.delay.ms: deleted segments stay readable
    segment_ms: int = 7 * 24 * 3600 * 1000    # segment.ms (log.roll.ms / log.roll.hours=168)
    segment_jitter_ms: int = 0                # segment.jitter.ms (log.roll.jitter.ms)
    cleanup_policy: str = "delete"            # cleanup.policy: delete, compact or compact,delete
    delete_retention_ms: int = 24 * 3600 * 1000   # delete.retention.ms: tombstones stay this long
    min_cleanable_dirty_ratio: float = 0.5    # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0            # min.compaction.lag.ms: newer records stay uncompacted
    log_append_time: bool = False             # message.timestamp.type=LogAppendTime (else CreateTime)
    timestamp_difference_max_ms: int = (1 << 63) - 1   # message.timestamp.difference.max.ms
    compression_type: str = "producer"        # compression.type: the codec the log stores (records.recompress)

    def __post_init__(self) -> None:
        if not LOG_OVERHEAD + V0_MIN_SIZE <= self.segment_bytes <= MAX_SEGMENT_BYTES:
            raise ValueError(f"segment_bytes must be between {LOG_OVERHEAD + V0_MIN_SIZE} and "
                             f"{MAX_SEGMENT_BYTES}, not {self.segment_bytes}")
        if self.max_message_bytes < LOG_OVERHEAD + V0_MIN_SIZE:
            raise ValueError(f"max_message_bytes {self.max_message_bytes} is too small")
        if self.index_interval_bytes < 0 or self.file_delete_delay_ms < 0:
            raise ValueError("index_interval_bytes and file_delete_delay_ms must be >= 0")
        if self.segment_ms < 1 or self.segment_jitter_ms < 0:
            raise ValueError("segment_ms must be >= 1 and segment_jitter_ms >= 0")
        policies = set(self.cleanup_policy.split(","))
        if not policies or not policies <= {"compact", "delete"}:
            raise ValueError(f"cleanup_policy must be delete, compact or compact,delete, "
                             f"not {self.cleanup_policy!r}")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError(f"min_cleanable_dirty_ratio must be between 0 and 1, "
                             f"not {self.min_cleanable_dirty_ratio}")
        if self.delete_retention_ms < 0 or self.min_compaction_lag_ms < 0:
            raise ValueError("delete_retention_ms and min_compaction_lag_ms must be >= 0")
        if self.compression_type not in TOPIC_CODECS:
            raise ValueError(f"compression_type must be one of {', '.join(TOPIC_CODECS)}, "
                             f"not {self.compression_type!r}")
        for name in ("flush_messages", "flush_ms"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0 or None, not {value}")

    @property
    def compact(self) -> bool:
        """The log cleaner keeps only the last record of each key (cleanup.policy has compact)."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def codec(self) -> int | None:
        """The codec id every stored batch has, or None: each keeps its producer's."""
        return topic_codec(self.compression_type)

    @property
    def delete(self) -> bool:
        """retention.ms and retention.bytes delete old segments (cleanup.policy has delete)."""
        return "delete" in self.cleanup_policy.split(",")
