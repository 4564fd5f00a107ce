"""Log compaction (Kafka's LogCleaner / LogCleanerManager / Cleaner).

Which logs: every partition whose ``cleanup.policy`` contains ``compact`` (``__consumer_offsets``
included: the group coordinator creates it with ``cleanup.policy=compact``).

When (checked every ``log.cleaner.backoff.ms``, one log at a time, the dirtiest first):
- the *clean* part is [log start, first dirty offset) (``cleaner-offset-checkpoint`` in each log
  dir, as Kafka), the *dirty* part is [first dirty offset, first uncleanable offset), where the
  first uncleanable offset is the lowest of: the active segment's base (the active segment is
  never touched), the high watermark, and the base of the first dirty segment holding a record
  younger than ``min.compaction.lag.ms``;
- the log is cleaned when dirty bytes / (clean + dirty bytes) > ``min.cleanable.dirty.ratio``,
  or when its first dirty segment's first batch is older than ``max.compaction.lag.ms`` (and
  there is something dirty), or — pykbroker's addition — when a tombstone's delete horizon has
  passed (Kafka needs a later dirty write to come back for such tombstones; we come back on
  time so a tombstone really is gone shortly after ``delete.retention.ms``).

How (a worker thread, bounded memory):
1. Offset map: key -> latest offset over the dirty part.  Keys are hashed with MD5 (16 bytes,
   Kafka's choice).  Its size is capped: ``log.cleaner.dedupe.buffer.size`` ×
   ``log.cleaner.io.buffer.load.factor`` / ``OFFSET_MAP_ENTRY_BYTES``, where
   ``OFFSET_MAP_ENTRY_BYTES`` = 128 is what one entry of a Python dict of 16-byte keys really
   costs (Kafka's array map costs 24 bytes an entry, so a same-sized buffer holds ~5x fewer keys
   here; the memory bound is the one configured).  When the map is full the cleaning stops at
   the offset reached (Kafka's ``map.latestOffset + 1``); the rest is cleaned next round.
2. Every non-active segment from the log start up to that end offset is rewritten, in groups
   whose total size fits ``segment.bytes`` (and whose offsets fit a 32-bit relative index):
   - a record is kept if it is past the map's range, or it is the latest for its key and it has
     a value or its batch's delete horizon is not reached; keyless records are dropped (they can
     only come from before the topic became compacted; Kafka counts them as invalid and drops
     them too);
   - tombstones (null value) use Kafka's current approach (KIP-534): the first cleaning that
     keeps a tombstone writes its batch with ``deleteHorizonMs`` = now + ``delete.retention.ms``
     (the batch attribute bit 6 and baseTimestamp = the horizon; record timestamp deltas are
     re-based so timestamps are unchanged); a later cleaning after the horizon drops it;
   - batches keep their base offset, last offset delta (so offsets are preserved with gaps, and
     producer sequences still span the original range), producer id / epoch / base sequence,
     partition leader epoch, timestamp type and compression codec (a partly kept compressed
     batch is recompressed with its own codec); an untouched batch is copied byte for byte;
   - an emptied batch is dropped, except the last batch of each active producer, which stays
     as an empty batch header (Kafka's RETAIN_EMPTY) so idempotent producer state survives.
3. The cleaned group is written as ``<base>.log.cleaned`` (+ ``.index.cleaned``,
   ``.timeindex.cleaned``) and fsynced; then, on the trio thread between awaits (so no append,
   read or retention deletion interleaves), ``Log.replace_segments`` renames ``.cleaned`` ->
   ``.swap``, the old segments -> ``.deleted``, ``.swap`` -> the live names.  A crash at any
   point is repaired by the loader (``LogLoader._complete_swaps``): ``.cleaned`` files are
   dropped (roll back), a ``.swap`` replaces the segments it covers (roll forward), ``.deleted``
   files are removed.  The replaced segments' files are unlinked after ``file.delete.delay.ms``.
   If retention or DeleteRecords removed a segment of the group meanwhile the swap is
   abandoned (``.cleaned`` files dropped) and retried next round.
"""
from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional

from pykbroker.protocol.records import (
    CODEC_NONE, DELETE_HORIZON_MASK, HEADER_SIZE, LOG_APPEND_TIME, LOG_OVERHEAD, MAGIC_V2,
    BatchHeader, decode_records, encode_batch, CONTROL_MASK, TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from .fdpool import FdHandle, pin_all
from .fs import FileSystem
from .segment import LogSegment, scan_batches

if TYPE_CHECKING:
    from .checkpoints import OffsetCheckpointFile
    from .log import Log
    from .manager import LogManager
from ..protocol import records as _records

log = logging.getLogger("pykbroker.cleaner")

__all__ = ["OffsetMap", "CleanerConfig", "CleanPlan", "plan_cleaning", "Cleaner",
           "CleanerAborted", "has_keyless_record", "OFFSET_MAP_ENTRY_BYTES"]

OFFSET_MAP_ENTRY_BYTES = 128
_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT32_MAX = 0x7FFFFFFF
_READ_CHUNK = 1 << 20
_WRITE_CHUNK = 1 << 20


class CleanerAborted(Exception):
    """The cleaning of one log stopped (shutdown, or the log changed under it)."""


# ---------------------------------------------------------------------------
# Offset map


class OffsetMap:
    """key hash -> latest offset, with a fixed entry cap (Kafka's SkimpyOffsetMap)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max(1, max_entries)
        self._d: dict[bytes, int] = {}
        self.latest_offset = -1

    @staticmethod
    def hash(key: bytes) -> bytes:
        return hashlib.md5(key).digest()

    def __len__(self) -> int:
        return len(self._d)

    @property
    def full(self) -> bool:
        return len(self._d) >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        self._d[self.hash(key)] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        return self._d.get(self.hash(key), -1)

    def clear(self) -> None:
        self._d.clear()
        self.latest_offset = -1


# ---------------------------------------------------------------------------
# Configuration and the "is it time?" decision


@dataclass
class CleanerConfig:
    """The topic configs the cleaner reads (Kafka names in comments)."""
    delete_retention_ms: int = 86400000        # delete.retention.ms
    min_compaction_lag_ms: int = 0             # min.compaction.lag.ms
    max_compaction_lag_ms: int = (1 << 63) - 1  # max.compaction.lag.ms
    min_cleanable_ratio: float = 0.5           # min.cleanable.dirty.ratio
    segment_bytes: int = 1 << 30               # segment.bytes

    @classmethod
    def from_topic_config(cls, cfg: dict) -> "CleanerConfig":
        c = cls()
        for attr, name in (("delete_retention_ms", "delete.retention.ms"),
                           ("min_compaction_lag_ms", "min.compaction.lag.ms"),
                           ("max_compaction_lag_ms", "max.compaction.lag.ms"),
                           ("min_cleanable_ratio", "min.cleanable.dirty.ratio"),
                           ("segment_bytes", "segment.bytes")):
            v = cfg.get(name)
            if v is not None:
                setattr(c, attr, type(getattr(c, attr))(v))
        return c


@dataclass
class CleanPlan:
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    reason: str

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def _first_batch_timestamp(seg: LogSegment) -> int:
    for h, _ in seg.iter_batches(0):
        return h.max_timestamp
    return -1


def _aborted_ranges(segments: Iterable[LogSegment]) -> dict:
    """producer id -> [(first offset, marker offset)] of the aborted transactions in ``segments``
    (their ``.txnindex``)."""
    out: dict = {}
    for seg in segments:
        for e in seg.txn_index.entries:
            out.setdefault(e.producer_id, []).append((e.first_offset, e.last_offset))
    return out


def plan_cleaning(lg: Log, first_dirty: int, now_ms: int, cc: CleanerConfig,
                  horizon_due: bool = False) -> Optional[CleanPlan]:
    """Kafka's LogCleanerManager decision for one log; None = nothing to do."""
    segs = lg.segments
    if len(segs) < 2:
        return None
    start = lg.log_start_offset
    first_dirty = max(first_dirty, start)
    if first_dirty > lg.log_end_offset:
        first_dirty = start
    non_active = segs[:-1]
    uncleanable = min(segs[-1].base_offset, lg.high_watermark)
    fuo = lg.first_unstable_offset()
    if fuo is not None:
        # Kafka: nothing at or after the first unstable offset is cleaned (an open transaction's
        # records may still be aborted, which decides whether they shadow older records)
        uncleanable = min(uncleanable, fuo)
    dirty = [s for s in non_active if s.next_offset > first_dirty and s.base_offset < uncleanable]
    if cc.min_compaction_lag_ms > 0:
        for s in dirty:
            if s.largest_timestamp > now_ms - cc.min_compaction_lag_ms:
                uncleanable = min(uncleanable, s.base_offset)
                break
    dirty = [s for s in dirty if s.base_offset < uncleanable]
    clean = [s for s in non_active if s.next_offset <= first_dirty and s.next_offset > start]
    plan = CleanPlan(first_dirty, uncleanable, sum(s.size for s in clean),
                     sum(s.size for s in dirty), "")
    if plan.dirty_bytes > 0 and plan.ratio > cc.min_cleanable_ratio:
        plan.reason = "dirty ratio %.2f" % plan.ratio
    elif plan.dirty_bytes > 0 and cc.max_compaction_lag_ms < (1 << 62):
        ts = _first_batch_timestamp(dirty[0])
        if 0 <= ts < now_ms - cc.max_compaction_lag_ms:
            plan.reason = "max.compaction.lag.ms"
    if not plan.reason and horizon_due and plan.clean_bytes + plan.dirty_bytes > 0:
        plan.reason = "tombstone delete horizon"
    return plan if plan.reason else None


# ---------------------------------------------------------------------------
# Batch scanning over a captured fd


def _scan(fs: FileSystem, fd: int, end: int) -> Iterator[tuple[BatchHeader, bytes]]:
    """(BatchHeader, whole-batch bytes) for every valid batch in [0, end)."""
    for h, batch in scan_batches(fs, fd, 0, end, _READ_CHUNK, with_body=True):
        yield h, bytes(batch)  # type: ignore[arg-type]  # with_body=True: never None


def _scan_pinned(fs: FileSystem, handle: FdHandle, end: int) -> Iterator[tuple[BatchHeader, bytes]]:
    """:func:`_scan` over a segment file's handle, pinned while it runs (fdpool.py)."""
    with handle.pinned() as fd:
        yield from _scan(fs, fd, end)


def _empty_batch(h: BatchHeader, attrs: int) -> bytes:
    """Kafka's DefaultRecordBatch.writeEmptyHeader: no records, same offsets
    and producer fields, base and max timestamp = the batch's max timestamp."""
    buf = bytearray(HEADER_SIZE)
    attrs &= TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK
    _HEADER.pack_into(buf, 0, h.base_offset, HEADER_SIZE - LOG_OVERHEAD, h.partition_leader_epoch,
                      MAGIC_V2, 0, attrs, h.last_offset_delta, h.max_timestamp, h.max_timestamp,
                      h.producer_id, h.producer_epoch, h.base_sequence, 0)
    struct.pack_into(">I", buf, 17, _records.crc32c(bytes(buf[21:])))
    return bytes(buf)


def has_keyless_record(batch: bytes | bytearray | memoryview) -> bool:
    """True if any record of this v2 batch (whole batch bytes) has a null key.
    Used by Produce on compacted topics only (Kafka's LogValidator checks
    every record there too: a key can only be seen by walking the records)."""
    return any(r.key is None for r in decode_records(batch))


# ---------------------------------------------------------------------------
# The cleaning itself


@dataclass
class CleanStats:
    batches_read: int = 0
    records_read: int = 0
    records_kept: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    tombstones_dropped: int = 0
    min_horizon: int = -1      # earliest delete horizon among kept tombstone batches


class Cleaner:
    """Stateless cleaning steps for one log.  ``stop`` (threading.Event) aborts
    a run; ``hook(step)`` is called after each step ("cleaned", "swap",
    "deleted"), tests make it raise to simulate a crash there."""

    def __init__(self, map_entries: int, stop: Optional[threading.Event] = None,
                 hook: Optional[Callable[[str], None]] = None) -> None:
        self.map = OffsetMap(map_entries)
        self.stop = stop or threading.Event()
        self.hook = hook

    aborted: dict = {}

    def _is_aborted(self, h: BatchHeader) -> bool:
        if not (h.attributes & TRANSACTIONAL_MASK) or h.producer_id not in self.aborted:
            return False
        return any(first <= h.base_offset <= last for first, last in self.aborted[h.producer_id])

    def _check(self) -> None:
        if self.stop.is_set():
            raise CleanerAborted("cleaner stopped")

    # -- 1. offset map (worker thread)
    def build_offset_map(self, lg: Log, segments: list[LogSegment], handles: list[FdHandle],
                         plan: CleanPlan) -> int:
        """Fill the map from the dirty part; returns the end offset of what
        was mapped (exclusive): Kafka's ``map.latestOffset + 1``."""
        m = self.map
        m.clear()
        fs = lg.fs
        self.aborted = _aborted_ranges(segments)
        for seg, hd in zip(segments, handles):
            if seg.next_offset <= plan.first_dirty or seg.base_offset >= plan.first_uncleanable:
                continue
            for h, batch in _scan_pinned(fs, hd, seg.size):
                self._check()
                if h.last_offset < plan.first_dirty:
                    continue
                if h.base_offset >= plan.first_uncleanable:
                    break
                if h.attributes & CONTROL_MASK or h.records_count == 0 or self._is_aborted(h):
                    continue
                recs = decode_records(batch)
                if len(m) + len(recs) > m.max_entries and len(m) > 0:
                    return m.latest_offset + 1
                # decoded records always carry an offset (Record's fields are Optional
                # for the records a producer builds): ignores, not per-record asserts
                for r in recs:
                    if r.key is not None and r.offset >= plan.first_dirty:  # type: ignore[operator]
                        m.put(r.key, r.offset)  # type: ignore[arg-type]
                # a batch's offsets are all covered once seen
                if h.last_offset > m.latest_offset:
                    m.latest_offset = h.last_offset
        return max(m.latest_offset + 1, plan.first_dirty)

    # -- 2. grouping
    @staticmethod
    def group_segments(segments: list[LogSegment], end_offset: int, max_size: int) -> list[list]:
        """Consecutive non-active segments starting below ``end_offset``,
        grouped so each group fits one segment (Kafka's groupSegmentsBySize)."""
        cands = [s for s in segments[:-1] if s.base_offset < end_offset]
        groups: list[list] = []
        cur: list = []
        size = 0
        for s in cands:
            if cur and (size + s.size > max_size or
                        s.next_offset - 1 - cur[0].base_offset > _INT32_MAX):
                groups.append(cur)
                cur, size = [], 0
            cur.append(s)
            size += s.size
        if cur:
            groups.append(cur)
        return groups

    # -- 3. rewrite one group into *.cleaned (worker thread)
    def clean_group(self, lg: Log, group: list[LogSegment], handles: list[FdHandle], now_ms: int, cc: CleanerConfig,
                    producers_last: dict, stats: CleanStats, end: int) -> LogSegment:
        base = group[0].base_offset
        fs = lg.fs
        for ext in (".log", ".index", ".timeindex"):
            fs.remove(os.path.join(lg.dir, "%020d%s.cleaned" % (base, ext)))
        c = lg.config
        out = LogSegment(lg.dir, base, fs=fs, file_suffix=".cleaned",
                         index_interval_bytes=c.index_interval_bytes,
                         max_index_entries=c.max_index_entries,
                         max_time_index_entries=c.max_time_index_entries)
        out.offset_index.reset()
        out.time_index.reset()
        try:
            self._write_group(lg, out, group, handles, now_ms, cc, producers_last, stats, end)
            out.on_become_inactive()
            out.flush()
        except BaseException:
            out.delete()
            raise
        return out

    def _write_group(self, lg: Log, out: LogSegment, group: list[LogSegment], handles: list[FdHandle],
                     now_ms: int, cc: CleanerConfig, producers_last: dict, stats: CleanStats, end: int) -> None:
        # records at or past ``end`` were not seen by the offset map: kept as they are
        latest = end - 1
        pending = bytearray()
        pend_info: list[tuple[int, int, int, int]] = []
        pend_last = -1
        pend_max = (-1, -1)

        def flush_pending() -> None:
            nonlocal pending, pend_info, pend_last, pend_max
            if pending:
                out.append(bytes(pending), pend_last, pend_max[0], pend_max[1], pend_info)
                stats.bytes_written += len(pending)
                pending, pend_info, pend_last, pend_max = bytearray(), [], -1, (-1, -1)

        for seg, hd in zip(group, handles):
            for h, batch in _scan_pinned(lg.fs, hd, seg.size):
                self._check()
                stats.batches_read += 1
                stats.bytes_read += h.size
                data = self._filter_batch(h, batch, latest, now_ms, cc, producers_last, stats)
                if data is None:
                    continue
                if h.max_timestamp > pend_max[0]:
                    pend_max = (h.max_timestamp, h.last_offset)
                pend_info.append((len(pending), len(data), h.last_offset, _max_ts_of(data)))
                pending += data
                pend_last = h.last_offset
                if len(pending) >= _WRITE_CHUNK:
                    flush_pending()
        flush_pending()

    def _filter_batch(self, h: BatchHeader, batch: bytes, latest: int, now_ms: int,
                      cc: CleanerConfig, producers_last: dict, stats: CleanStats) -> Optional[bytes]:
        """The bytes to write for one batch, or None to drop it (Kafka's
        MemoryRecords.filterTo with the cleaner's retention rules)."""
        is_last_of_producer = h.producer_id >= 0 and producers_last.get(h.producer_id) == h.last_offset
        if h.attributes & CONTROL_MASK:
            return bytes(batch)     # markers are kept (Kafka drops them after the delete horizon)
        if h.records_count == 0:
            return bytes(batch) if is_last_of_producer else None
        if self._is_aborted(h):
            # records of an aborted transaction are dropped, as Kafka's cleaner does (they never
            # shadowed anything: the offset map skipped them too)
            return _empty_batch(h, h.attributes) if is_last_of_producer else None
        has_horizon = bool(h.attributes & DELETE_HORIZON_MASK)
        horizon = h.base_timestamp if has_horizon else None
        keep_deletes = horizon is None or now_ms < horizon
        recs = decode_records(batch)
        stats.records_read += len(recs)
        kept = []
        tombstones = False
        # decoded records always carry an offset: ignores, not per-record asserts
        for r in recs:
            if r.offset > latest:  # type: ignore[operator]
                keep = True
            elif r.key is None:
                keep = False        # keyless records cannot be compacted: Kafka drops them
            else:
                keep = r.offset >= self.map.get(r.key) and (r.value is not None or keep_deletes)  # type: ignore[operator]
            if keep:
                kept.append(r)
                if r.value is None:
                    tombstones = True
            elif r.value is None and r.key is not None:
                stats.tombstones_dropped += 1
        stats.records_kept += len(kept)
        need_horizon = tombstones and not has_horizon
        if tombstones:
            hz = now_ms + cc.delete_retention_ms if need_horizon else horizon
            assert hz is not None   # tombstones without need_horizon: the batch has one
            if stats.min_horizon < 0 or hz < stats.min_horizon:
                stats.min_horizon = hz
        if len(kept) == len(recs) and not need_horizon:
            return bytes(batch)
        if not kept:
            return _empty_batch(h, h.attributes) if is_last_of_producer else None
        new_horizon: Optional[int]
        if need_horizon:
            new_horizon = now_ms + cc.delete_retention_ms
        else:
            new_horizon = horizon       # keep the existing one (or none)
        log_append = bool(h.attributes & TIMESTAMP_TYPE_MASK)
        return encode_batch(
            kept, h.base_offset, h.codec,
            timestamp_type=LOG_APPEND_TIME if log_append else 0,
            producer_id=h.producer_id, producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            is_transactional=bool(h.attributes & TRANSACTIONAL_MASK),
            partition_leader_epoch=h.partition_leader_epoch,
            last_offset_delta=h.last_offset_delta,
            max_timestamp=h.max_timestamp if log_append else None,
            delete_horizon_ms=new_horizon)

    # -- everything, synchronously (tests and tools; the broker splits it)
    def clean_log(self, lg: Log, first_dirty: int, now_ms: int, cc: CleanerConfig,
                  force: bool = False) -> Optional[tuple[int, CleanStats]]:
        """Plan, map, rewrite and swap every group of ``lg`` in this thread.
        Returns (new first dirty offset, stats), or None if nothing to do."""
        plan = plan_cleaning(lg, first_dirty, now_ms, cc)
        if plan is None and force:
            segs = lg.segments
            fuo = lg.first_unstable_offset()
            plan = CleanPlan(max(first_dirty, lg.log_start_offset),
                             min(segs[-1].base_offset, lg.high_watermark,
                                 fuo if fuo is not None else lg.high_watermark), 0, 0, "forced")
        if plan is None:
            return None
        segments = lg.segments
        # the handles are pinned so that the files stay open (and readable after a
        # concurrent deletion) until cleaning ends: the old code's captured descriptors
        handles = [s._fdh for s in segments]
        producers = {pid: e.last_offset for pid, e in lg.producer_state.producers.items()}
        with pin_all(handles):
            end = self.build_offset_map(lg, segments, handles, plan)
            stats = CleanStats()
            for group in self.group_segments(segments, end, cc.segment_bytes):
                hs = [handles[segments.index(s)] for s in group]
                cleaned = self.clean_group(lg, group, hs, now_ms, cc, producers, stats, end)
                if self.hook:
                    self.hook("cleaned")
                if not lg.replace_segments(cleaned, group, hook=self.hook):
                    cleaned.delete()
                    raise CleanerAborted("log changed during cleaning")
                lg.fs.fsync_dir(lg.dir)
                for s in group:
                    s.delete()
        return end, stats


def _max_ts_of(batch: bytes) -> int:
    return struct.unpack_from(">q", batch, 35)[0]


# ---------------------------------------------------------------------------
# The broker's background task

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


def _abandon_kw() -> dict:
    """Let a shutdown abandon a running cleaning thread (it stops at its next
    batch through ``stop``; its ``.cleaned`` files are dropped on restart)."""
    import inspect
    import trio
    params = inspect.signature(trio.to_thread.run_sync).parameters
    return {"abandon_on_cancel": True} if "abandon_on_cancel" in params else {"cancellable": True}


_ABANDON = _abandon_kw()


class LogCleanerTask:
    """Runs in the broker nursery (started by the LogManager, over its online
    logs).  One log at a time, the dirtiest first; mapping and rewriting in a
    worker thread, each swap on the trio thread.  ``spawn`` starts the delayed
    file deletions (the nursery's ``start_soon``); the other arguments are the
    ``log.cleaner.*`` broker settings; ``hook`` is for crash tests."""

    def __init__(self, log_manager: LogManager, spawn: Callable[..., Any], enabled: bool = True,
                 backoff_ms: Optional[int] = None, dedupe_buffer_size: Optional[int] = None,
                 io_buffer_load_factor: Optional[float] = None,
                 hook: Optional[Callable[[str], None]] = None) -> None:
        self.lm = log_manager
        self.spawn = spawn
        self.enabled = enabled
        self.backoff_ms = 15000 if backoff_ms is None else backoff_ms
        self.hook = hook
        self.stop = threading.Event()
        self.first_dirty: dict[tuple, int] = {}
        self.horizons: dict[tuple, int] = {}      # tp -> earliest delete horizon kept
        self.cleanings = 0
        self.reconfigure(backoff_ms, dedupe_buffer_size, io_buffer_load_factor)

    def reconfigure(self, backoff_ms: Optional[int] = None, dedupe_buffer_size: Optional[int] = None,
                    io_buffer_load_factor: Optional[float] = None) -> None:
        """New ``log.cleaner.*`` values (dynamic broker configs): used from the next pass."""
        self.backoff_ms = 15000 if backoff_ms is None else backoff_ms
        size = dedupe_buffer_size or 134217728
        factor = io_buffer_load_factor or 0.9
        self.map_entries = max(1, int(size * factor) // OFFSET_MAP_ENTRY_BYTES)

    def _ckpt(self, d: str) -> OffsetCheckpointFile:
        from .checkpoints import OffsetCheckpointFile
        return OffsetCheckpointFile(os.path.join(d, CLEANER_OFFSET_CHECKPOINT), self.lm.fs)

    def load_checkpoints(self) -> None:
        for d in self.lm.log_dirs:
            try:
                self.first_dirty.update(self._ckpt(d).read())
            except OSError as e:
                log.warning("cannot read %s in %s: %s", CLEANER_OFFSET_CHECKPOINT, d, e)

    def _write_checkpoints(self, per_dir: dict) -> None:
        for d, data in per_dir.items():
            try:
                self._ckpt(d).write(data)
            except OSError as e:
                log.error("cannot write %s in %s: %s", CLEANER_OFFSET_CHECKPOINT, d, e)

    async def run(self) -> None:
        import trio
        if self.enabled is False:
            return
        await trio.to_thread.run_sync(self.load_checkpoints)
        backoff = self.backoff_ms
        try:
            while True:
                try:
                    did = await self.clean_one()
                except Exception:
                    log.exception("log cleaner round failed")
                    did = False
                if not did:
                    await trio.sleep(backoff / 1000.0)
                else:
                    await trio.sleep(0)
        finally:
            self.stop.set()

    def _candidates(self, now_ms: int) -> list:
        out = []
        for tp, lg, cfg in self.lm.online_logs():
            policy = cfg.get("cleanup.policy") or []
            if isinstance(policy, str):
                policy = [p.strip() for p in policy.split(",")]
            if "compact" not in policy:
                continue
            cc = CleanerConfig.from_topic_config(cfg)
            hz = self.horizons.get(tp, -1)
            plan = plan_cleaning(lg, self.first_dirty.get(tp, 0), now_ms, cc,
                                 horizon_due=0 <= hz <= now_ms)
            if plan is not None:
                out.append((plan.ratio, tp, lg, plan, cc))
        out.sort(key=lambda x: -x[0])
        return out

    async def clean_one(self) -> bool:
        """Clean the dirtiest log needing it; False if none did."""
        import trio
        from .retention import delete_files_later
        now = self.lm.now_ms()   # the broker's clock (pykbroker/clock.py)
        cands = self._candidates(now)
        if not cands:
            return False
        _, tp, lg, plan, cc = cands[0]
        name = "%s-%d" % tp
        segments = lg.segments
        handles = [s._fdh for s in segments]
        producers = {pid: e.last_offset for pid, e in lg.producer_state.producers.items()}
        cleaner = Cleaner(self.map_entries, self.stop, self.hook)
        t0 = time.monotonic()
        with pin_all(handles):   # see Cleaner.clean
            end = await trio.to_thread.run_sync(cleaner.build_offset_map, lg, segments, handles, plan,
                                                **_ABANDON)
            stats = CleanStats()
            delay = self.lm.topic_config(tp[0]).get("file.delete.delay.ms")
            delay = 60000 if delay is None else delay
            for group in cleaner.group_segments(segments, end, cc.segment_bytes):
                hs = [handles[segments.index(s)] for s in group]
                cleaned = await trio.to_thread.run_sync(
                    cleaner.clean_group, lg, group, hs, now, cc, producers, stats, end,
                    **_ABANDON)
                if self.hook:
                    self.hook("cleaned")
                # the swap: on the trio thread, no await inside (appends cannot interleave)
                if not self.lm.is_live(tp, lg) or not lg.replace_segments(cleaned, group, hook=self.hook):
                    await trio.to_thread.run_sync(cleaned.delete)
                    log.info("%s: cleaning abandoned, the log changed meanwhile", name)
                    return True
                await trio.to_thread.run_sync(lg.fs.fsync_dir, lg.dir)
                self.spawn(delete_files_later, group, delay / 1000.0)
        self.first_dirty[tp] = end
        self.horizons[tp] = stats.min_horizon
        self.cleanings += 1
        per_dir: dict = {}
        for t, off in self.first_dirty.items():
            if t in self.lm.logs:
                per_dir.setdefault(self.lm.dir_of(t) or self.lm.log_dirs[0], {})[t] = off
        await trio.to_thread.run_sync(self._write_checkpoints, per_dir)
        log.info("%s: cleaned up to offset %d (%s): %d/%d records kept, %d -> %d bytes, "
                 "%d tombstone(s) removed, %.0f ms", name, end, plan.reason, stats.records_kept,
                 stats.records_read, stats.bytes_read, stats.bytes_written,
                 stats.tombstones_dropped, (time.monotonic() - t0) * 1000)
        return True
