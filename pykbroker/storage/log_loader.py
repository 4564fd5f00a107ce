"""Loading a partition's log from its directory: Kafka's LogLoader.

Owns recovery at open: leftovers of interrupted operations are removed, an interrupted
log-cleaner swap is completed or rolled back, segments past the recovery point (all of them
after an unclean shutdown) are recovered by a CRC scan and truncated at their first invalid
batch, the leader-epoch cache and producer state are rebuilt, and a ``Log`` is handed back.
``load_log`` is the one entry point; the ``Log`` itself lives in log.py.
"""
from __future__ import annotations

import logging
import os
import re
from typing import TYPE_CHECKING, Callable, Optional

from .checkpoints import LeaderEpochCheckpointFile, LEADER_EPOCH_CHECKPOINT
from .epoch import LeaderEpochCache
from .fs import FileSystem, REAL_FS
from .log import Log, replay_producer_state, wall_ms
from .log_config import LogConfig
from .producer_state import ProducerStateManager
from .segment import LogSegment

if TYPE_CHECKING:
    from ..protocol.records import BatchHeader

__all__ = ["LogLoader", "load_log"]

log = logging.getLogger(__name__)

_LOG_FILE_RE = re.compile(r"^(\d{20})\.log$")
_INDEX_FILE_RE = re.compile(r"^(\d{20})\.(index|timeindex|txnindex)$")
# leftovers of interrupted operations (Kafka's suffixes plus our temp files)
_LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")


class LogLoader:
    """Rebuilds a Log from its directory.  Never raises on bad data: a
    damaged segment is truncated at its first invalid batch, later segments
    are deleted, and a garbage file yields an empty but valid log."""

    def __init__(self, dir: str, config: LogConfig, recovery_point: int = 0,
                 clean_shutdown: bool = False, log_start_offset: Optional[int] = None,
                 fs: FileSystem = REAL_FS, now_ms: Callable[[], int] = wall_ms,
                 staged: Optional[list] = None) -> None:
        self.dir = dir
        # a list: the leader-epoch checkpoint is written as an unsynced temp file and
        # ``(temp, path)`` appended, for a caller that syncs many new logs at once
        self.staged = staged
        self.config = config
        self.now_ms = now_ms
        self.recovery_point = recovery_point or 0
        self.clean_shutdown = clean_shutdown
        self.log_start_offset = log_start_offset
        self.fs = fs

    def _open_segment(self, base: int) -> LogSegment:
        c = self.config
        return LogSegment(self.dir, base, fs=self.fs, index_interval_bytes=c.index_interval_bytes,
                          max_index_entries=c.max_index_entries,
                          max_time_index_entries=c.max_time_index_entries)

    def _complete_swaps(self) -> None:
        """Finish or roll back an interrupted log-cleaner swap (Kafka's
        LogLoader rules).  ``.cleaned`` files were never complete: dropped
        (rollback, the old segments are intact).  ``.deleted`` files were
        already replaced: dropped.  A ``.log.swap`` is a complete, fsynced
        cleaned segment: live segments whose base offset lies in
        [swap base, swap next offset) are deleted and the swap renamed into
        place (completion); its indexes are rebuilt by a CRC scan."""
        fs, d = self.fs, self.dir
        names = fs.listdir(d)
        for name in names:
            if name.endswith((".cleaned", ".deleted")) or \
                    (name.endswith(".swap") and not name.endswith(".log.swap")):
                fs.remove(os.path.join(d, name))
        swaps = sorted(int(n[:20]) for n in names
                       if n.endswith(".log.swap") and _LOG_FILE_RE.match(n[:-5]))
        for base in swaps:
            seg = LogSegment(d, base, fs=self.fs, file_suffix=".swap",
                             index_interval_bytes=self.config.index_interval_bytes,
                             max_index_entries=self.config.max_index_entries,
                             max_time_index_entries=self.config.max_time_index_entries)
            seg.recover()
            end = seg.next_offset
            for name in fs.listdir(d):
                m = _LOG_FILE_RE.match(name)
                if m and base <= int(m.group(1)) < max(end, base + 1):
                    for suffix in (".log", ".index", ".timeindex"):
                        fs.remove(os.path.join(d, m.group(1) + suffix))
            seg.change_file_suffixes(".swap", "")
            seg.offset_index.persist()
            seg.time_index.persist()
            seg.close()
            log.info("completed an interrupted cleaner swap of segment %d in %s", base, d)
        if swaps:
            fs.fsync_dir(d)

    def load(self) -> Log:
        fs, d = self.fs, self.dir
        fs.makedirs(d)
        self._complete_swaps()
        names = fs.listdir(d)
        bases = []
        log_names = set()
        for name in names:
            if name.endswith(_LEFTOVER_SUFFIXES):
                fs.remove(os.path.join(d, name))
                continue
            m = _LOG_FILE_RE.match(name)
            if m:
                bases.append(int(m.group(1)))
                log_names.add(m.group(1))
        for name in names:  # orphaned index files of a missing .log
            m = _INDEX_FILE_RE.match(name)
            if m and m.group(1) not in log_names:
                fs.remove(os.path.join(d, name))
        bases.sort()

        epoch_ckpt = LeaderEpochCheckpointFile(os.path.join(d, LEADER_EPOCH_CHECKPOINT), fs)
        stored_epochs = epoch_ckpt.read()
        cache = LeaderEpochCache(epoch_ckpt, stored_epochs or [])
        rebuild_epochs = stored_epochs is None and bool(bases)

        def on_batch(h: BatchHeader) -> None:
            pe = h.partition_leader_epoch
            if pe >= 0 and (cache.latest_epoch is None or pe > cache.latest_epoch):
                cache.assign(pe, h.base_offset, flush=False)

        segments: list[LogSegment] = []
        for b in bases:
            segments.append(self._open_segment(b))

        recovered_from = None   # base of the first segment recovered (its txn index is rebuilt)
        i = 0
        while i < len(segments):
            seg = segments[i]
            is_last = i == len(segments) - 1
            below_rp = (not is_last) and segments[i + 1].base_offset <= self.recovery_point
            min_base = segments[i - 1].next_offset if i > 0 else None
            truncated = 0
            ok = False
            if self.clean_shutdown or below_rp:
                ok = seg.load()
                if ok and min_base is not None and seg.size and seg.base_offset < min_base:
                    ok = False
            if not ok:
                if not self.clean_shutdown and not below_rp:
                    log.info("recovering segment %s", seg.log_path)
                truncated = seg.recover(on_batch=on_batch, min_base_offset=min_base)
                if recovered_from is None:
                    recovered_from = seg.base_offset
            # a segment may not run into the next one (garbage offsets)
            if not is_last and seg.next_offset > segments[i + 1].base_offset:
                log.warning("segment %s overlaps the next one; truncating", seg.log_path)
                truncated += seg.truncate_to(segments[i + 1].base_offset)
            if truncated and not is_last:
                for later in segments[i + 1:]:
                    log.warning("deleting segment %s after a corrupt one", later.log_path)
                    later.delete()
                del segments[i + 1:]
            i += 1

        if not segments:
            start = self.log_start_offset or 0
            seg = self._open_segment(start)
            seg.offset_index.reset()
            seg.time_index.reset()
            segments.append(seg)

        leo = segments[-1].next_offset
        log_start = max(self.log_start_offset or 0, segments[0].base_offset)
        recovery_point = min(max(self.recovery_point, log_start), leo)

        if rebuild_epochs:
            log.warning("leader epoch checkpoint of %s missing or damaged; rebuilding from batch headers", d)
            cache.clear(flush=False)
            for seg in segments:
                for h, _ in seg.iter_batches(0):
                    on_batch(h)
        cache.truncate_from_end(leo, flush=False)
        cache.truncate_from_start(log_start, flush=False)
        try:
            cache.flush(staged=self.staged)
        except OSError as e:
            log.warning("cannot write %s: %s", epoch_ckpt.path, e)

        ps = ProducerStateManager(d, fs)
        ps.delete_snapshots_above(leo)
        # Kafka's truncateAndReload at load: a snapshot at or below the log start is dropped,
        # so producers known only from deleted data are forgotten (then accepted at any
        # sequence, see producer_state.py); state comes from a later snapshot or the log
        ps.delete_snapshots_at_or_below(log_start)
        # A recovered segment's aborted-transaction index is rebuilt by replaying producer state
        # through it, so the replay starts from a snapshot at or before that segment.
        snap = ps.load_latest_snapshot(leo if recovered_from is None else max(recovered_from, log_start))
        replay_producer_state(ps, segments, snap if snap is not None else log_start, leo,
                              rebuild_txn_index_from=recovered_from)

        for seg in segments:
            seg.created_ms = self.now_ms()
        lg = Log(d, self.config, segments, log_start, recovery_point, cache, ps, fs, now_ms=self.now_ms)
        if log_start > leo:
            # the checkpointed log start is beyond what survived: the data
            # below it was deleted anyway, start afresh there
            log.warning("log start offset %d beyond log end %d in %s", log_start, leo, d)
            lg._truncate_fully_and_start_at(log_start)
        # unclean start: data past the recovery point was just verified, but
        # it is not known to be fsynced
        lg.unflushed_messages = 0
        for s in lg._segments:
            if not self.clean_shutdown and s.next_offset > recovery_point:
                s.mark_unflushed()
            elif not s._needs_sync:
                s.mark_flushed()
        return lg


def load_log(dir: str, config: Optional[LogConfig] = None, recovery_point: int = 0,
             clean_shutdown: bool = False, log_start_offset: Optional[int] = None,
             fs: FileSystem = REAL_FS, now_ms: Callable[[], int] = wall_ms,
             staged: Optional[list] = None) -> Log:
    """Open (or create) the log in ``dir`` and rebuild its state; ``now_ms`` is the broker's
    wall clock (pykbroker/clock.py); ``staged``: see :class:`LogLoader`."""
    return LogLoader(dir, config or LogConfig(), recovery_point, clean_shutdown,
                     log_start_offset, fs, now_ms, staged).load()
