"""A partition's log: Kafka's UnifiedLog/LocalLog model.

Owns one open log: append (as leader, as follower, transaction markers), read, roll,
truncation, deletion of segments below the log start, the cleaner's segment swap, flush and
close, and the rebuild of producer state from batch headers (``replay_producer_state``, also
used at load).  Opening a log from disk and recovering it is log_loader.py (Kafka's
LogLoader); its settings are log_config.py; what it raises is errors.py.

Directory ``<log.dir>/<topic>-<partition>/`` holds segments
(``{base:020d}.log/.index/.timeindex``), producer snapshots
(``{offset:020d}.snapshot``) and ``leader-epoch-checkpoint``.

Threading: every method is synchronous.  ``append``/``read`` are quick
(pwrite/pread of one request's worth) and may run on the trio thread;
``flush`` fsyncs and should run via ``trio.to_thread.run_sync``.  An
internal lock makes a concurrent ``flush`` from a worker thread safe; the
fsync itself happens outside the lock so appends are not blocked by it.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, cast

from pykbroker.protocol.records import (
    CREATE_TIME, LOG_APPEND_TIME, control_type, RECORD_LIST_TOO_LARGE, RecordError,
    set_log_append_time, set_max_timestamp,
)
from pykbroker.protocol.primitives import I32 as _I32, I64 as _I64
from .epoch import LeaderEpochCache
from .errors import KafkaStorageError, OffsetOutOfRange, ProducerStateError
from .fs import FileSystem, REAL_FS
from .log_validator import ValidatedRecords, internal_validated
from .log_config import LogConfig
from .producer_state import APPEND, CompletedTxn, ProducerStateManager
from .segment import INT32_MAX, FileRegion, LogSegment


def wall_ms() -> int:
    """Real wall-clock milliseconds: the clock of a log opened outside a broker (tools, tests)."""
    return int(time.time() * 1000)


__all__ = [
    "Log", "AppendInfo", "replay_producer_state", "wall_ms",
    "parse_partition_dir", "partition_dir_name",
]

log = logging.getLogger(__name__)


@dataclass(slots=True)   # built on every append: slots make it cheaper to build and read
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int          # -1 unless the topic uses LogAppendTime (or duplicate, see below)
    max_timestamp: int
    offset_of_max_timestamp: int
    log_start_offset: int
    num_messages: int
    valid_bytes: int
    duplicate: bool = False       # idempotent retry: nothing was appended
    flush_required: bool = False  # auto_flush=False and flush.messages reached
    rolled: bool = False          # this append rolled a new segment (caller flushes the old one)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> Optional[tuple[str, int]]:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


class Log:
    # Called with the seconds an fsync of unflushed data took (from the flushing thread), when
    # set: the log flush time metric (pykbroker/observability/metrics.py); process-wide.
    flush_listener: Optional[Callable[[float], None]] = None

    def __init__(self, dir: str, config: LogConfig, segments: list, log_start_offset: int,
                 recovery_point: int, epoch_cache: LeaderEpochCache,
                 producer_state: ProducerStateManager, fs: FileSystem = REAL_FS,
                 now_ms: Callable[[], int] = wall_ms) -> None:
        self.dir = dir
        self.config = config
        self.fs = fs
        # the broker's wall clock (pykbroker/clock.py): LogAppendTime and segment.ms
        self.now_ms = now_ms
        self._segments: list[LogSegment] = segments
        self._bases: list[int] = [s.base_offset for s in segments]
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.epoch_cache = epoch_cache
        self.producer_state = producer_state
        # maintained by the caller (replication); starts at the log start
        # like Kafka's, LogManager then sets it from replication-offset-checkpoint
        self.high_watermark = log_start_offset
        self.unflushed_messages = 0
        self._lock = threading.RLock()
        self._closed = False
        name = os.path.basename(dir.rstrip("/"))
        self.topic_partition = parse_partition_dir(name)

    # ------------------------------------------------------------ properties
    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        """Next offset to assign."""
        return self._segments[-1].next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def latest_epoch(self) -> Optional[int]:
        return self.epoch_cache.latest_epoch

    def __repr__(self) -> str:
        return (f"Log({self.dir!r}, start={self.log_start_offset}, end={self.log_end_offset}, "
                f"segments={len(self._segments)})")

    # ---------------------------------------------------------------- append
    def append(self, records: ValidatedRecords, leader_epoch: int,
               log_append_time_ms: Optional[int] = None, *, auto_flush: bool = True,
               check_producer_state: bool = True, time_type_read: bool = False) -> AppendInfo:
        """Append validated produce records as the leader.

        Per batch (never per record): idempotence check, then baseOffset and
        partitionLeaderEpoch are patched in place (outside the CRC); with
        ``log_append_time_ms`` (topic uses LogAppendTime) the timestamp type
        and maxTimestamp are rewritten and the CRC recomputed.  The record
        bytes are then written with one pwrite.  If the topic config says
        LogAppendTime and no time is given, the current time is used, unless
        ``time_type_read`` says the caller already read the timestamp type
        (``None`` then means CreateTime; one read of the config per append).
        An append larger than segment.bytes -> RecordError(RECORD_LIST_TOO_LARGE).

        Raises ProducerStateError (45/47), KafkaStorageError on I/O errors.
        A duplicate of one of the producer's last 5 batches returns the
        original offsets with ``duplicate=True``; as in Kafka its
        ``log_append_time`` is the original batch's timestamp.
        ``flush.messages`` reached: fsync before returning, unless
        ``auto_flush=False`` (then ``flush_required`` is set and the caller
        must run :meth:`flush`, e.g. in a worker thread, before answering).
        """
        with self._lock:
            if self._closed:
                raise KafkaStorageError("log is closed")
            buf = records.buffer
            batches = records.batches
            if not batches:
                raise RecordError(87, "no batches to append")
            if len(buf) > self.config.segment_bytes:
                # Kafka: RecordBatchTooLargeException, an append must fit in a segment
                raise RecordError(RECORD_LIST_TOO_LARGE,
                                  f"{len(buf)} bytes exceed segment.bytes {self.config.segment_bytes}")
            lat = log_append_time_ms
            if lat is None and not time_type_read and self.config.log_append_time:
                lat = self.now_ms()
            segments = self._segments
            first_offset = segments[-1].next_offset   # log_end_offset, without the property call
            ps = self.producer_state
            staged: Optional[dict] = None
            off = first_offset
            for b in batches:
                if b.producer_id >= 0 and check_producer_state:
                    if staged is None:
                        staged = {}
                    r = ps.check(b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence, staged,
                                 b.is_transactional)
                    if r != APPEND:
                        if isinstance(r, tuple):
                            return AppendInfo(r[1], r[2], r[3], r[3], r[2], self.log_start_offset,
                                              r[2] - r[1] + 1, 0, duplicate=True)
                        # neither APPEND nor a duplicate: an error code (cast on the error path only)
                        raise ProducerStateError(cast(int, r), f"producer {b.producer_id}: error {r}")
                    ps.update(b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence,
                              off, off + b.offset_count - 1,
                              lat if lat is not None else b.max_timestamp,
                              b.is_transactional, staged=staged)
                off += b.offset_count
            last_offset = off - 1
            size = len(buf)

            active_before = segments[-1]
            if lat is not None:
                roll_ts = lat
            elif len(batches) == 1:   # a produce request's partition: one batch
                roll_ts = batches[0].max_timestamp
            else:
                roll_ts = max(b.max_timestamp for b in batches)
            if self._should_roll(active_before, size, last_offset, roll_ts):
                seg = self._roll(first_offset)
                rolled = seg is not active_before and active_before.size > 0
            else:
                seg = active_before
                rolled = False

            # patch offsets / epoch / timestamps, per batch
            off = first_offset
            max_ts = -1
            offset_of_max_ts = first_offset
            index_info = []
            for b in batches:
                pos = b.position
                # set_base_offset and set_partition_leader_epoch (both outside the CRC), their
                # struct calls made here: two Python calls fewer per batch
                _I64.pack_into(buf, pos, off)
                _I32.pack_into(buf, pos + 12, leader_epoch)
                blast = off + b.offset_count - 1
                if lat is not None:
                    set_log_append_time(buf, pos, lat)
                    bts = lat
                else:
                    if b.timestamp_type == LOG_APPEND_TIME:
                        # a CreateTime topic stores CreateTime batches (Kafka
                        # rewrites the type bit the same way)
                        set_max_timestamp(buf, pos, CREATE_TIME, b.max_timestamp)
                    bts = b.max_timestamp
                if bts > max_ts:
                    max_ts, offset_of_max_ts = bts, blast
                index_info.append((pos, b.size, blast, bts))
                off = blast + 1

            try:
                seg.append(buf, last_offset, max_ts, offset_of_max_ts, index_info)
            except OSError as e:
                raise KafkaStorageError(f"append to {seg.log_path} failed: {e}") from e
            if leader_epoch >= 0 and leader_epoch != self.epoch_cache.latest_epoch:
                # first append of a new leader epoch (rare): the checkpoint is
                # rewritten with fsync, as Kafka does.  If that fails the
                # in-memory cache is still right and an unclean restart
                # rebuilds it from the batch headers.
                try:
                    self.epoch_cache.assign(leader_epoch, first_offset)
                except OSError as e:
                    log.error("cannot write leader epoch checkpoint of %s: %s", self.dir, e)
            if staged:
                ps.commit(staged)
            n = records.offset_count
            self.unflushed_messages += n
            # (all fields by position: a keyword call costs more on every append)
            info = AppendInfo(first_offset, last_offset, lat if lat is not None else -1,
                              max_ts, offset_of_max_ts, self.log_start_offset, n, size,
                              False, False, rolled)
            need_flush = self.unflushed_messages >= self.config.flush_interval_messages
        if need_flush:
            if auto_flush:
                self.flush()
            else:
                info.flush_required = True
        return info

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                              coordinator_epoch: int, leader_epoch: int, timestamp_ms: int,
                              transaction_version: int = 0) -> AppendInfo:
        """Write a COMMIT/ABORT control batch for ``producer_id`` (Kafka's appendAsLeader with
        origin COORDINATOR and a marker): the producer's open transaction is closed, and an
        aborted one is recorded in the active segment's ``.txnindex`` with the last stable
        offset of that moment.  Raises ProducerStateError (INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED) without writing anything."""
        from pykbroker.protocol.records import encode_end_txn_marker
        from .txn_index import AbortedTxn
        with self._lock:
            ps = self.producer_state
            code = ps.check_marker(producer_id, producer_epoch, coordinator_epoch, transaction_version)
            if code:
                raise ProducerStateError(code, f"marker for producer {producer_id} epoch {producer_epoch} refused")
            batch = encode_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch, timestamp_ms)
            info = self.append(internal_validated(batch), leader_epoch, None, auto_flush=False,
                               check_producer_state=False)
            done = ps.complete_txn(producer_id, producer_epoch, commit, info.first_offset, timestamp_ms,
                                   coordinator_epoch)
            if done.is_aborted:
                others = [f for p, f in ps.ongoing.items()] + [f for f, last in ps.unreplicated
                                                               if last != done.last_offset]
                lso = min(others) if others else done.last_offset + 1
                try:
                    self._segments[-1].txn_index.append(
                        AbortedTxn(producer_id, done.first_offset, done.last_offset, lso))
                except OSError as e:
                    # the marker is in the log: recovery rebuilds the index from it
                    log.error("cannot write the transaction index of %s: %s", self.dir, e)
            return info

    def first_unstable_offset(self) -> Optional[int]:
        """First offset of the earliest transaction not stable yet (None: all stable)."""
        return self.producer_state.first_unstable_offset(self.high_watermark)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list:
        """Aborted transactions overlapping [fetch_offset, upper_bound), from the segment holding
        ``fetch_offset`` on (an abort's entry lives with its marker, which may be in a later
        segment than the records), stopping once an entry's last stable offset covers the
        bound, as Kafka's collectAbortedTransactions."""
        with self._lock:
            i = max(0, bisect_right(self._bases, fetch_offset) - 1)
            segs = self._segments[i:]
        out = []
        for seg in segs:
            for e in seg.txn_index.entries:
                if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                    out.append(e)
                if e.last_stable_offset >= upper_bound:
                    return out
        return out

    def append_as_follower(self, buf: bytes | bytearray | memoryview) -> Optional[tuple[int, int]]:
        """Append batches that already carry offsets and epochs (replication,
        tests).  Batches must be valid v2 and start at or after the log end
        offset.  Returns (first offset, last offset) or None if empty."""
        from pykbroker.protocol.records import iter_batches, batch_crc_ok, CORRUPT_MESSAGE
        with self._lock:
            headers = list(iter_batches(buf))
            if not headers:
                return None
            nxt = self.log_end_offset
            for h in headers:
                if not batch_crc_ok(buf, h):
                    raise RecordError(CORRUPT_MESSAGE, "batch CRC mismatch")
                if h.base_offset < nxt or h.last_offset_delta < 0:
                    raise RecordError(CORRUPT_MESSAGE, "out of order offsets")
                nxt = h.last_offset + 1
            first, last = headers[0].base_offset, headers[-1].last_offset
            seg = self._maybe_roll(len(buf), last, first, max(h.max_timestamp for h in headers))
            max_ts, off_max = -1, first
            for h in headers:
                if h.partition_leader_epoch >= 0 and (self.epoch_cache.latest_epoch is None
                                                      or h.partition_leader_epoch > self.epoch_cache.latest_epoch):
                    self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
                if h.max_timestamp > max_ts:
                    max_ts, off_max = h.max_timestamp, h.last_offset
            try:
                seg.append(buf, last, max_ts, off_max,
                           [(h.position, h.size, h.last_offset, h.max_timestamp) for h in headers])
            except OSError as e:
                raise KafkaStorageError(str(e)) from e
            for h in headers:
                ctype = control_type(memoryview(buf)[h.position:h.position + h.size]) if h.is_control else None
                done = self.producer_state.update_from_header(h, ctype)
                if done is not None and done.is_aborted:
                    self._add_aborted(seg, done)
            self.unflushed_messages += last - first + 1
            return first, last

    def _add_aborted(self, seg: LogSegment, done: CompletedTxn) -> None:
        from .txn_index import AbortedTxn
        ps = self.producer_state
        others = list(ps.ongoing.values()) + [f for f, last in ps.unreplicated if last != done.last_offset]
        lso = min(others) if others else done.last_offset + 1
        seg.txn_index.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset, lso))

    # ----------------------------------------------------------------- roll
    def _should_roll(self, seg: LogSegment, size: int, last_offset: int, max_ts: int) -> bool:
        c = self.config
        if seg.size == 0:
            return not seg.can_hold_offset(last_offset)
        # positions in the offset index are int32, hence the 2 GiB cap
        if seg.size + size > min(c.segment_bytes, 0x7FFFFFFF):
            return True
        # seg.index_full and seg.can_hold_offset, read without their calls (every append asks)
        if (seg.offset_index.is_full or seg.time_index.is_full
                or not 0 <= last_offset - seg.base_offset <= INT32_MAX):
            return True
        # segment.ms: measured from the first batch's timestamp (or creation
        # time when the segment has none), as Kafka's timeWaitedForRoll
        if seg.rolling_base_timestamp is not None and seg.rolling_base_timestamp >= 0 and max_ts >= 0:
            waited = max_ts - seg.rolling_base_timestamp
        else:
            waited = self.now_ms() - seg.created_ms
        return waited > c.segment_ms - c.segment_jitter_ms

    def _maybe_roll(self, size: int, last_offset: int, first_offset: int, max_ts: int) -> LogSegment:
        seg = self._segments[-1]
        if self._should_roll(seg, size, last_offset, max_ts):
            seg = self._roll(first_offset)
        return seg

    def roll(self) -> LogSegment:
        with self._lock:
            return self._roll(self.log_end_offset)

    def _roll(self, new_base: int) -> LogSegment:
        old = self._segments[-1]
        new_base = max(new_base, self.log_end_offset)
        if old.size == 0:
            if old.base_offset == new_base:
                return old
            # an empty active segment at a lower base: replace it
            self._segments.pop()
            self._bases.pop()
            old.delete()
        else:
            try:
                old.on_become_inactive()
            except OSError as e:
                log.warning("cannot persist indexes of %s: %s", old.log_path, e)
        try:
            seg = self._new_segment(new_base)
        except OSError as e:
            raise KafkaStorageError(f"cannot roll segment: {e}") from e
        seg.created_ms = self.now_ms()
        self._segments.append(seg)
        self._bases.append(new_base)
        # Kafka snapshots producer state at every roll so that a restart only
        # replays the active segment.  Not fsynced here (the append path must
        # stay fast); a torn snapshot fails its CRC and is ignored on load.
        try:
            self.producer_state.take_snapshot(new_base, fsync=False)
            self._prune_snapshots()
        except OSError as e:
            log.warning("cannot write producer snapshot: %s", e)
        return seg

    def _prune_snapshots(self) -> None:
        keep = max(1, self.config.producer_snapshots_to_keep)
        for off in self.producer_state.list_snapshots()[:-keep]:
            self.fs.remove(self.producer_state.snapshot_path(off))

    def _new_segment(self, base: int) -> LogSegment:
        c = self.config
        seg = LogSegment(self.dir, base, fs=self.fs, index_interval_bytes=c.index_interval_bytes,
                         max_index_entries=c.max_index_entries,
                         max_time_index_entries=c.max_time_index_entries)
        if seg.size:  # stale file at this base (should not happen): start clean
            seg._truncate_at(0, base)
        seg.offset_index.reset()
        seg.time_index.reset()
        seg.dir_dirty = True
        seg.mark_unflushed()
        return seg

    # ----------------------------------------------------------------- read
    def read(self, fetch_offset: int, max_bytes: int, max_offset: Optional[int] = None,
             min_one_batch: bool = True, whole_batches: bool = False) -> list[FileRegion]:
        """Batches from the one containing ``fetch_offset``.

        ``max_offset`` is an exclusive bound (the high watermark for
        consumers, the LSO for read_committed, None = log end): only batches
        whose last offset is below it are returned.  The result is at most
        ``max_bytes`` except that, with ``min_one_batch``, the first batch is
        returned whole even if larger (KIP-74).  Raises OffsetOutOfRange when
        fetch_offset < log start offset or > log end offset.

        By default this is Kafka's read (LocalLog.read, what every Fetch
        answers): one region from one segment, the first holding a batch at
        or after ``fetch_offset``, cut at ``max_bytes`` even inside a batch
        (LogSegment.read); clients drop a trailing partial batch and fetch it
        again.  ``whole_batches=True``: whole batches only, spanning segments
        (one region per segment), for readers that want everything whole."""
        with self._lock:
            leo = self.log_end_offset
            if fetch_offset < self.log_start_offset or fetch_offset > leo:
                raise OffsetOutOfRange(
                    f"offset {fetch_offset} outside [{self.log_start_offset}, {leo}]")
            if max_offset is None or max_offset > leo:
                max_offset = leo
            if fetch_offset >= max_offset:
                return []
            i = max(0, bisect_right(self._bases, fetch_offset) - 1)
            regions: list[FileRegion] = []
            remaining = max_bytes
            try:
                for seg in self._segments[i:]:
                    if seg.base_offset >= max_offset:
                        break
                    region, h = seg.read(fetch_offset, remaining, max_offset,
                                         min_one_batch and not regions, whole_batches)
                    if h is None:
                        continue
                    if region is None:
                        break
                    regions.append(region)
                    if not whole_batches:
                        break   # Kafka reads one segment per partition per fetch
                    remaining -= region.length
                    if remaining <= 0 or region.position + region.length < seg.size:
                        break
                    fetch_offset = seg.next_offset
            except OSError as e:
                raise KafkaStorageError(f"read failed: {e}") from e
            return regions

    # ----------------------------------------------------------- timestamps
    def offset_for_timestamp(self, timestamp: int) -> Optional[tuple[int, int, int]]:
        """ListOffsets for a timestamp >= 0: (offset, timestamp, leader
        epoch) of the first record with timestamp >= ``timestamp`` (its real
        timestamp), or None.  Leader epoch is -1 when unknown."""
        with self._lock:
            segs = list(self._segments)
            start = self.log_start_offset
        for seg in segs:
            if seg.largest_timestamp >= timestamp and seg.next_offset > start:
                r = seg.find_offset_by_timestamp(timestamp, start)
                if r is not None:
                    return r
        return None

    def max_timestamp_offset(self) -> Optional[tuple[int, int, int]]:
        """ListOffsets MAX_TIMESTAMP (-3): (offset, timestamp, epoch) of the
        first record carrying the largest timestamp, or None."""
        with self._lock:
            segs = list(self._segments)
        best = None
        for seg in segs:
            if seg.largest_timestamp >= 0 and (best is None or seg.largest_timestamp > best.largest_timestamp):
                best = seg
        return best.max_timestamp_record() if best is not None else None

    # -------------------------------------------------------- leader epochs
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset), (-1, -1) if unknown."""
        with self._lock:
            return self.epoch_cache.end_offset_for_epoch(epoch, self.log_end_offset)

    def epoch_for_offset(self, offset: int) -> Optional[int]:
        return self.epoch_cache.epoch_for_offset(offset)

    # ----------------------------------------------------------- truncation
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after ``offset`` (follower truncation).
        Returns True if anything was removed."""
        with self._lock:
            if offset >= self.log_end_offset:
                return False
            if offset < self.log_start_offset:
                self._truncate_fully_and_start_at(offset)
                return True
            while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
                seg = self._segments.pop()
                self._bases.pop()
                seg.delete()
            seg = self._segments[-1]
            seg.truncate_to(offset)
            seg.offset_index.persist()
            seg.time_index.persist()
            leo = self.log_end_offset
            self.epoch_cache.truncate_from_end(leo)
            self._rebuild_producer_state()
            self.recovery_point = min(self.recovery_point, leo)
            self.high_watermark = min(self.high_watermark, leo)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Follower behind the leader's log start: drop everything, the log restarts empty at
        ``offset`` (Kafka's truncateFullyAndStartAt)."""
        with self._lock:
            self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        for seg in self._segments:
            seg.delete()
        seg = self._new_segment(offset)
        self._segments = [seg]
        self._bases = [offset]
        self.log_start_offset = offset
        self.recovery_point = offset
        self.high_watermark = offset
        self.epoch_cache.clear()
        self.producer_state.clear()
        self.producer_state.delete_snapshots_above(-1)

    def _rebuild_producer_state(self) -> None:
        """Kafka's truncateAndReload: snapshots past the log end or at/below the log start are
        deleted, state comes from the newest remaining snapshot plus a replay of the log."""
        leo = self.log_end_offset
        ps = self.producer_state
        ps.delete_snapshots_above(leo)
        ps.delete_snapshots_at_or_below(self.log_start_offset)
        start = ps.load_latest_snapshot(leo)
        replay_producer_state(ps, self._segments, start if start is not None else self.log_start_offset, leo)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (Kafka's
        ``maybeIncrementLogStartOffset``).  No file is touched here, so this
        is safe on the event loop: segments lying wholly below the new start
        are removed afterwards through :meth:`delete_segments` (retention's
        "log start" rule, ``retention.deletable_segments``), which renames
        them to ``.deleted``; the files are unlinked after
        ``file.delete.delay.ms``, off the event loop.  Until then reads below
        the start are refused (OffsetOutOfRange) while the segments stay in
        place.  The caller checks ``offset`` against the high watermark.
        Returns the new log start."""
        with self._lock:
            if offset > self.log_end_offset:
                raise OffsetOutOfRange(f"offset {offset} beyond log end {self.log_end_offset}")
            if offset <= self.log_start_offset:
                return self.log_start_offset
            self._advance_start(offset)
            return offset

    def _advance_start(self, offset: int) -> None:
        """Move the log start up to ``offset`` (caller holds the lock), and the high
        watermark and recovery point with it where they are below."""
        self.log_start_offset = offset
        if self.high_watermark < offset:
            self.high_watermark = offset
        # Kafka moves the recovery point too; the segment holding it is
        # still recovered on an unclean restart, so this is safe.
        if self.recovery_point < offset:
            self.recovery_point = offset
        # not fsynced here (Kafka: truncateFromStartAsyncFlush); a stale
        # checkpoint is truncated to the log start again on load
        self.epoch_cache.truncate_from_start(offset, flush=False)

    # ------------------------------------------- retention / cleaner hooks
    def delete_segments(self, doomed: list) -> list:
        """Retention and DeleteRecords (run it in a worker thread): remove
        ``doomed`` (a prefix of the segment list) from the log, advance the
        log start offset to the new first segment's base if it is beyond,
        and rename their files to ``.deleted`` (Kafka's async delete:
        the caller removes them after ``file.delete.delay.ms``).  If every
        segment is doomed, a new empty active segment is rolled first, as
        Kafka does.  Returns the renamed segments (their ``delete`` removes
        the ``.deleted`` files)."""
        with self._lock:
            if self._closed or not doomed:
                return []
            n = 0
            for seg in doomed:                    # only an exact prefix, by identity
                if n < len(self._segments) and self._segments[n] is seg:
                    n += 1
                else:
                    break
            if n == 0:
                return []
            if n == len(self._segments):
                self._roll(self.log_end_offset)
            removed = self._segments[:n]
            del self._segments[:n]
            del self._bases[:n]
            new_start = self._segments[0].base_offset
            if new_start > self.log_start_offset:
                self._advance_start(new_start)
            try:
                # also persists a truncation left unflushed by delete_records_before
                self.epoch_cache.flush()
            except OSError as e:
                log.warning("cannot write leader epoch checkpoint of %s: %s", self.dir, e)
            out = []
            for seg in removed:
                try:
                    seg.change_file_suffixes("", ".deleted")
                except OSError as e:
                    log.warning("cannot rename %s for deletion: %s", seg.log_path, e)
                seg._release()
                out.append(seg)
            return out

    def replace_segments(self, cleaned: LogSegment, old: list,
                         hook: Optional[Callable[[str], None]] = None) -> bool:
        """Log cleaner swap (Kafka's replaceSegments), called by the
        partition's owner: ``cleaned`` (files ``*.cleaned``, flushed) takes
        the place of the contiguous segments ``old``.  Steps, each crash-safe
        because the loader completes a ``.swap`` and drops ``.cleaned`` /
        ``.deleted`` files:  ``.cleaned`` -> ``.swap``; old files ->
        ``.deleted``; ``.swap`` -> live names.  Returns False (nothing
        changed) when ``old`` is no longer a run of non-active segments of
        this log (retention, DeleteRecords or truncation got there first).
        ``hook(step)`` lets tests stop after a step ("swap", "deleted")."""
        with self._lock:
            if self._closed or not old:
                return False
            try:
                i = next(k for k, s in enumerate(self._segments) if s is old[0])
            except StopIteration:
                return False
            if self._segments[i:i + len(old)] != old or i + len(old) >= len(self._segments):
                return False
            cleaned.change_file_suffixes(".cleaned", ".swap")
            if hook:
                hook("swap")
            for seg in old:
                seg.change_file_suffixes("", ".deleted")
                seg._release()
            if hook:
                hook("deleted")
            cleaned.change_file_suffixes(".swap", "")
            self._segments[i:i + len(old)] = [cleaned]
            self._bases[i:i + len(old)] = [cleaned.base_offset]
            return True

    # -------------------------------------------------------- flush / close
    def flush(self) -> None:
        """fsync every segment with unflushed data (log + indexes), then
        move the recovery point to the log end offset."""
        try:
            with self._lock:
                target = self.log_end_offset
                pending = self.unflushed_messages
                work = [(s, s.prepare_flush()) for s in self._segments if s.unflushed]
            t0 = time.perf_counter()
            for s, token in work:          # the slow part, without the lock
                s.sync(token)
            if work and Log.flush_listener is not None:
                Log.flush_listener(time.perf_counter() - t0)
        except OSError as e:
            raise KafkaStorageError(f"flush failed: {e}") from e
        with self._lock:
            for s, token in work:
                s.complete_flush(token)
            if target > self.recovery_point:
                self.recovery_point = min(target, self.log_end_offset)
            self.unflushed_messages = max(0, self.unflushed_messages - pending)

    def close(self, staged: Optional[list] = None) -> None:
        """Clean close: flush, snapshot producer state at the log end,
        persist indexes and the epoch cache, release the files.

        ``staged`` (a list; LogManager.shutdown): the same files written without
        any fsync, the snapshot and epoch checkpoint as temp files listed in
        ``staged`` (FileSystem.write_file_atomic); the caller syncs the whole
        file system, renames them, syncs again, then calls
        :meth:`complete_deferred_close`.  Until then the recovery point stays
        where it was (nothing of this close counts as durable)."""
        with self._lock:
            if self._closed:
                return
            if staged is None:
                self.flush()
            else:
                self._deferred_close_target = self.log_end_offset
                for seg in self._segments:
                    if seg.unflushed:
                        seg.prepare_flush()   # the index entries written (synced by the caller)
            try:
                self.producer_state.take_snapshot(self.log_end_offset, staged=staged)
                self._prune_snapshots()
                self.epoch_cache.flush(staged=staged)
            except OSError as e:
                log.warning("close of %s: %s", self.dir, e)
            for seg in self._segments:
                seg.close()
            self._closed = True

    def complete_deferred_close(self) -> None:
        """After a ``close(staged=...)``: everything it wrote is durable now (the caller
        synced the file system), so the recovery point moves to the log end, as a flush
        would have moved it."""
        with self._lock:
            target = getattr(self, "_deferred_close_target", None)
            if target is not None and target > self.recovery_point:
                self.recovery_point = target
            self.unflushed_messages = 0

    def abandon(self) -> None:
        """Release the files without writing anything (a crash: see LogManager.abandon)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for seg in self._segments:
                seg.force_close()   # indexes hold no descriptor (written on roll or close only)

    def rename_dir(self, new_dir: str) -> None:
        """Rename the partition directory (Kafka's LocalLog.renameDir): open files stay open, the
        segments, epoch checkpoint and producer snapshots follow the new path."""
        with self._lock:
            self.fs.rename(self.dir, new_dir)
            self.dir = new_dir
            for seg in self._segments:
                seg.update_parent_dir(new_dir)
            ckpt = self.epoch_cache.checkpoint
            if ckpt is not None:
                ckpt.path = os.path.join(new_dir, os.path.basename(ckpt.path))
            self.producer_state.dir = new_dir
            self.topic_partition = parse_partition_dir(os.path.basename(new_dir.rstrip("/")))

    def delete(self) -> None:
        """Delete the whole partition directory."""
        with self._lock:
            for seg in self._segments:
                seg.delete()
            self._closed = True
            self.fs.rmtree(self.dir)


def replay_producer_state(ps: ProducerStateManager, segments: Iterable[LogSegment], start: int, end: int,
                          rebuild_txn_index_from: Optional[int] = None) -> None:
    """Rebuild producer state from batch headers in [start, end).  Control batches are read
    whole (one small record) for their COMMIT/ABORT type.  Segments based at or after
    ``rebuild_txn_index_from`` get their aborted-transaction index rebuilt on the way (they
    were recovered: their ``.txnindex`` cannot be trusted)."""
    from .txn_index import AbortedTxn
    for seg in segments:
        rebuild = rebuild_txn_index_from is not None and seg.base_offset >= rebuild_txn_index_from
        if rebuild:
            seg.txn_index.reset()
        if seg.next_offset <= start or seg.base_offset >= end or seg.size == 0:
            continue
        h0 = seg.translate_offset(start)
        if h0 is None:
            continue
        for h, _ in seg.iter_batches(h0.position):
            if h.base_offset >= end:
                break
            if h.last_offset >= start:
                ctype = control_type(seg.read_batch(h)) if h.is_control and h.producer_id >= 0 else None
                done = ps.update_from_header(h, ctype)
                if rebuild and done is not None and done.is_aborted:
                    others = list(ps.ongoing.values()) + [f for f, last in ps.unreplicated
                                                          if last != done.last_offset]
                    seg.txn_index.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                                                    min(others) if others else done.last_offset + 1))
