"""Kafka's text checkpoint files, written atomically (temp, fsync, rename).

* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` (log dir root)::

      0                      <- version
      2                      <- number of entries
      topic 0 1234           <- topic partition offset
      other 3 5

* ``leader-epoch-checkpoint`` (partition dir)::

      0
      2
      0 0                    <- epoch startOffset
      3 1500

* ``.kafka_cleanshutdown`` (log dir root): present only after a clean
  shutdown; Kafka 3.7+ writes ``{"version":0,"brokerEpoch":N}`` in it.

Readers never raise on a damaged file: they log and return nothing, because
a broker must always be able to restart; the caller then falls back to the
safe choice (full recovery, rebuild from the log).
"""
from __future__ import annotations

import json
import logging
import os
from typing import Optional, Sequence

from .fs import FileSystem, REAL_FS

__all__ = [
    "OffsetCheckpointFile", "LeaderEpochCheckpointFile", "CleanShutdownFile",
    "RECOVERY_POINT_CHECKPOINT", "LOG_START_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT", "LEADER_EPOCH_CHECKPOINT", "CLEAN_SHUTDOWN_FILE",
]

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_VERSION = 0


def _read_entries(fs: FileSystem, path: str, fields: int) -> Optional[list[list[str]]]:
    if not fs.exists(path):
        return None
    try:
        text = fs.read_file(path).decode("utf-8")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2 or int(lines[0]) != _VERSION:
            raise ValueError("bad version line")
        count = int(lines[1])
        body = lines[2:]
        if count != len(body):
            raise ValueError(f"expected {count} entries, found {len(body)}")
        out = []
        for line in body:
            parts = line.split(" ")
            if len(parts) != fields:
                raise ValueError(f"malformed line {line!r}")
            out.append(parts)
        return out
    except (ValueError, UnicodeDecodeError, OSError) as e:
        log.error("ignoring malformed checkpoint file %s: %s", path, e)
        return None


class OffsetCheckpointFile:
    """``{(topic, partition): offset}`` checkpoint."""

    def __init__(self, path: str, fs: FileSystem = REAL_FS) -> None:
        self.path = path
        self.fs = fs

    def read(self) -> dict[tuple[str, int], int]:
        entries = _read_entries(self.fs, self.path, 3)
        out = {}
        for topic, part, off in entries or ():
            try:
                out[(topic, int(part))] = int(off)
            except ValueError:
                log.error("ignoring malformed checkpoint line in %s", self.path)
        return out

    def write(self, offsets: dict[tuple[str, int], int], fsync: bool = True) -> None:
        lines = [str(_VERSION), str(len(offsets))]
        lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
        self.fs.write_file_atomic(self.path, ("\n".join(lines) + "\n").encode(), fsync=fsync)


class LeaderEpochCheckpointFile:
    """``[(epoch, start_offset), ...]`` checkpoint; ``read`` returns None
    when the file is missing or damaged."""

    def __init__(self, path: str, fs: FileSystem = REAL_FS) -> None:
        self.path = path
        self.fs = fs

    def read(self) -> Optional[list[tuple[int, int]]]:
        entries = _read_entries(self.fs, self.path, 2)
        if entries is None:
            return None
        try:
            return [(int(e), int(o)) for e, o in entries]
        except ValueError:
            log.error("ignoring malformed leader epoch checkpoint %s", self.path)
            return None

    def write(self, entries: Sequence[tuple[int, int]], fsync: bool = True, staged: list | None = None) -> None:
        lines = [str(_VERSION), str(len(entries))] + [f"{e} {o}" for e, o in entries]
        self.fs.write_file_atomic(self.path, ("\n".join(lines) + "\n").encode(), fsync=fsync, staged=staged)


class CleanShutdownFile:
    def __init__(self, log_dir: str, fs: FileSystem = REAL_FS) -> None:
        self.path = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        self.fs = fs

    def exists(self) -> bool:
        return self.fs.exists(self.path)

    def read_broker_epoch(self) -> int:
        try:
            return int(json.loads(self.fs.read_file(self.path)).get("brokerEpoch", -1))
        except Exception:
            return -1

    def write(self, broker_epoch: int = -1) -> None:
        data = json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode()
        self.fs.write_file_atomic(self.path, data)

    def delete(self) -> None:
        self.fs.remove(self.path)
        self.fs.fsync_dir(os.path.dirname(self.path))
