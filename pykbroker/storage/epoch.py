"""Leader epoch cache (Kafka's LeaderEpochFileCache), persisted in the
partition's ``leader-epoch-checkpoint``.

Entries ``(epoch, start_offset)`` are strictly increasing in both fields.
"""
from __future__ import annotations

import logging
from typing import Iterable, Optional

from .checkpoints import LeaderEpochCheckpointFile

__all__ = ["LeaderEpochCache", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, checkpoint: Optional[LeaderEpochCheckpointFile],
                 entries: Optional[Iterable[tuple[int, int]]] = None) -> None:
        self.checkpoint = checkpoint
        self._entries: list[tuple[int, int]] = list(entries or [])

    # ------------------------------------------------------------ queries
    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> Optional[int]:
        return self._entries[-1][0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> Optional[int]:
        """Epoch of the leader that wrote ``offset`` (None if unknown)."""
        prev = None
        for epoch, start in self._entries:
            if start == offset:
                return epoch
            if start > offset:
                return prev
            prev = epoch
        return prev

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch semantics (LeaderEpochFileCache.endOffsetFor):

        * undefined requested epoch -> (-1, -1);
        * requested == latest epoch -> (latest, log end offset);
        * requested newer than every known epoch -> (-1, -1);
        * requested older than every known epoch -> (requested, start offset
          of the first known epoch);
        * otherwise -> (greatest epoch <= requested, start offset of the
          first epoch > requested).
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1][0] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in self._entries if e[0] > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for e in self._entries:
            if e[0] <= requested_epoch:
                floor = e
            else:
                break
        if floor is None:
            return requested_epoch, higher[1]
        return floor[0], higher[1]

    # ------------------------------------------------------------ updates
    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``.  No-op when the
        latest entry already has this epoch and a start offset <= this one.
        Entries with epoch >= epoch or start offset >= start_offset are
        removed first (they were written by a deposed leader)."""
        if epoch < 0 or start_offset < 0:
            return False
        if self._entries:
            le, lo = self._entries[-1]
            if le == epoch and start_offset >= lo:
                return False
        self._entries = [(e, o) for e, o in self._entries if e < epoch and o < start_offset]
        self._entries.append((epoch, start_offset))
        if flush:
            self.flush()
        return True

    def truncate_from_end(self, end_offset: int, flush: bool = True) -> None:
        """Log truncated to ``end_offset``: drop epochs starting at or after it."""
        if self._entries and self._entries[-1][1] >= end_offset:
            self._entries = [(e, o) for e, o in self._entries if o < end_offset]
            if flush:
                self.flush()

    def truncate_from_start(self, start_offset: int, flush: bool = True) -> None:
        """Log start moved to ``start_offset``: drop earlier epochs but keep
        the one covering ``start_offset``, now starting there."""
        removed = [(e, o) for e, o in self._entries if o <= start_offset]
        if not removed:
            return
        kept = [(e, o) for e, o in self._entries if o > start_offset]
        new = [(removed[-1][0], start_offset)] + kept
        if new != self._entries:
            self._entries = new
            if flush:
                self.flush()

    def clear(self, flush: bool = True) -> None:
        self._entries = []
        if flush:
            self.flush()

    def flush(self, staged: list | None = None) -> None:
        if self.checkpoint is not None:
            self.checkpoint.write(self._entries, staged=staged)
