"""Open a partition directory at startup: segments, recovery, the epoch cache.

What runs (Kafka's ``Log.loadSegments`` / ``recoverLog``):

1. Leftovers of interrupted operations are removed: ``*.tmp`` checkpoint
   files, ``*.deleted`` segments and ``.index`` files without a ``.log``;
   a cleaned segment's swap is finished or undone (:mod:`.clean_swap`).
2. Every segment is opened; a missing or implausible index is rebuilt from
   entry headers (:class:`~kafka_ha.log.segment.LogSegment`).
3. Segments that may hold offsets at or above the recovery point (all of them
   after an unclean shutdown with recovery point 0), and any segment whose
   tail does not parse, are CRC-checked; a corrupt or partial tail is cut and
   the segments after it are deleted, since nothing after a hole can be trusted.
4. The leader epoch cache is read from ``leader-epoch-checkpoint``.  A missing
   or garbage file is rebuilt from the partition leader epochs of the v2
   batches in the log, so a damaged checkpoint never makes a replica forget
   epochs (and truncate committed data when asked by a follower).  Entries
   starting at or after the recovered log end are dropped.
5. The file is only made durable when the records are (see
   :mod:`.epoch_cache`), so after a crash it may be older than the batches
   that survived, or, for a log truncated since, name epochs they do not
   have.  The batches that were read anyway (recovered segments) and the
   log's last batch are compared with it: if any batch's epoch is not the
   one the cache says for its offset, the cache is rebuilt from the log.
"""
from __future__ import annotations

import logging
import os
import re

from kafka_ha.records.shallow import Entry

from .checkpoints import CorruptCheckpointError, LeaderEpochCheckpointFile
from .clean_swap import complete_interrupted_cleaning
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .segment import LogSegment

log = logging.getLogger(__name__)

EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# Producer-state snapshots, which the broker keeps beside the segments (broker/producer_snapshots.py).
PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"
_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex)$")


def _remove_leftovers(dir: str) -> list[int]:
    """Delete debris of interrupted operations; return the base offsets of the segments."""
    names = os.listdir(dir)
    logs = set()
    for name in names:
        m = _SEGMENT_NAME.match(name)
        if m and m.group(2) == "log":
            logs.add(int(m.group(1)))
    for name in names:
        m = _SEGMENT_NAME.match(name)
        orphan_index = m and m.group(2) != "log" and int(m.group(1)) not in logs
        if name.endswith((".tmp", ".deleted")) or orphan_index:
            log.info("removing leftover file %s", os.path.join(dir, name))
            os.unlink(os.path.join(dir, name))
        elif not m and name != EPOCH_CHECKPOINT and not name.endswith(PRODUCER_SNAPSHOT_SUFFIX):
            log.warning("ignoring unexpected file %s in log directory", os.path.join(dir, name))
    return sorted(logs)


def load_segments(dir: str, config: LogConfig, recovery_point: int,
                  clean_shutdown: bool) -> tuple[list[LogSegment], list[LogSegment]]:
    """The segments of ``dir``, recovered as needed; ``(segments, those recovered)``."""
    complete_interrupted_cleaning(dir)       # a crash while the log cleaner swapped a segment
    bases = _remove_leftovers(dir)
    segments = [LogSegment(dir, base, config.index_interval_bytes) for base in bases]
    recovered: list[LogSegment] = []
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        unflushed = not clean_shutdown and (next_base is None or next_base > recovery_point)
        if not (unflushed or segment.tail_damaged):
            continue
        log.info("[Log partition=%s, dir=%s] Recovering %s segment %d", os.path.basename(dir),
                 os.path.dirname(dir), "unflushed" if unflushed else "damaged", segment.base_offset)
        recovered.append(segment)
        truncated = segment.recover(config.max_message_bytes)
        if truncated and i + 1 < len(segments):
            later = segments[i + 1:]
            log.error("segment %s had a corrupt tail; deleting the %d later segments %s",
                      segment.log_path, len(later), [s.base_offset for s in later])
            for s in later:
                s.delete()
            del segments[i + 1:]
            break
    if not segments:
        segments = [LogSegment(dir, 0, config.index_interval_bytes)]
    return segments, recovered


def epochs_from_log(segments: list[LogSegment]) -> list[tuple[int, int]]:
    """``(epoch, start_offset)`` of every change of partition leader epoch in the v2 batches."""
    result: list[tuple[int, int]] = []
    for segment in segments:
        for entry in segment.headers():
            epoch = entry.partition_leader_epoch
            if entry.magic == 2 and epoch >= 0 and (not result or epoch > result[-1][0]):
                result.append((epoch, entry.first_offset))
    return result


def _last_entry(segments: list[LogSegment]) -> Entry | None:
    """The log's last entry (a header scan from the last index entry of the last non-empty segment)."""
    for segment in reversed(segments):
        last = None
        for last in segment.headers(segment.index.last_position):
            pass
        if last is not None:
            return last
    return None


def _disagreement(cache: LeaderEpochCache, entries) -> Entry | None:
    """The first v2 batch whose partition leader epoch is not the cache's epoch for its offset."""
    for entry in entries:
        epoch = entry.partition_leader_epoch
        if entry.magic == 2 and epoch >= 0 and cache.epoch_at(entry.first_offset) != epoch:
            return entry
    return None


def _batches_to_check(segments: list[LogSegment], recovered: list[LogSegment]):
    """The entries of the recovered segments (read anyway), then the log's last entry."""
    for segment in recovered:
        yield from segment.headers()
    if not recovered or recovered[-1] is not segments[-1]:
        last = _last_entry(segments)
        if last is not None:
            yield last


def new_epoch_cache(dir: str) -> LeaderEpochCache:
    """The empty epoch cache of a new log in ``dir`` (nothing is read or written)."""
    return LeaderEpochCache(LeaderEpochCheckpointFile(os.path.join(dir, EPOCH_CHECKPOINT)))


def load_epoch_cache(dir: str, segments: list[LogSegment],
                     recovered: list[LogSegment] = ()) -> LeaderEpochCache:
    """The epoch cache from its checkpoint, or rebuilt from the log (see module doc);
    the batches of the ``recovered`` segments are checked against it."""
    checkpoint = LeaderEpochCheckpointFile(os.path.join(dir, EPOCH_CHECKPOINT))
    try:
        cache = LeaderEpochCache.load(checkpoint)
    except CorruptCheckpointError as exc:
        log.warning("%s; rebuilding the leader epochs from the log", exc)
        cache = None
    if cache is not None:
        cache.truncate_from_end(segments[-1].next_offset, defer_at_end=True)
        cache.truncate_from_start(segments[0].base_offset)
        wrong = _disagreement(cache, _batches_to_check(segments, recovered))
        if wrong is not None:
            log.warning("%s: the batch at offset %d has partition leader epoch %d, the checkpoint says "
                        "epoch %d; rebuilding the leader epochs from the log", checkpoint.path,
                        wrong.first_offset, wrong.partition_leader_epoch, cache.epoch_at(wrong.first_offset))
            cache = None
    if cache is None:
        cache = LeaderEpochCache(checkpoint)
        cache.replace(epochs_from_log(segments))
        cache.truncate_from_end(segments[-1].next_offset)
        cache.truncate_from_start(segments[0].base_offset)
    return cache
