"""The aborted-transaction index of one segment (Kafka's TransactionIndex, ``.txnindex``).

One entry per transaction whose ABORT marker lies in the segment: (producer id, first offset of
the transaction, offset of the marker, last stable offset when the marker was written).  Fetch
under read_committed returns the entries overlapping the fetched range as
``aborted_transactions``, so clients drop the aborted records; the marker offsets order the
entries (they are appended as markers are written).

File format: Kafka's, 34 bytes per entry, big endian: version int16 = 0, producerId int64,
firstOffset int64, lastOffset int64, lastStableOffset int64.  The file only exists once a
segment holds an abort marker.  It is not fsynced on every abort: the segment's flush syncs it,
and a segment recovered after an unclean shutdown has its index rebuilt from the log (the loader
replays producer state through it), so a torn file is never trusted beyond the recovery point.
"""
from __future__ import annotations

import logging
import os
import struct
from typing import NamedTuple, Optional

from .fs import FileSystem, REAL_FS

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34, Kafka's AbortedTxn.TOTAL_SIZE


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: str, fs: FileSystem = REAL_FS) -> None:
        self.path = path
        self.fs = fs
        self._entries: Optional[list[AbortedTxn]] = None   # loaded on first use
        self._dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        if not self.fs.exists(self.path):
            return []
        try:
            data = self.fs.read_file(self.path)
        except OSError as e:
            log.warning("cannot read %s: %s", self.path, e)
            return []
        out = []
        n = len(data) // ENTRY_SIZE
        for i in range(n):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, i * ENTRY_SIZE)
            if version != 0:
                log.warning("%s: unknown entry version %d, ignoring the rest", self.path, version)
                break
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    def append(self, entry: AbortedTxn) -> None:
        self.entries.append(entry)
        self._write()

    def reset(self) -> None:
        """Forget every entry (a segment about to be rebuilt by recovery)."""
        self._entries = []
        if self.fs.exists(self.path):
            self.fs.remove(self.path)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (log truncation)."""
        es = self.entries
        keep = [e for e in es if e.last_offset < offset]
        if len(keep) != len(es):
            self._entries = keep
            self._write()

    def _write(self) -> None:
        es = self._entries or []
        if not es:
            if self.fs.exists(self.path):
                self.fs.remove(self.path)
            return
        data = b"".join(_ENTRY.pack(0, *e) for e in es)
        # Rare (one write per aborted transaction): rewritten whole, atomically, not fsynced
        # (see the module docstring).
        self.fs.write_file_atomic(self.path, data, fsync=False)
        self._dirty = True

    def sync(self) -> None:
        if self._dirty and self.fs.exists(self.path):
            fd = self.fs.open(self.path, os.O_RDONLY)
            try:
                self.fs.fsync(fd)
            finally:
                self.fs.close(fd)
        self._dirty = False

    def rename(self, new_path: str) -> None:
        if self.fs.exists(self.path):
            self.fs.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        if self.fs.exists(self.path):
            self.fs.remove(self.path)

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Entries overlapping [fetch_offset, upper_bound) (Kafka's collectAbortedTxns)."""
        return [e for e in self.entries if e.last_offset >= fetch_offset and e.first_offset < upper_bound]
