"""Partition logs on disk: segments, indexes, checkpoints, epochs, recovery.

:class:`LogManager` owns every :class:`Log` of a broker; a log is a list of
:class:`LogSegment` s plus a :class:`LeaderEpochCache`.  Pure logic (the
epoch cache, checkpoint parsing) is separate from the file handling.
"""
from .checkpoints import CorruptCheckpointError, LeaderEpochCheckpointFile, OffsetCheckpointFile
from .config import LogConfig
from .epoch_cache import EpochEntry, LeaderEpochCache
from .errors import OffsetOutOfRangeError, RecordSetTooLargeError
from .log import AppendInfo, FetchData, Log
from .log_manager import LogManager
from .segment import FileSlice, LogSegment

__all__ = [
    "AppendInfo", "CorruptCheckpointError", "EpochEntry", "FetchData", "FileSlice",
    "LeaderEpochCache", "LeaderEpochCheckpointFile", "Log", "LogConfig", "LogManager", "LogSegment",
    "OffsetCheckpointFile", "OffsetOutOfRangeError", "RecordSetTooLargeError",
]
