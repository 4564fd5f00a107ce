"""Sparse segment indexes, Kafka's ``.index`` and ``.timeindex`` formats.

* OffsetIndex entries: (relative offset int32, file position int32), 8 bytes,
  big endian.  As in Kafka the relative offset is the *last* offset of the
  batch that starts at that position; a lookup takes the greatest entry
  <= target and the caller scans batch headers forward from its position.
* TimeIndex entries: (timestamp int64, relative offset int32), 12 bytes; an
  entry is only added when its timestamp is larger than the last one, so the
  offset is that of the first batch reaching that max timestamp.

Storage choice: Kafka preallocates and mmaps index files, trimming them on
close.  We keep the entries in memory (``array`` of int32/int64: compact,
bisect-able) as the source of truth while running and *append* the not yet
persisted entries to a plain file on flush/roll/close.  The on-disk bytes
are therefore identical to a trimmed Kafka index.  After a crash the file
may lack recent entries or hold garbage; both are caught by
:meth:`sanity_check` and indexes are rebuilt from the log (they carry no
checksum and are always derivable from the segment).

Capacity: ``max_entries`` mirrors ``segment.index.bytes`` (default 10 MiB)
divided by the entry size; when full, the log rolls a new segment, as Kafka
does.  Relative offsets are int32, which is why a segment may not span more
than 2^31-1 offsets.
"""
from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from typing import Optional

from .fs import FileSystem, REAL_FS

__all__ = ["OffsetIndex", "TimeIndex", "IndexCorrupt"]

_OFF_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class IndexCorrupt(Exception):
    pass


class _Index:
    ENTRY: struct.Struct

    def __init__(self, path: str, base_offset: int, max_entries: int, fs: FileSystem = REAL_FS):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self.fs = fs
        self._persisted = 0      # entries already written to the file
        self._dirty = False      # written but not fsynced

    # subclasses provide: _a, _b arrays, entries(), _append_raw

    def __len__(self) -> int:
        return len(self._a)

    @property
    def is_full(self) -> bool:
        return len(self._a) >= self.max_entries

    def _load_raw(self) -> list:
        """Read the file's entries; raise IndexCorrupt on a bad size."""
        if not self.fs.exists(self.path):
            raise IndexCorrupt(f"{self.path} is missing")
        data = self.fs.read_file(self.path)
        if len(data) % self.ENTRY.size:
            raise IndexCorrupt(f"{self.path} size {len(data)} is not a multiple of {self.ENTRY.size}")
        return list(self.ENTRY.iter_unpack(data))

    def persist(self, fsync: bool = False) -> None:
        """Append the entries not yet on disk, optionally fsync."""
        n = len(self._a)
        if self._persisted > n:      # truncated in memory since: cut the file
            self._rewrite()
        elif self._persisted < n:
            data = b"".join(self._pack(i) for i in range(self._persisted, n))
            fd = self.fs.open(self.path, os.O_WRONLY | os.O_CREAT)
            try:
                self.fs.pwrite(fd, data, self._persisted * self.ENTRY.size)
                self.fs.ftruncate(fd, n * self.ENTRY.size)
                if fsync:
                    self.fs.fsync(fd)
            finally:
                self.fs.close(fd)
            self._persisted = n
            self._dirty = not fsync
            return
        elif not self.fs.exists(self.path):
            self._rewrite()
        if fsync and self._dirty:
            fd = self.fs.open(self.path, os.O_WRONLY | os.O_CREAT)
            try:
                self.fs.fsync(fd)
            finally:
                self.fs.close(fd)
            self._dirty = False

    def _rewrite(self) -> None:
        data = b"".join(self._pack(i) for i in range(len(self._a)))
        fd = self.fs.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self.fs.pwrite(fd, data, 0)
        finally:
            self.fs.close(fd)
        self._persisted = len(self._a)
        self._dirty = True

    def reset(self) -> None:
        del self._a[:]
        del self._b[:]
        self._rewrite()

    def delete(self) -> None:
        self.fs.remove(self.path)

    def rename(self, new_path: str) -> None:
        if self.fs.exists(self.path):
            self.fs.rename(self.path, new_path)
        self.path = new_path


class OffsetIndex(_Index):
    ENTRY = _OFF_ENTRY

    def __init__(self, path, base_offset, max_entries, fs=REAL_FS):
        super().__init__(path, base_offset, max_entries, fs)
        self._a = array("i")   # relative offsets (of a batch's last offset)
        self._b = array("i")   # file positions

    def _pack(self, i):
        return _OFF_ENTRY.pack(self._a[i], self._b[i])

    def load(self, log_size: int) -> None:
        """Load from disk and sanity-check (raises IndexCorrupt)."""
        entries = self._load_raw()
        last_rel, last_pos = -1, -1
        for rel, pos in entries:
            if rel <= last_rel or pos <= last_pos or rel < 0 or pos < 0 or pos >= log_size:
                raise IndexCorrupt(f"{self.path}: bad entry ({rel}, {pos})")
            last_rel, last_pos = rel, pos
        self._a = array("i", (e[0] for e in entries))
        self._b = array("i", (e[1] for e in entries))
        self._persisted = len(entries)

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._a and (rel <= self._a[-1] or position <= self._b[-1]):
            return  # keep the index strictly monotonic; a skipped entry only costs a longer scan
        self._a.append(rel)
        self._b.append(position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """Greatest entry with offset <= target: (offset, position), or
        (base_offset, 0) when there is none."""
        rel = target_offset - self.base_offset
        i = bisect_right(self._a, rel) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._a[i], self._b[i]

    def lookup_position(self, position: int) -> int:
        """Greatest indexed batch position <= ``position`` (0 if none)."""
        i = bisect_right(self._b, position) - 1
        return self._b[i] if i >= 0 else 0

    def truncate_to_position(self, size: int) -> None:
        """Drop entries pointing at or beyond byte ``size``."""
        i = bisect_right(self._b, size - 1)
        del self._a[i:]
        del self._b[i:]

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + a, b) for a, b in zip(self._a, self._b)]

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._a:
            return self.base_offset, 0
        return self.base_offset + self._a[-1], self._b[-1]


class TimeIndex(_Index):
    ENTRY = _TIME_ENTRY

    def __init__(self, path, base_offset, max_entries, fs=REAL_FS):
        super().__init__(path, base_offset, max_entries, fs)
        self._a = array("q")   # timestamps
        self._b = array("i")   # relative offsets

    def _pack(self, i):
        return _TIME_ENTRY.pack(self._a[i], self._b[i])

    def load(self, max_relative_offset: Optional[int] = None) -> None:
        entries = self._load_raw()
        last_ts, last_rel = None, -1
        for ts, rel in entries:
            if rel < last_rel or rel < 0 or (last_ts is not None and ts <= last_ts):
                raise IndexCorrupt(f"{self.path}: bad entry ({ts}, {rel})")
            if max_relative_offset is not None and rel > max_relative_offset:
                raise IndexCorrupt(f"{self.path}: entry beyond segment end")
            last_ts, last_rel = ts, rel
        self._a = array("q", (e[0] for e in entries))
        self._b = array("i", (e[1] for e in entries))
        self._persisted = len(entries)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append only when the timestamp grows (Kafka's rule)."""
        if timestamp < 0:
            return
        if self._a and timestamp <= self._a[-1]:
            return
        rel = offset - self.base_offset
        if self._b and rel < self._b[-1]:
            return
        self._a.append(timestamp)
        self._b.append(rel)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Greatest entry with ts <= target: (ts, offset); (-1, base) if none."""
        i = bisect_right(self._a, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._a[i], self.base_offset + self._b[i]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset >= ``offset``."""
        rel = offset - self.base_offset
        i = len(self._b)
        while i > 0 and self._b[i - 1] >= rel:
            i -= 1
        del self._a[i:]
        del self._b[i:]

    def entries(self) -> list[tuple[int, int]]:
        return [(a, self.base_offset + b) for a, b in zip(self._a, self._b)]

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._a:
            return -1, self.base_offset
        return self._a[-1], self.base_offset + self._b[-1]
