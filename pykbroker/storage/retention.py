"""Time- and size-based retention (Kafka's ``UnifiedLog.deleteOldSegments``).

Every ``log.retention.check.interval.ms`` (broker config, default 5 minutes) the retention task
looks at each partition and deletes whole segments from the oldest one on:

- only for topics whose ``cleanup.policy`` contains ``delete`` (compact-only topics only lose
  segments lying wholly below the log start offset, which DeleteRecords may have moved);
- by time: a segment goes when ``now - largest timestamp > retention.ms`` (the largest
  timestamp of its batches; a segment without any timestamp uses its file's mtime, as Kafka
  uses lastModified); ``retention.ms`` < 0 keeps data forever;
- by size: ``retention.bytes`` < 0 is unlimited; otherwise, from the oldest segment on, a
  segment goes while the log minus it stays at or above the limit;
- deletion stops at the first segment that is kept, and never passes the high watermark
  (a segment goes only if the next segment's base, or the log end for the last one, is at or
  below the high watermark), so the log start offset never exceeds it;
- the active segment: as in Kafka, when it is itself expired (and non-empty) a new empty
  active segment is rolled first and the old one deleted, so an idle topic does lose its last
  records after ``retention.ms``.  An empty active segment is never deleted.

The log start offset then moves to the first remaining segment's base offset (ListOffsets
EARLIEST follows it, a Fetch below it answers OFFSET_OUT_OF_RANGE) and is checkpointed at once
(``log-start-offset-checkpoint``) so deleted records never reappear after a crash.

DeleteRecords (``Partition.delete_records_before``) only moves the log start offset on the event
loop, then hands the segments wholly below it to the same deletion path
(``LogManager.delete_below_log_start`` -> ``RetentionTask.delete_below_log_start``).

The task is started by the ``LogManager`` with its interval and the nursery's ``start_soon``.

File deletion follows Kafka: under the log's lock the segments are dropped from the log and
their files renamed to ``*.deleted`` (in a worker thread: renames are disk metadata I/O); the
``.deleted`` files are unlinked after the topic's ``file.delete.delay.ms`` (default 60 s), again
in a worker thread.  A fetch still sending from a deleted segment keeps its open fd.  After a
crash the loader removes leftover ``.deleted`` files.
"""
from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

import trio

if TYPE_CHECKING:
    from .log import Log
    from .manager import LogManager
    from .segment import LogSegment

log = logging.getLogger("pykbroker.retention")

__all__ = ["deletable_segments", "RetentionTask"]


def _segment_time(seg: LogSegment) -> int:
    ts = seg.largest_timestamp
    if ts >= 0:
        return ts
    try:
        return int(os.stat(seg.log_path).st_mtime * 1000)
    except OSError:
        return int(time.time() * 1000)


def deletable_segments(lg: Log, now_ms: int, retention_ms: int | None, retention_bytes: int | None,
                       delete_policy: bool) -> tuple[list, str]:
    """The prefix of ``lg``'s segments retention deletes now, and the reason
    ("time", "size", "log start" or "").  Pure computation, no I/O except the
    mtime fallback."""
    segs = lg.segments
    hw = lg.high_watermark
    leo = lg.log_end_offset
    start = lg.log_start_offset

    def collect(pred: Callable[[LogSegment, Optional[LogSegment]], bool]) -> list:
        out = []
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else leo
            last_and_empty = nxt is None and seg.size == 0
            if hw >= upper and not last_and_empty and pred(seg, nxt):
                out.append(seg)
            else:
                break
        return out

    if delete_policy:
        if retention_ms is not None and retention_ms >= 0:
            doomed = collect(lambda s, n: now_ms - _segment_time(s) > retention_ms)
            if doomed:
                return doomed, "time"
        if retention_bytes is not None and retention_bytes >= 0:
            diff = [lg.size_in_bytes - retention_bytes]
            if diff[0] > 0:
                def by_size(s: LogSegment, n: Optional[LogSegment]) -> bool:
                    if diff[0] - s.size >= 0:
                        diff[0] -= s.size
                        return True
                    return False
                doomed = collect(by_size)
                if doomed:
                    return doomed, "size"
    doomed = collect(lambda s, n: n is not None and n.base_offset <= start)
    return doomed, ("log start" if doomed else "")


class RetentionTask:
    """The broker's retention loop over the LogManager's online logs.  ``spawn`` starts the
    delayed file deletions (the broker nursery's ``start_soon``); ``interval_ms`` is
    ``log.retention.check.interval.ms``."""

    def __init__(self, log_manager: LogManager, spawn: Callable[..., Any], interval_ms: int = 300000) -> None:
        self.lm = log_manager
        self.spawn = spawn
        self.interval_ms = interval_ms
        self.deleted_segments = 0     # counters, for logs and tests
        # periodic passes finished (with or without deletions): what proves "nothing expired"
        # was checked, rather than not yet looked at
        self.passes = 0

    async def run(self) -> None:
        while True:
            await trio.sleep(self.interval_ms / 1000.0)
            try:
                await self.check_all()
            except Exception:
                log.exception("retention check failed")
            self.passes += 1

    async def check_all(self, now_ms: Optional[int] = None) -> int:
        total = 0
        for tp, lg, _ in self.lm.online_logs():
            if not self.lm.is_live(tp, lg):
                continue
            try:
                total += await self.check_log(tp, lg, now_ms)
            except Exception:
                log.exception("retention of %s-%d failed", tp[0], tp[1])
        return total

    async def check_log(self, tp: tuple[str, int], lg: Log, now_ms: Optional[int] = None) -> int:
        cfg = self.lm.topic_config(tp[0])
        policy = cfg.get("cleanup.policy") or ["delete"]
        if isinstance(policy, str):
            policy = [p.strip() for p in policy.split(",")]
        now = self.lm.now_ms() if now_ms is None else now_ms
        count = 0
        # Kafka applies time, size and log-start deletion one after the other in one pass
        for _ in range(3):
            doomed, reason = deletable_segments(lg, now, cfg.get("retention.ms"),
                                                cfg.get("retention.bytes"), "delete" in policy)
            if not doomed or self.lm.get_log(*tp) is not lg:
                break
            n = await self._delete(tp, lg, doomed, reason)
            if not n:
                break
            count += n
        if count:
            self.deleted_segments += count
            self.lm.request_checkpoint()
        return count

    async def delete_below_log_start(self, tp: tuple[str, int], lg: Log) -> int:
        """After DeleteRecords moved the log start offset: the segments lying wholly below it
        go now, the same way retention removes them (Kafka leaves them to its next retention
        pass; doing it at once frees the disk sooner and changes nothing a client can see)."""
        if not self.lm.is_live(tp, lg):
            return 0
        doomed, reason = deletable_segments(lg, 0, None, None, False)
        if not doomed:
            return 0
        n = await self._delete(tp, lg, doomed, reason)
        self.deleted_segments += n
        return n

    async def _delete(self, tp: tuple[str, int], lg: Log, doomed: list[LogSegment], reason: str) -> int:
        """Drop ``doomed`` from ``lg`` and rename the files to ``.deleted`` in a worker
        thread; schedule the unlink after ``file.delete.delay.ms``."""
        before = lg.log_start_offset
        removed = await trio.to_thread.run_sync(lg.delete_segments, doomed)
        if not removed:
            return 0
        log.info("%s-%d: deleted %d segment(s) by %s retention, log start offset %d -> %d",
                 tp[0], tp[1], len(removed), reason, before, lg.log_start_offset)
        delay = self.lm.topic_config(tp[0]).get("file.delete.delay.ms")
        delay = 60000 if delay is None else delay
        self.spawn(delete_files_later, removed, delay / 1000.0)
        return len(removed)


async def delete_files_later(segments: Iterable[LogSegment], delay_s: float) -> None:
    """Kafka's asynchronous segment deletion: unlink the ``.deleted`` files
    after ``file.delete.delay.ms``, off the event loop."""
    if delay_s > 0:
        await trio.sleep(delay_s)

    def unlink() -> None:
        for seg in segments:
            try:
                seg.delete()
            except OSError as e:
                log.warning("cannot delete %s: %s", seg.log_path, e)

    await trio.to_thread.run_sync(unlink)
