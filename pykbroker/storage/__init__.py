"""Kafka-compatible log storage: segments, indexes, checkpoints, recovery,
leader epochs and idempotent producer state.

Typical use by the produce/fetch/list-offsets paths::

    v = log_validator.validate_produce_records(buf, log.config.max_message_bytes)  # RecordError
    info = log.append(v, leader_epoch, auto_flush=False)   # ProducerStateError, KafkaStorageError
    if info.flush_required: await trio.to_thread.run_sync(log.flush)
    regions = log.read(fetch_offset, max_bytes, high_watermark)  # OffsetOutOfRange
    for r in regions: os.sendfile(sock, r.fd, r.position, r.length)
    log.offset_for_timestamp(ts); log.max_timestamp_offset(); log.end_offset_for_epoch(e)

See the module docstrings (log_validator.py, log.py, log_loader.py, log_config.py, errors.py, segment.py,
index.py, producer_state.py, epoch.py, checkpoints.py) for formats and Kafka rules."""
from .fs import FileSystem, REAL_FS
from .index import OffsetIndex, TimeIndex
from .segment import FileRegion, LogSegment
from .checkpoints import (
    OffsetCheckpointFile, LeaderEpochCheckpointFile, CleanShutdownFile,
)
from .epoch import LeaderEpochCache
from .producer_state import ProducerStateManager
from .errors import StorageError, OffsetOutOfRange, ProducerStateError, KafkaStorageError
from .log_config import LogConfig
from .log import Log, AppendInfo
from .log_loader import LogLoader, load_log
from .manager import LogManager

__all__ = [
    "FileSystem", "REAL_FS", "OffsetIndex", "TimeIndex", "FileRegion", "LogSegment",
    "OffsetCheckpointFile", "LeaderEpochCheckpointFile", "CleanShutdownFile",
    "LeaderEpochCache", "ProducerStateManager", "Log", "LogConfig", "LogLoader",
    "AppendInfo", "StorageError", "OffsetOutOfRange", "ProducerStateError",
    "KafkaStorageError", "load_log", "LogManager",
]
