"""One share partition: the delivery state of one topic partition for one share group (KIP-932).

Sans-IO: the owner (:class:`~.manager.SharePartitionManager`) hands it batch headers read from the
log and the time; it never reads the log or sleeps itself.

Vocabulary (Kafka's SharePartition):
- **SPSO** (share-partition start offset): every offset below it is done (acknowledged or
  archived).  **SPEO** (end offset, ``next_offset`` here): the first offset never acquired.
  Offsets in [SPSO, SPEO) are *in flight*: kept as ranges, normally one per batch, split only where
  an acknowledgement or a record limit cuts a batch.
- a range is AVAILABLE (may be acquired again), ACQUIRED (locked by one member until its
  acquisition lock expires after ``group.share.record.lock.duration.ms``), ACKNOWLEDGED or
  ARCHIVED (rejected, a gap, or delivered ``group.share.delivery.count.limit`` times).
- acquisition is per batch (the hot path): new data from the SPEO is acquired batch by batch with
  delivery count 1; AVAILABLE ranges below it are acquired again with their count + 1.  At most
  ``group.share.partition.max.record.locks`` offsets are in flight (Kafka's limit on acquired
  records).  A control batch (transaction marker) is archived, never delivered.
- acknowledgement types (ShareFetch / ShareAcknowledge): 0 gap and 3 reject archive, 1 accept
  acknowledges, 2 release makes the records AVAILABLE again (ARCHIVED once the delivery count
  reached the limit), 4 renew extends the lock (KIP-1222, v2).  Only records ACQUIRED by the
  acknowledging member may be acknowledged, else INVALID_RECORD_STATE.
- a lock that expires, or a share session that closes, releases the member's records like a
  release acknowledgement; the SPSO then moves over the finished prefix.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Sequence

if TYPE_CHECKING:   # annotations only (sans-IO: the headers are handed in)
    from ..protocol.records import BatchHeader

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "AVAILABLE", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVED"
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

# RecordBatch attributes bit 5: control batch (commit/abort marker)
_CONTROL = 0x20


class InvalidRecordState(Exception):
    pass


class Range:
    __slots__ = ("first", "last", "state", "count", "member", "deadline")

    def __init__(self, first: int, last: int, state: str, count: int = 0, member: Optional[str] = None,
                 deadline: float = 0.0) -> None:
        self.first, self.last, self.state, self.count = first, last, state, count
        self.member, self.deadline = member, deadline

    def copy(self, first: int, last: int) -> "Range":
        return Range(first, last, self.state, self.count, self.member, self.deadline)

    def __repr__(self) -> str:
        return "Range(%d-%d %s n=%d %s)" % (self.first, self.last, self.state, self.count, self.member)


class SharePartition:
    def __init__(self, start_offset: int, lock_ms: int, delivery_limit: int, max_in_flight: int) -> None:
        self.start_offset = start_offset      # SPSO
        self.next_offset = start_offset       # SPEO: first offset never acquired
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self.ranges: list[Range] = []          # sorted, contiguous within [SPSO, SPEO)
        self._firsts: list[int] = []
        self.state_epoch = 0
        self.dirty = False                     # changed since the last persisted write

    # -- structure ---------------------------------------------------------------------------
    def _reindex(self) -> None:
        self._firsts = [r.first for r in self.ranges]

    def _split_at(self, offset: int) -> None:
        """Make ``offset`` the first offset of a range (if it lies inside one)."""
        i = bisect_right(self._firsts, offset) - 1
        if i < 0:
            return
        r = self.ranges[i]
        if r.first < offset <= r.last:
            tail = r.copy(offset, r.last)
            r.last = offset - 1
            self.ranges.insert(i + 1, tail)
            self._firsts.insert(i + 1, offset)

    def _slice(self, first: int, last: int) -> list[Range]:
        """The ranges exactly covering [first, last] ∩ in flight (split as needed)."""
        self._split_at(first)
        self._split_at(last + 1)
        lo = bisect_right(self._firsts, first) - 1
        lo = max(lo, 0)
        out = []
        for r in self.ranges[lo:]:
            if r.first > last:
                break
            if r.last >= first:
                out.append(r)
        return out

    def _merge_and_advance(self) -> None:
        """Drop the finished prefix (SPSO moves) and merge neighbours in the same state."""
        rs = self.ranges
        i = 0
        while i < len(rs) and rs[i].state in (ACKNOWLEDGED, ARCHIVED):
            i += 1
        if i:
            self.start_offset = rs[i - 1].last + 1
            del rs[:i]
            self.dirty = True
        if not rs:
            self.start_offset = max(self.start_offset, self.next_offset)
        merged: list[Range] = []
        for r in rs:
            p = merged[-1] if merged else None
            if (p is not None and p.state == r.state and p.state in (ACKNOWLEDGED, ARCHIVED)
                    and p.last + 1 == r.first):
                p.last = r.last
            else:
                merged.append(r)
        self.ranges = merged
        self._reindex()

    def in_flight(self) -> int:
        return self.next_offset - self.start_offset

    # -- time ----------------------------------------------------------------------------------
    def _released_state(self, r: Range) -> str:
        return ARCHIVED if r.count >= self.delivery_limit else AVAILABLE

    def _release_acquired(self, which: Callable[[Range], bool]) -> bool:
        """The acquired ranges ``which(range)`` picks go back (available, or archived at the
        delivery limit).  -> anything changed."""
        changed = False
        for r in self.ranges:
            if r.state == ACQUIRED and which(r):
                r.state, r.member = self._released_state(r), None
                changed = True
        if changed:
            self.dirty = True
            self._merge_and_advance()
        return changed

    def expire_locks(self, now: float) -> bool:
        """Acquisition locks past their deadline release their records.  -> anything changed."""
        return self._release_acquired(lambda r: r.deadline <= now)

    def next_deadline(self) -> float | None:
        ds = [r.deadline for r in self.ranges if r.state == ACQUIRED]
        return min(ds) if ds else None

    def has_available(self, high_watermark: int) -> bool:
        return any(r.state == AVAILABLE for r in self.ranges) or (
            self.next_offset < high_watermark and self.in_flight() < self.max_in_flight)

    def fetch_offset(self) -> int:
        """Where a read for this partition starts: the first AVAILABLE offset, else the SPEO."""
        for r in self.ranges:
            if r.state == AVAILABLE:
                return r.first
        return self.next_offset

    # -- acquisition -------------------------------------------------------------------------
    def acquire(self, member: str, headers: Sequence[BatchHeader], now: float, max_records: int,
                strict: bool) -> tuple[list, list]:
        """Acquire for ``member`` what is acquirable in ``headers`` (the batches read from the
        log, in offset order).  -> (acquired [(first, last, delivery count)], indexes of the
        headers that hold acquired records).  ``max_records`` bounds the records acquired; by
        batch unless ``strict`` (ShareAcquireMode record-limit)."""
        acquired: list = []
        used: list = []
        n = 0
        deadline = now + self.lock_ms / 1000.0
        for i, h in enumerate(headers):
            if n >= max_records:
                break
            first, last = h.base_offset, h.base_offset + h.last_offset_delta
            if last < self.start_offset:
                continue
            first = max(first, self.start_offset)
            control = bool(h.attributes & _CONTROL)
            got = False
            # records already in flight: AVAILABLE ones are delivered again
            if first < self.next_offset:
                for r in self._slice(first, min(last, self.next_offset - 1)):
                    if r.state != AVAILABLE:
                        continue
                    if control:
                        r.state = ARCHIVED
                        continue
                    if strict and n + (r.last - r.first + 1) > max_records:
                        self._split_at(r.first + (max_records - n))
                    if n >= max_records:
                        break
                    r.state, r.member, r.deadline = ACQUIRED, member, deadline
                    r.count += 1
                    n += r.last - r.first + 1
                    acquired.append((r.first, r.last, r.count))
                    got = True
            # new records past the SPEO
            if last >= self.next_offset and n < max_records:
                start = max(first, self.next_offset)
                if control:
                    self._append(Range(start, last, ARCHIVED))
                elif self.in_flight() < self.max_in_flight:
                    end = last
                    if strict and end - start + 1 > max_records - n:
                        end = start + (max_records - n) - 1
                    self._append(Range(start, end, ACQUIRED, 1, member, deadline))
                    n += end - start + 1
                    acquired.append((start, end, 1))
                    got = True
                else:
                    break
            if got:
                used.append(i)
        if acquired:
            self.dirty = True
        self._merge_and_advance()
        # adjacent acquired pieces of one delivery count are reported as one range
        out: list = []
        for a in sorted(acquired):
            if out and out[-1][1] + 1 == a[0] and out[-1][2] == a[2]:
                out[-1] = (out[-1][0], a[1], a[2])
            else:
                out.append(a)
        return out, used

    def _append(self, r: Range) -> None:
        self.ranges.append(r)
        self._firsts.append(r.first)
        self.next_offset = r.last + 1

    # -- acknowledgement -----------------------------------------------------------------------
    def acknowledge(self, member: str, batches: Iterable[tuple], now: float) -> None:
        """``batches``: [(first, last, [types])]; one type applies to the whole range, else one
        per offset.  All or nothing: raises InvalidRecordState before changing anything when
        any offset is not ACQUIRED by ``member`` (or a type is unknown)."""
        plan = []
        for first, last, types in batches:
            if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
                raise InvalidRecordState("Invalid acknowledgement batch %d-%d" % (first, last))
            if any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in types):
                raise InvalidRecordState("Invalid acknowledge type")
            if first < self.start_offset or last >= self.next_offset:
                raise InvalidRecordState("The records %d-%d are not acquired" % (first, last))
            for r in self._slice(first, last):
                if r.state != ACQUIRED or r.member != member:
                    raise InvalidRecordState("The record state is invalid. The acknowledgement of delivery could not be completed.")
            plan.append((first, last, types))
        for first, last, types in plan:
            if len(types) == 1:
                for r in self._slice(first, last):
                    self._apply(r, types[0], now)
            else:
                for k, t in enumerate(types):
                    for r in self._slice(first + k, first + k):
                        self._apply(r, t, now)
        self.dirty = True
        self._merge_and_advance()

    def _apply(self, r: Range, t: int, now: float) -> None:
        if t == ACCEPT:
            r.state, r.member = ACKNOWLEDGED, None
        elif t in (REJECT, GAP):
            r.state, r.member = ARCHIVED, None
        elif t == RELEASE:
            r.state, r.member = self._released_state(r), None
        elif t == RENEW:
            r.deadline = now + self.lock_ms / 1000.0

    def release_member(self, member: str) -> bool:
        """The member's share session closed: its acquired records go back (Kafka's
        releaseAcquiredRecords)."""
        return self._release_acquired(lambda r: r.member == member)

    def reset(self, start_offset: int) -> None:
        """AlterShareGroupOffsets / initialization: a new SPSO, nothing in flight."""
        self.start_offset = self.next_offset = start_offset
        self.ranges = []
        self._firsts = []
        self.state_epoch += 1
        self.dirty = True

    def lag_start(self) -> int:
        return self.start_offset
