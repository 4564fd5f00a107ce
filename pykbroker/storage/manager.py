"""LogManager: all partition logs of one ``log.dir`` plus the root files
(Kafka's checkpoints and the clean shutdown marker).

Startup: the marker tells whether the previous shutdown was clean; it is
deleted immediately so that a crash from now on is detected next time.
Shutdown: close every log (flush + producer snapshots), write the recovery
point and log start checkpoints, then the marker.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Callable, Optional

from .checkpoints import (
    CleanShutdownFile, OffsetCheckpointFile, LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
)
from .fs import FileSystem, REAL_FS
from .log import Log, LogConfig, load_log, parse_partition_dir, partition_dir_name

__all__ = ["LogManager"]

log = logging.getLogger(__name__)

TopicPartition = tuple  # (topic, partition)


class LogManager:
    def __init__(self, log_dir: str, default_config: Optional[LogConfig] = None,
                 fs: FileSystem = REAL_FS,
                 config_for: Optional[Callable[[str], LogConfig]] = None):
        self.log_dir = log_dir
        self.default_config = default_config or LogConfig()
        self.config_for = config_for          # topic -> LogConfig (topic overrides)
        self.fs = fs
        self.logs: dict[TopicPartition, Log] = {}
        self._lock = threading.Lock()
        self.recovery_point_ckpt = OffsetCheckpointFile(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT), fs)
        self.log_start_ckpt = OffsetCheckpointFile(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT), fs)
        self.hw_ckpt = OffsetCheckpointFile(os.path.join(log_dir, REPLICATION_OFFSET_CHECKPOINT), fs)
        self.clean_marker = CleanShutdownFile(log_dir, fs)
        self.had_clean_shutdown = False

    def _config(self, topic: str) -> LogConfig:
        return self.config_for(topic) if self.config_for else self.default_config

    def startup(self) -> None:
        """Load every ``<topic>-<partition>`` directory."""
        fs = self.fs
        fs.makedirs(self.log_dir)
        self.had_clean_shutdown = self.clean_marker.exists()
        if self.had_clean_shutdown:
            self.clean_marker.delete()
        recovery = self.recovery_point_ckpt.read()
        starts = self.log_start_ckpt.read()
        hws = self.hw_ckpt.read()
        for name in sorted(fs.listdir(self.log_dir)):
            path = os.path.join(self.log_dir, name)
            if not fs.isdir(path):
                continue
            if name.endswith("-delete"):
                # Kafka renames deleted partitions to *-delete before removal
                fs.rmtree(path)
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            lg = load_log(path, self._config(tp[0]), recovery.get(tp, 0),
                          self.had_clean_shutdown, starts.get(tp), fs)
            lg.high_watermark = min(max(hws.get(tp, 0), lg.log_start_offset), lg.log_end_offset)
            self.logs[tp] = lg
        log.info("loaded %d logs from %s (clean shutdown: %s)",
                 len(self.logs), self.log_dir, self.had_clean_shutdown)

    def get_log(self, topic: str, partition: int) -> Optional[Log]:
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int,
                          config: Optional[LogConfig] = None) -> Log:
        tp = (topic, partition)
        with self._lock:
            lg = self.logs.get(tp)
            if lg is None:
                path = os.path.join(self.log_dir, partition_dir_name(topic, partition))
                lg = load_log(path, config or self._config(topic), 0, False, None, self.fs)
                self.fs.fsync_dir(self.log_dir)
                self.logs[tp] = lg
            return lg

    def delete_log(self, topic: str, partition: int) -> None:
        with self._lock:
            lg = self.logs.pop((topic, partition), None)
        if lg is not None:
            lg.delete()

    # ------------------------------------------------------------ checkpoints
    def checkpoint_recovery_points(self) -> None:
        self.recovery_point_ckpt.write({tp: lg.recovery_point for tp, lg in self.logs.items()})

    def checkpoint_log_start_offsets(self) -> None:
        # Kafka only lists logs whose start is above their first segment's base
        self.log_start_ckpt.write({tp: lg.log_start_offset for tp, lg in self.logs.items()
                                   if lg.log_start_offset > lg.segments[0].base_offset})

    def checkpoint_high_watermarks(self, hws: Optional[dict] = None) -> None:
        if hws is None:
            hws = {tp: lg.high_watermark for tp, lg in self.logs.items()}
        self.hw_ckpt.write(hws)

    def flush_all(self) -> None:
        """Flush every log and checkpoint the recovery points (blocking)."""
        for lg in list(self.logs.values()):
            lg.flush()
        self.checkpoint_recovery_points()

    def shutdown(self, broker_epoch: int = -1) -> None:
        for lg in list(self.logs.values()):
            lg.close()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self.clean_marker.write(broker_epoch)
