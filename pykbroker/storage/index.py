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

Lazy loading: at startup only the size and the *last* entry of each index
file are read (:meth:`open_lazy`); the whole index is read and checked on
first lookup, as Kafka's LazyIndex does, so that opening thousands of
segments stays cheap.  A lazily loaded index found damaged then is rebuilt
from the log by the owning segment (``on_corrupt``).

Capacity: ``max_entries`` mirrors ``segment.index.bytes`` (default 10 MiB)
divided by the entry size; when full, the log rolls a new segment, as Kafka
does.  Relative offsets are int32, which is why a segment may not span more
than 2^31-1 offsets.
"""
from __future__ import annotations

import logging
import operator
import os
import struct
from array import array
from bisect import bisect_right
from typing import Any, Callable, Iterable, Optional, Sequence

from .fs import FileSystem, REAL_FS

__all__ = ["OffsetIndex", "TimeIndex", "IndexCorrupt"]

_OFF_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


log = logging.getLogger(__name__)


class IndexCorrupt(Exception):
    pass


class _Index:
    ENTRY: struct.Struct

    def __init__(self, path: str, base_offset: int, max_entries: int, fs: FileSystem = REAL_FS) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self.fs = fs
        self._persisted = 0      # entries already written to the file
        self._dirty = False      # written but not fsynced
        self._lazy_args: Optional[tuple[Any, ...]] = None  # set by open_lazy until the first real use
        self._lazy_last: Optional[tuple[int, int]] = None  # last entry read by open_lazy
        self.on_corrupt: Optional[Callable[[], None]] = None
        self._a, self._b = self._empty()

    # Each subclass's pair of columns, empty or holding the given values.
    @staticmethod
    def _empty(a: Iterable[int] = (), b: Iterable[int] = ()) -> tuple[array[int], array[int]]:
        raise NotImplementedError

    # Each subclass's loader (open_lazy stores its arguments for the deferred call).
    def load(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    # The two columns (see _empty); reading them forces a pending lazy load.  The getters
    # stay plain attribute reads: lookups on the fetch path go through them.  Assigning a
    # column replaces whatever a pending lazy load (open_lazy) would have read.
    @property
    def _a(self) -> array[int]:
        if self._lazy_args is not None:
            self._ensure()
        return self._ra

    @_a.setter
    def _a(self, v: array[int]) -> None:
        self._lazy_args = None
        self._ra = v

    @property
    def _b(self) -> array[int]:
        if self._lazy_args is not None:
            self._ensure()
        return self._rb

    @_b.setter
    def _b(self, v: array[int]) -> None:
        self._lazy_args = None
        self._rb = v

    def _ensure(self) -> None:
        args, self._lazy_args = self._lazy_args, None
        try:
            self.load(*(args or ()))
        except (IndexCorrupt, OSError) as e:
            log.warning("index %s is damaged (%s); rebuilding it from the log", self.path, e)
            self._ra, self._rb = self._empty()
            if self.on_corrupt is not None:
                self.on_corrupt()

    def open_lazy(self, *load_args: Any) -> Optional[tuple[int, int]]:
        """Check size and read only the last raw entry; defer the rest.
        Returns the last raw entry (or None when empty).  IndexCorrupt if
        missing or of a bad size."""
        if not self.fs.exists(self.path):
            raise IndexCorrupt(f"{self.path} is missing")
        size = self.fs.size(self.path)
        esz = self.ENTRY.size
        if size % esz:
            raise IndexCorrupt(f"{self.path} size {size} is not a multiple of {esz}")
        last = None
        if size:
            fd = self.fs.open(self.path, os.O_RDONLY)
            try:
                raw = self.fs.pread(fd, esz, size - esz)
            finally:
                self.fs.close(fd)
            if len(raw) != esz:
                raise IndexCorrupt(f"{self.path}: short read")
            last = self.ENTRY.unpack(raw)
        self._ra, self._rb = self._empty()
        self._lazy_args = load_args
        self._lazy_last = last
        self._persisted = size // esz
        return last

    @property
    def is_lazy(self) -> bool:
        return self._lazy_args is not None

    def __len__(self) -> int:
        return len(self._a)

    @property
    def is_full(self) -> bool:
        # asked on every append (the roll check): the column read without its property while
        # no lazy load is pending (the active segment's indexes are always loaded)
        if self._lazy_args is None:
            return len(self._ra) >= self.max_entries
        return len(self._a) >= self.max_entries

    def _load_raw(self) -> tuple[tuple, tuple]:
        """Read the file's entries as two columns; IndexCorrupt on a bad size.
        One struct call for the whole file: startup loads every segment's
        indexes, so this must not be a per-entry Python loop."""
        if not self.fs.exists(self.path):
            raise IndexCorrupt(f"{self.path} is missing")
        data = self.fs.read_file(self.path)
        size = self.ENTRY.size
        if len(data) % size:
            raise IndexCorrupt(f"{self.path} size {len(data)} is not a multiple of {size}")
        n = len(data) // size
        flat = struct.unpack(">" + self.ENTRY.format.lstrip(">") * n, data)
        return flat[0::2], flat[1::2]

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

    def sync(self) -> None:
        """fsync what :meth:`persist` wrote.  Touches no entries, so it may
        run in a worker thread while the owner keeps appending."""
        if not self._dirty:
            return
        self._dirty = False
        try:
            fd = self.fs.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            self.fs.fsync(fd)
        finally:
            self.fs.close(fd)

    def _rewrite(self) -> None:
        data = b"".join(self._pack(i) for i in range(len(self._a)))
        fd = self.fs.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self.fs.pwrite(fd, data, 0)
        finally:
            self.fs.close(fd)
        self._persisted = len(self._a)
        self._dirty = True

    def _pack(self, i: int) -> bytes:
        return self.ENTRY.pack(self._a[i], self._b[i])

    def _loaded(self, a: Sequence[int], b: Sequence[int]) -> None:
        """Install the columns just read (and checked) from the file."""
        self._a, self._b = self._empty(a, b)
        self._persisted = len(a)

    def reset(self) -> None:
        self._a, self._b = self._empty()
        self._rewrite()

    def delete(self) -> None:
        self.fs.remove(self.path)

    def rename(self, new_path: str) -> None:
        if self.fs.exists(self.path):
            self.fs.rename(self.path, new_path)
        self.path = new_path


class OffsetIndex(_Index):
    ENTRY = _OFF_ENTRY

    @staticmethod
    def _empty(rels: Iterable[int] = (), positions: Iterable[int] = ()) -> tuple[array[int], array[int]]:
        # relative offsets (of a batch's last offset), file positions
        return array("i", rels), array("i", positions)

    def load(self, log_size: int) -> None:
        """Load from disk and sanity-check (raises IndexCorrupt)."""
        rels, poss = self._load_raw()
        if rels and (rels[0] < 0 or poss[0] < 0 or poss[-1] >= log_size
                     or not all(map(operator.lt, rels, rels[1:]))
                     or not all(map(operator.lt, poss, poss[1:]))):
            raise IndexCorrupt(f"{self.path}: entries not strictly increasing or beyond the log")
        self._loaded(rels, poss)

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
        if self._lazy_args is not None:
            if self._lazy_last is None:
                return self.base_offset, 0
            return self.base_offset + self._lazy_last[0], self._lazy_last[1]
        if not self._a:
            return self.base_offset, 0
        return self.base_offset + self._a[-1], self._b[-1]


class TimeIndex(_Index):
    ENTRY = _TIME_ENTRY

    @staticmethod
    def _empty(stamps: Iterable[int] = (), rels: Iterable[int] = ()) -> tuple[array[int], array[int]]:
        # timestamps, relative offsets
        return array("q", stamps), array("i", rels)

    def load(self, max_relative_offset: Optional[int] = None) -> None:
        stamps, rels = self._load_raw()
        if rels and (rels[0] < 0
                     or (max_relative_offset is not None and rels[-1] > max_relative_offset)
                     or not all(map(operator.lt, stamps, stamps[1:]))
                     or not all(map(operator.le, rels, rels[1:]))):
            raise IndexCorrupt(f"{self.path}: entries not increasing or beyond the segment")
        self._loaded(stamps, rels)

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
        if self._lazy_args is not None:
            if self._lazy_last is None:
                return -1, self.base_offset
            return self._lazy_last[0], self.base_offset + self._lazy_last[1]
        if not self._a:
            return -1, self.base_offset
        return self._a[-1], self.base_offset + self._b[-1]
