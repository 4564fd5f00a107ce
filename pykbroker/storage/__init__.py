"""Kafka-compatible log storage: segments, indexes, checkpoints, recovery,
leader epochs and idempotent producer state.  See the module docstrings."""
from .fs import FileSystem, REAL_FS
from .index import OffsetIndex, TimeIndex
from .segment import FileRegion, LogSegment
from .checkpoints import (
    OffsetCheckpointFile, LeaderEpochCheckpointFile, CleanShutdownFile,
)
from .epoch import LeaderEpochCache
from .producer_state import ProducerStateManager
from .log import (
    Log, LogConfig, LogLoader, AppendInfo, StorageError, OffsetOutOfRange,
    ProducerStateError, KafkaStorageError, load_log,
)
from .manager import LogManager

__all__ = [
    "FileSystem", "REAL_FS", "OffsetIndex", "TimeIndex", "FileRegion", "LogSegment",
    "OffsetCheckpointFile", "LeaderEpochCheckpointFile", "CleanShutdownFile",
    "LeaderEpochCache", "ProducerStateManager", "Log", "LogConfig", "LogLoader",
    "AppendInfo", "StorageError", "OffsetOutOfRange", "ProducerStateError",
    "KafkaStorageError", "load_log", "LogManager",
]
