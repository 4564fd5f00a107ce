"""One log segment: ``{base_offset:020d}.log`` plus its ``.index`` and
``.timeindex`` (Kafka's file names and formats).

The ``.log`` file is a plain concatenation of v2 record batches exactly as
they go over the wire, so fetches are served with ``os.sendfile`` straight
from it (see :class:`FileRegion`).
"""
from __future__ import annotations

import logging
import os
import struct
import time
from typing import Callable, Iterator, Optional, Sequence

from pykbroker.protocol import records as _records
from pykbroker.protocol.records import (
    HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, CRC_START, BatchHeader, RecordError,
    decode_records,
)
from .fdpool import FdHandle
from .fs import FileSystem, REAL_FS
from .index import IndexCorrupt, OffsetIndex, TimeIndex
from .txn_index import TransactionIndex

__all__ = ["FileRegion", "LogSegment", "segment_file_name"]

log = logging.getLogger(__name__)



_HEADER = struct.Struct(">qiibIhiqqqhii")
_BATCH_LENGTH_MIN = HEADER_SIZE - LOG_OVERHEAD
INT32_MAX = 0x7FFFFFFF
# Header-only scans read this much at a time: about one index interval, so a
# lookup (index entry + forward scan) is usually a single pread.
_HEADER_SCAN_CHUNK = 8 * 1024
# CRC scans read at least this much at a time (larger batches: whole batch).
_BODY_SCAN_CHUNK = 1 << 20


def segment_file_name(base_offset: int, suffix: str) -> str:
    # Kafka names segment files after the base offset, zero-padded to 20 digits.
    return f"{base_offset:020d}{suffix}"


def scan_batches(fs: FileSystem, fd: int, start: int, end: int, chunk: int,
                 with_body: bool) -> Iterator[tuple[BatchHeader, Optional[memoryview]]]:
    """Yield (header, whole-batch memoryview or None) for the batches of the log file
    open as ``fd`` from byte ``start`` up to ``end``, reading ``chunk`` bytes at a time
    (more for a larger batch when ``with_body``).  Stops silently at the first
    structurally invalid or partial batch (callers compare positions to detect that)."""
    buf = b""
    buf_start = start
    pos = start
    unpack = _HEADER.unpack_from
    while pos + HEADER_SIZE <= end:
        off = pos - buf_start
        if off + HEADER_SIZE > len(buf):
            buf = fs.pread(fd, min(chunk, end - pos), pos)
            buf_start, off = pos, 0
            if len(buf) < HEADER_SIZE:
                return
        f = unpack(buf, off)
        if f[1] < _BATCH_LENGTH_MIN or f[3] != MAGIC_V2:
            return
        size = f[1] + LOG_OVERHEAD
        if pos + size > end:
            return
        h = BatchHeader(pos, size, *f)
        if with_body:
            if off + size > len(buf):
                buf = fs.pread(fd, min(max(chunk, size), end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < size:
                    return
            yield h, memoryview(buf)[off:off + size]
        else:
            yield h, None
        pos += size


class FileRegion:
    """``length`` bytes at ``position`` of an open log file, ready for
    ``os.sendfile(sock_fd, region.fd, region.position, region.length)``.

    The region holds its file's handle (fdpool.py): the bytes stay readable while the
    region is alive, even if the segment is deleted meanwhile, without keeping the file
    open.  Reading ``fd`` opens it if needed and pins it until :meth:`unpin` (the
    connection calls it once the region is sent) or the region's end.  If the segment
    is *truncated* meanwhile (leader change), sendfile may send fewer bytes than
    ``length``; the server must then close the connection, as Kafka does ("FileRecords
    truncated during write")."""
    __slots__ = ("_h", "position", "length", "_pinned")

    def __init__(self, handle: FdHandle, position: int, length: int) -> None:
        handle.hold()
        self._h = handle
        self._pinned = False
        self.position = position
        self.length = length

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h is not None:
            self._h = None  # type: ignore[assignment]  # released as the region is collected
            if self._pinned:
                h.unpin()
            h.unhold()

    @property
    def fd(self) -> int:
        h = self._h
        if not self._pinned:
            h.acquire()
            self._pinned = True
        return h._fd

    def unpin(self) -> None:
        """Sent: the pool may close the file again (the region still holds its bytes)."""
        if self._pinned:
            self._pinned = False
            self._h.unpin()

    def __iter__(self) -> Iterator[object]:
        return iter((self.fd, self.position, self.length))

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileRegion(fd={self._h._fd}, position={self.position}, length={self.length})"

    def batch_headers(self) -> list[BatchHeader]:
        """The headers of the whole batches in the region, read from the file (a header scan:
        share fetches learn the offsets a region covers without decoding records)."""
        return [h for h, _ in _pinned_scan(self._h, self.position, self.position + self.length,
                                             _HEADER_SCAN_CHUNK, False)]

    def slice(self, position: int, length: int) -> "FileRegion":
        """A region of the same file (``position`` is a file position inside this region)."""
        return FileRegion(self._h, position, length)

    def read(self) -> bytes:
        """The region's bytes (for tests and non-sendfile transports)."""
        out = []
        pos, left = self.position, self.length
        while left > 0:
            b = self._h.fs.pread(self.fd, left, pos)
            if not b:
                break
            out.append(b)
            pos += len(b)
            left -= len(b)
        return b"".join(out)


def _pinned_scan(handle: FdHandle, start: int, end: int, chunk: int, with_body: bool) -> Iterator[tuple[BatchHeader, Optional[memoryview]]]:
    """:func:`scan_batches` over a segment's file, pinned while the scan runs."""
    fd = handle.acquire()
    try:
        yield from scan_batches(handle.fs, fd, start, end, chunk, with_body)
    finally:
        handle.unpin()


class LogSegment:
    def __init__(self, dir: str, base_offset: int, *, fs: FileSystem = REAL_FS,
                 index_interval_bytes: int = 4096, max_index_entries: int = 10485760 // 8,
                 max_time_index_entries: Optional[int] = None, file_suffix: str = "") -> None:
        # file_suffix: "" for live segments; the log cleaner builds its output
        # under Kafka's ".cleaned" suffix and renames through ".swap"
        self.dir = dir
        self.base_offset = base_offset
        self.fs = fs
        self.index_interval_bytes = index_interval_bytes
        self.log_path = os.path.join(dir, segment_file_name(base_offset, ".log") + file_suffix)
        # opened now to create the file and learn its size; from then on the pool may
        # close it while idle and open it again on the next use (fdpool.py)
        fd = fs.open(self.log_path, os.O_RDWR | os.O_CREAT)
        self._fdh = FdHandle(self.log_path, fs, fd=fd)
        with self._fdh.pinned() as fd:
            self.size = fs.fsize(fd)
        self.offset_index = OffsetIndex(os.path.join(dir, segment_file_name(base_offset, ".index") + file_suffix),
                                        base_offset, max_index_entries, fs)
        if max_time_index_entries is None:
            max_time_index_entries = max_index_entries * 8 // 12
        self.time_index = TimeIndex(os.path.join(dir, segment_file_name(base_offset, ".timeindex") + file_suffix),
                                    base_offset, max_time_index_entries, fs)
        self.offset_index.on_corrupt = self._rebuild_indexes
        self.time_index.on_corrupt = self._rebuild_indexes
        # aborted transactions whose ABORT marker lies here (read lazily; see txn_index.py)
        self.txn_index = TransactionIndex(
            os.path.join(dir, segment_file_name(base_offset, ".txnindex") + file_suffix), fs)
        self.next_offset = base_offset       # last offset in segment + 1
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = base_offset
        self._bytes_since_last_index_entry = 0
        # time-based roll (segment.ms) counts from the first batch's timestamp
        self.rolling_base_timestamp: Optional[int] = None
        self.created_ms = int(time.time() * 1000)
        # durability bookkeeping: bytes known to be fsynced, and whether a
        # truncation/recovery still needs an fsync (generation-checked so a
        # concurrent flush cannot clear a newer need)
        self.flushed_size = self.size
        self._needs_sync = False
        self._sync_gen = 0
        self.dir_dirty = False     # newly created files: the directory needs an fsync

    # ------------------------------------------------------------------ misc
    @property
    def fd(self) -> int:
        """The open descriptor of the .log file (opened if the pool had closed it).  For
        tests and tools: it may be closed again by the next open of another segment."""
        fd = self._fdh.acquire()
        self._fdh.unpin()
        return fd

    @property
    def largest_timestamp(self) -> int:
        return self.max_timestamp_so_far

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def can_hold_offset(self, offset: int) -> bool:
        # relative offsets in the index are int32
        return 0 <= offset - self.base_offset <= INT32_MAX

    @property
    def index_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"

    # ------------------------------------------------------------- scanning
    def iter_batches(self, start: int = 0, end: Optional[int] = None,
                     with_body: bool = False) -> Iterator[tuple[BatchHeader, Optional[memoryview]]]:
        """Yield (header, whole-batch memoryview or None) from byte ``start``
        up to ``end`` (default: the segment's size); see :func:`scan_batches`."""
        return _pinned_scan(self._fdh, start, self.size if end is None else end,
                            _BODY_SCAN_CHUNK if with_body else _HEADER_SCAN_CHUNK, with_body)

    def translate_offset(self, offset: int, start_position: int = 0) -> Optional[BatchHeader]:
        """Header of the first batch whose last offset >= ``offset`` (i.e. the
        batch containing it, or the next one after a gap); None if none."""
        _, pos = self.offset_index.lookup(offset)
        pos = max(pos, start_position)
        for h, _ in self.iter_batches(pos):
            if h.base_offset + h.last_offset_delta >= offset:
                return h
        return None

    def _boundary_at_or_before(self, limit: int, start: int) -> int:
        """Greatest batch end position <= ``limit`` (scans from an index entry)."""
        pos = max(start, self.offset_index.lookup_position(limit))
        for h, _ in self.iter_batches(pos, limit):
            pos = h.position + h.size
        return pos

    def read_batch(self, h: BatchHeader) -> bytes:
        with self._fdh.pinned() as fd:
            return self.fs.pread(fd, h.size, h.position)

    # ------------------------------------------------------------- append
    def append(self, data: bytes | bytearray | memoryview, last_offset: int, max_timestamp: int,
               offset_of_max_timestamp: int, batches: Optional[Sequence[tuple[int, int, int, int]]] = None) -> None:
        """Append already-patched batch bytes.  ``batches`` optionally lists
        (position in data, size, last offset, max timestamp) per batch so
        that every batch can get an index entry; by default ``data`` is
        treated as one unit (what a produce request carries)."""
        pos0 = self.size
        fdh = self._fdh
        fd = fdh.acquire()
        try:
            self.fs.pwrite(fd, data, pos0)
        except OSError:
            # do not leave a partial batch behind a later append
            try:
                self.fs.ftruncate(fd, pos0)
            except OSError:
                pass
            raise
        finally:
            fdh.unpin()
        if batches is None:
            batches = ((0, len(data), last_offset, max_timestamp),)
        interval = self.index_interval_bytes
        for rel_pos, size, b_last, b_max_ts in batches:
            if b_max_ts > self.max_timestamp_so_far:
                self.max_timestamp_so_far = b_max_ts
                self.offset_of_max_timestamp_so_far = b_last
            if self._bytes_since_last_index_entry > interval:
                self.offset_index.append(b_last, pos0 + rel_pos)
                self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += size
        if max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_timestamp
            self.offset_of_max_timestamp_so_far = offset_of_max_timestamp
        if self.rolling_base_timestamp is None and pos0 == 0:
            self.rolling_base_timestamp = max_timestamp
        self.size = pos0 + len(data)
        self.next_offset = last_offset + 1

    # ---------------------------------------------------------------- read
    def read(self, start_offset: int, max_bytes: int, max_offset: Optional[int] = None,
             min_one_batch: bool = True, whole_batches: bool = False) -> tuple[Optional[FileRegion], Optional[BatchHeader]]:
        """The bytes from the start of the batch containing ``start_offset``.

        Returns ``(region, first_header)``:
        * ``(None, None)``: no batch at or after start_offset in this segment;
        * ``(None, header)``: data exists but the bounds allow nothing;
        * ``(FileRegion, header)`` otherwise.
        ``max_offset`` is exclusive: only batches whose last offset is below
        it are returned (Kafka bounds fetches by the high watermark's
        position, i.e. by batch).  With ``min_one_batch`` the first batch is
        returned even when larger than ``max_bytes`` (KIP-74).

        By default this is Kafka's LogSegment.read, what a Fetch answers: a
        byte slice of ``max_bytes`` (at least the first batch with
        ``min_one_batch``), so the region may end inside a batch; clients
        drop that partial batch and fetch it again next time.  Kafka sends
        the slice with sendfile without looking for batch ends, and so do we
        (no header scan).  ``whole_batches=True``: the region ends at the
        last batch that fits."""
        h = self.translate_offset(start_offset)
        if h is None:
            return None, None
        start = h.position
        end = self.size
        if max_offset is not None and max_offset < self.next_offset:
            hm = self.translate_offset(max_offset, start)
            if hm is not None:
                end = hm.position
        if not whole_batches:
            if max_bytes < h.size and not min_one_batch:
                # the first batch would be cut: nothing (Kafka's ReplicaManager.readFromLog
                # answers firstEntryIncomplete with empty records, Fetch v3+)
                return None, h
            # KIP-74: the first batch whole even when larger than the limit
            end = min(end, start + max(max_bytes, h.size))
            if end <= start:
                return None, h
            return FileRegion(self._fdh, start, end - start), h
        if end - start > max_bytes:
            end = min(end, self._boundary_at_or_before(start + max(max_bytes, 0), start))
        if end <= start:
            if min_one_batch and (max_offset is None or h.last_offset < max_offset):
                end = start + h.size
            else:
                return None, h
        return FileRegion(self._fdh, start, end - start), h

    # ----------------------------------------------------------- timestamps
    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0) -> Optional[tuple[int, int, int]]:
        """First record with timestamp >= ``timestamp`` and offset >=
        ``starting_offset``: (offset, record timestamp, leader epoch or -1),
        or None.  Uses the time index then decodes only candidate batches."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(ts_offset, starting_offset))
        for h, _ in self.iter_batches(pos):
            if h.max_timestamp >= timestamp and h.last_offset >= starting_offset:
                for r in decode_records(self.read_batch(h)):
                    # decoded records always carry both (Record's fields are Optional for
                    # the records a producer builds)
                    if r.timestamp >= timestamp and r.offset >= starting_offset:  # type: ignore[operator]
                        return r.offset, r.timestamp, h.partition_leader_epoch  # type: ignore[return-value]
        return None

    def max_timestamp_record(self) -> Optional[tuple[int, int, int]]:
        """(offset, timestamp, epoch) of the first record carrying the
        segment's max timestamp (ListOffsets MAX_TIMESTAMP), or None."""
        target = self.max_timestamp_so_far
        if target < 0:
            return None
        _, pos = self.offset_index.lookup(self.offset_of_max_timestamp_so_far)
        for start in (pos, 0):  # retry from 0 should the index mislead us
            for h, _ in self.iter_batches(start):
                if h.max_timestamp == target:
                    for r in decode_records(self.read_batch(h)):
                        if r.timestamp == target:   # (a decoded record has its offset)
                            return r.offset, r.timestamp, h.partition_leader_epoch  # type: ignore[return-value]
                    return h.base_offset, target, h.partition_leader_epoch
        return None

    # ------------------------------------------------------------ truncation
    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset >= ``offset`` (cuts at the
        start of the batch containing it).  Returns bytes removed."""
        h = self.translate_offset(offset)
        if h is None:
            return 0
        return self._truncate_at(h.position, h.base_offset)

    def _truncate_at(self, position: int, next_offset: int) -> int:
        removed = self.size - position
        with self._fdh.pinned() as fd:
            self.fs.ftruncate(fd, position)
        self.size = position
        self.next_offset = max(self.base_offset, next_offset) if position else self.base_offset
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(self.next_offset)
        self.txn_index.truncate_to(self.next_offset)
        self._reload_max_timestamp()
        self._bytes_since_last_index_entry = 0
        if position == 0:
            self.rolling_base_timestamp = None
            self.created_ms = int(time.time() * 1000)
        self._mark_needs_sync()
        return removed

    def _reload_max_timestamp(self) -> None:
        ts, off = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = ts, off
        _, pos = self.offset_index.lookup(off) if ts >= 0 else (0, 0)
        for h, _ in self.iter_batches(pos):
            if h.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = h.max_timestamp
                self.offset_of_max_timestamp_so_far = h.last_offset

    # ------------------------------------------------------------- loading
    def load(self, lazy: bool = True) -> bool:
        """Clean-start load.  Checks both index files (size, last entry; the
        full entries are read lazily on first lookup), then finds
        next_offset and the max timestamp by a header-only scan of the tail
        after the last offset-index entry.  Returns False when the segment
        needs :meth:`recover` (indexes missing/corrupt, or a tail that does
        not end exactly at the file size)."""
        try:
            if lazy:
                off_last = self.offset_index.open_lazy(self.size)
                ts_last = self.time_index.open_lazy(INT32_MAX)
                if off_last is not None and (off_last[0] < 0 or not 0 <= off_last[1] < self.size):
                    raise IndexCorrupt(f"{self.offset_index.path}: last entry {off_last} is invalid")
                if ts_last is not None and ts_last[1] < 0:
                    raise IndexCorrupt(f"{self.time_index.path}: last entry {ts_last} is invalid")
            else:
                self.offset_index.load(self.size)
                self.time_index.load(INT32_MAX)
        except IndexCorrupt as e:
            log.warning("index problem (%s); segment %s will be recovered", e, self.log_path)
            return False
        except OSError as e:
            log.warning("cannot read indexes of %s (%s); recovering", self.log_path, e)
            return False
        last_indexed, pos = self.offset_index.last_entry
        has_entries = self.offset_index._persisted > 0
        max_ts, off_max = self.time_index.last_entry
        if max_ts < 0:
            max_ts, off_max = -1, self.base_offset
        next_offset = self.base_offset
        end = pos
        prev_next = None
        for h, _ in self.iter_batches(pos):
            if prev_next is None and has_entries and h.last_offset != last_indexed:
                log.warning("offset index of %s does not match the log; recovering", self.log_path)
                return False
            if h.base_offset < (self.base_offset if prev_next is None else prev_next):
                return False
            if h.max_timestamp > max_ts:
                max_ts, off_max = h.max_timestamp, h.last_offset
            prev_next = next_offset = h.last_offset + 1
            end = h.position + h.size
        if end != self.size:
            log.warning("segment %s: batches end at %d but file has %d bytes; recovering",
                        self.log_path, end, self.size)
            return False
        if end > 0 and not self.can_hold_offset(next_offset - 1):
            return False
        if self.time_index.last_entry[0] >= 0 and self.time_index.last_entry[1] >= next_offset:
            return False
        self.next_offset = next_offset
        # the time index's last entry is the max before the tail (Kafka
        # writes a final entry on roll/close); the tail scan covers the rest
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = max_ts, off_max
        self._bytes_since_last_index_entry = self.size - pos
        if self.size:
            for h, _ in self.iter_batches(0, None):
                self.rolling_base_timestamp = h.max_timestamp
                break
        return True

    def _scan_and_index(self, check_crc: bool, on_batch: Optional[Callable[[BatchHeader], None]] = None,
                        min_base_offset: Optional[int] = None
                        ) -> tuple[int, int, int, int, Optional[int], int, Optional[str]]:
        """Scan batches from position 0, rebuilding both indexes in memory.
        Stops at the first partial/malformed batch (or bad CRC / offsets).
        Returns (valid bytes, next offset, max ts, offset of max ts,
        first batch max ts, bytes since last index entry, reason)."""
        oi, ti = self.offset_index, self.time_index
        oi._a, oi._b = oi._empty()
        ti._a, ti._b = ti._empty()
        max_ts, off_max, first_ts = -1, self.base_offset, None
        expected = self.base_offset if min_base_offset is None else max(self.base_offset, min_base_offset)
        valid = last_index_pos = 0
        next_offset = self.base_offset
        reason = None
        for h, body in self.iter_batches(0, None, with_body=check_crc):
            if check_crc and _records.crc32c(body[CRC_START:]) != h.crc:  # type: ignore[index]  # with_body
                reason = f"CRC mismatch at position {h.position}"
                break
            if h.base_offset < expected or h.last_offset_delta < 0 or h.records_count < 0 \
                    or not self.can_hold_offset(h.last_offset):
                reason = f"offsets out of range at position {h.position}"
                break
            if h.max_timestamp > max_ts:
                max_ts, off_max = h.max_timestamp, h.last_offset
            if valid - last_index_pos > self.index_interval_bytes:
                oi.append(h.last_offset, valid)
                ti.maybe_append(max_ts, off_max)
                last_index_pos = valid
            if first_ts is None:
                first_ts = h.max_timestamp
            if on_batch is not None:
                on_batch(h)
            valid = h.position + h.size
            expected = next_offset = h.last_offset + 1
        ti.maybe_append(max_ts, off_max)
        return valid, next_offset, max_ts, off_max, first_ts, valid - last_index_pos, reason

    def _rebuild_indexes(self) -> None:
        """A lazily loaded index turned out damaged: rebuild both from the
        log with a header-only scan (the log itself was checked at load)."""
        valid, _, _, _, _, _, _ = self._scan_and_index(check_crc=False)
        if valid != self.size:
            log.warning("segment %s: index rebuild stopped at %d of %d bytes", self.log_path, valid, self.size)
        self.offset_index._rewrite()
        self.time_index._rewrite()

    def recover(self, on_batch: Optional[Callable[[BatchHeader], None]] = None,
                min_base_offset: Optional[int] = None) -> int:
        """CRC-scan the whole file, truncate at the first invalid or partial
        batch, rebuild both indexes.  ``on_batch`` sees every valid header
        (the loader feeds the leader epoch cache with it).  Returns the
        number of bytes truncated."""
        (valid, next_offset, self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
         self.rolling_base_timestamp, self._bytes_since_last_index_entry, reason) = \
            self._scan_and_index(True, on_batch, min_base_offset)
        truncated = self.size - valid
        if truncated > 0:
            log.warning("segment %s: truncating %d invalid bytes at position %d (%s)",
                        self.log_path, truncated, valid, reason or "partial or malformed batch")
            with self._fdh.pinned() as fd:
                self.fs.ftruncate(fd, valid)
            self.size = valid
        self.next_offset = next_offset
        self.offset_index._rewrite()
        self.time_index._rewrite()
        # what we just scanned may only live in the page cache
        self.flushed_size = 0
        self._mark_needs_sync()
        return truncated

    # ---------------------------------------------------- flush / lifecycle
    def _mark_needs_sync(self) -> None:
        self.flushed_size = min(self.flushed_size, self.size)
        self._needs_sync = True
        self._sync_gen += 1

    @property
    def unflushed(self) -> bool:
        return self._needs_sync or self.size > self.flushed_size

    def mark_flushed(self) -> None:
        """Declare the current content durable (clean load)."""
        self.flushed_size = self.size
        self._needs_sync = False

    def mark_unflushed(self) -> None:
        self.flushed_size = 0
        self._needs_sync = True

    # A flush has three steps so that the slow fsync can run without the
    # log's lock: prepare (under lock: write pending index entries, capture
    # state), sync (fsync, no lock), complete (under lock: record progress).
    def prepare_flush(self) -> tuple[FdHandle, int, int]:
        self.offset_index.persist()
        self.time_index.persist()
        return (self._fdh, self.size, self._sync_gen)

    def sync(self, token: tuple[FdHandle, int, int]) -> None:
        # fsync is per file, not per descriptor: a descriptor opened again after the
        # pool closed the idle one still flushes every page written through the old one
        with token[0].pinned() as fd:
            if fd >= 0:
                self.fs.fsync(fd)
        if self.dir_dirty:
            self.fs.fsync_dir(self.dir)
            self.dir_dirty = False
        self.offset_index.sync()
        self.time_index.sync()
        self.txn_index.sync()

    def complete_flush(self, token: tuple[FdHandle, int, int]) -> None:
        _, size, gen = token
        if gen == self._sync_gen:
            self._needs_sync = False
            self.flushed_size = max(self.flushed_size, min(size, self.size))

    def flush(self) -> None:
        """fsync the log file and persist+fsync the indexes (blocking)."""
        token = self.prepare_flush()
        self.sync(token)
        self.complete_flush(token)

    def on_become_inactive(self) -> None:
        """Called on roll: final time index entry (as Kafka), write indexes."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
        self.offset_index.persist()
        self.time_index.persist()

    def close(self) -> None:
        """Persist indexes and release the fd.  The fd itself is closed once
        no FileRegion of this segment is alive any more."""
        if not self._fdh.released:
            try:
                self.on_become_inactive()
            except OSError as e:
                log.warning("cannot write indexes of %s: %s", self.log_path, e)
        self._release()

    def _release(self) -> None:
        h = self._fdh
        self._fdh = FdHandle(None, self.fs)
        h.release()  # closes now unless a FileRegion (or the cleaner) still pins it

    def force_close(self) -> None:
        self._fdh.close()

    def update_parent_dir(self, new_dir: str) -> None:
        """The directory was renamed (Kafka's LogSegment.updateParentDir): new paths, same fds."""
        self.dir = new_dir
        self.log_path = os.path.join(new_dir, os.path.basename(self.log_path))
        self._fdh.path = self.log_path
        for idx in (self.offset_index, self.time_index, self.txn_index):
            idx.path = os.path.join(new_dir, os.path.basename(idx.path))

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename the three files from suffix ``old`` to ``new`` (Kafka's
        LogSegment.changeFileSuffixes).  The open fd (and any FileRegion
        still using it) is unaffected by the rename.  The .log goes last so
        that a crash never leaves a ``.log<new>`` whose indexes still carry
        ``old`` (the loader rebuilds indexes of swapped segments anyway)."""
        for idx in (self.offset_index, self.time_index, self.txn_index):
            if idx.path.endswith(old):
                idx.rename(idx.path[:len(idx.path) - len(old)] + new)
        if self.log_path.endswith(old):
            new_path = self.log_path[:len(self.log_path) - len(old)] + new
            # under the pool's lock: no other thread opens the old name in between
            with self._fdh.pool.lock:
                self.fs.rename(self.log_path, new_path)
                self.log_path = new_path
                self._fdh.path = new_path

    def delete(self) -> None:
        """Remove the files.  An in-flight FileRegion keeps reading the
        unlinked file through its still-open fd (deferred close)."""
        self._release()
        for p in (self.log_path, self.offset_index.path, self.time_index.path):
            self.fs.remove(p)
        self.txn_index.delete()
