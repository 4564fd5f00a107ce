"""The file-descriptor budget of the segments' ``.log`` files: an LRU of open files.

Kafka keeps every segment's file open and asks the operator for a large ``ulimit -n``.
pykbroker opens a segment's ``.log`` lazily instead and keeps at most a budget of them
open at once, closing the least recently used idle one when a new one must open, so
10,000 partitions run in the default limit of 1,024 descriptors.  The budget is
process-wide because the descriptor limit is (one pool for every broker of a process).

A segment's file is an :class:`FdHandle`.  Every use of the descriptor *pins* the
handle (:meth:`FdHandle.acquire` ... :meth:`FdHandle.unpin`, or ``with handle.pinned()
as fd``): a pinned handle is never closed by the pool, so a descriptor number is never
closed and reused under a reader or writer in another thread (flushes, loading and the
cleaner run in worker threads).  A :class:`~pykbroker.storage.segment.FileRegion` only
*holds* its handle until it is sent (a Fetch of 2,000 partitions holds 2,000 files
without opening them), pins it while ``sendfile`` runs, and unpins it once sent
(``Connection._send_region``), so the open files stay within the budget plus one per
connection sending.  A segment deleted while a region of it is held is opened before
its files go (Kafka's deferred close): the region still sends the bytes it named.  The
per-batch cost is a lock and an ``OrderedDict.move_to_end``: O(1), nothing per partition.

A *released* handle (its segment closed or deleted) never opens again; it is closed
once its last pin goes away, so a deleted segment's bytes stay readable to the fetches
already holding a region of it (Kafka's deferred close).
"""
from __future__ import annotations

import contextlib
import os
import resource
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Iterable, Iterator, Optional

if TYPE_CHECKING:
    from .fs import FileSystem

__all__ = ["FdHandle", "FdPool", "POOL", "default_budget", "pin_all"]

# At most this many segment files open by default, whatever the limit: above it a
# partition that was idle pays one open() when it is next used (about 10 µs), which
# only matters when more partitions than this are all busy at once.
MAX_DEFAULT_BUDGET = 4096
# Never fewer than this, so one partition's reads across a few segments do not thrash.
MIN_BUDGET = 16


def default_budget() -> int:
    """Half the soft ``RLIMIT_NOFILE`` (the other half is for sockets, index and
    checkpoint files opened for one write, ZooKeeper, the JVM-less rest), capped at
    :data:`MAX_DEFAULT_BUDGET`."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = 1024
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 1 << 20
    return max(MIN_BUDGET, min(MAX_DEFAULT_BUDGET, soft // 2))


class FdPool:
    """The open handles, least recently used first.  Thread-safe (one lock, never held
    across an await or a blocking call other than open/close/rename)."""

    def __init__(self, budget: Optional[int] = None) -> None:
        self._budget = budget
        self._open: "OrderedDict[FdHandle, None]" = OrderedDict()
        # reentrant: a FileRegion's __del__ (unhold) may run from a garbage collection
        # triggered by an allocation inside a locked section of the same thread
        self.lock = threading.RLock()
        self.opens = 0        # files opened, for the scale checks
        self.evictions = 0    # idle files closed to stay in the budget

    @property
    def budget(self) -> int:
        if self._budget is None:
            # read the limit when first needed, so a limit set after import applies
            self._budget = default_budget()
        return self._budget

    def set_budget(self, budget: Optional[int]) -> None:
        """None: back to :func:`default_budget`.  Takes effect at the next open."""
        self._budget = None if budget is None else max(1, int(budget))

    @property
    def open_count(self) -> int:
        return len(self._open)

    def _make_room(self) -> None:
        """Close idle handles, least recently used first, until one more fits (lock held).
        Pinned handles are skipped: the budget may be exceeded while they are in use."""
        budget = self.budget
        if len(self._open) < budget:
            return
        open_ = self._open
        tries = len(open_)   # each handle looked at once at most: O(pinned) extra work
        while len(open_) >= budget and tries > 0:
            tries -= 1
            h, _ = open_.popitem(last=False)
            if h.pins or (h.released and h.holds):
                # in use right now (the most recently used), or deleted but still to be sent
                open_[h] = None
            else:
                h._close_fd()
                self.evictions += 1

    def close_idle(self) -> int:
        """Close every idle handle now (what :meth:`_make_room` does to the least recently
        used ones): each opens again on its next use.  For a process that drops storage it
        never closed -- a test suite's in-process logs abandoned after a simulated crash --
        whose files would otherwise stay open until the budget (up to 4,096) is reached.
        Returns how many were closed."""
        closed = 0
        with self.lock:
            for h in list(self._open):
                if not h.pins and not (h.released and h.holds):
                    del self._open[h]
                    h._close_fd()
                    closed += 1
        return closed


POOL = FdPool()


class FdHandle:
    """One segment file: a path, opened on demand through the pool."""
    __slots__ = ("path", "fs", "flags", "pool", "_fd", "pins", "holds", "released")

    def __init__(self, path: Optional[str], fs: FileSystem, *, flags: int = os.O_RDWR,
                 pool: FdPool = POOL, fd: int = -1) -> None:
        self.path = path
        self.fs = fs
        self.flags = flags
        self.pool = pool
        self._fd = -1
        self.pins = 0    # users of the descriptor right now: never closed under them
        self.holds = 0   # FileRegions not yet sent: the file's bytes must stay readable
        # a handle without a path can never open (the placeholder of a closed segment)
        self.released = path is None
        if fd >= 0:
            with pool.lock:
                pool._make_room()
                self._fd = fd
                pool._open[self] = None

    @property
    def fd(self) -> int:
        """The descriptor if open now (-1 if not); does not open.  Only meaningful while
        pinned: an unpinned descriptor may be closed by any other open."""
        return self._fd

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def acquire(self) -> int:
        """Open if needed, pin, and return the descriptor (-1 once released and closed;
        pinned all the same).  Every acquire is paired with one :meth:`unpin`."""
        pool = self.pool
        with pool.lock:
            if self._fd < 0:
                if self.released:
                    self.pins += 1   # balanced by unpin() like any other pin
                    return -1
                pool._make_room()
                assert self.path is not None   # a handle made from an fd has no path and stays open
                self._fd = self.fs.open(self.path, self.flags)
                pool.opens += 1
                pool._open[self] = None
            else:
                pool._open.move_to_end(self)
            self.pins += 1
            return self._fd

    def unpin(self) -> None:
        with self.pool.lock:
            self.pins -= 1
            if self.released:   # (every append unpins: the call only when it can close)
                self._close_if_done()

    def _close_if_done(self) -> None:
        """Under the pool's lock: a released file no longer pinned nor held closes now."""
        if self.pins == 0 and self.holds == 0 and self.released and self._fd >= 0:
            self.pool._open.pop(self, None)
            self._close_fd()

    def hold(self) -> None:
        """Keep the file's bytes readable (a FileRegion waiting to be sent) without keeping
        it open: the pool may close an idle held file, which opens again by path when the
        region is sent; only a release (deletion) while held opens it and keeps it open."""
        with self.pool.lock:
            self.holds += 1

    def unhold(self) -> None:
        with self.pool.lock:
            self.holds -= 1
            self._close_if_done()

    @contextlib.contextmanager
    def pinned(self) -> Iterator[int]:
        fd = self.acquire()
        try:
            yield fd
        finally:
            self.unpin()

    def release(self) -> None:
        """Never open again; close now, or when the last pin goes away."""
        pool = self.pool
        with pool.lock:
            if self.released:
                return
            self.released = True
            if self.pins == 0 and self.holds == 0:
                if self._fd >= 0:
                    pool._open.pop(self, None)
                    self._close_fd()
            elif self._fd < 0 and self.path is not None:
                # held but closed: open now, before the caller deletes the file, so that
                # the regions still to be sent read its bytes (over the budget, briefly)
                try:
                    self._fd = self.fs.open(self.path, self.flags)
                    pool.opens += 1
                    pool._open[self] = None
                except OSError:
                    pass

    def close(self) -> None:
        """Close now whatever the pins (a crash: ``kill -9`` releases every file)."""
        pool = self.pool
        with pool.lock:
            self.released = True
            pool._open.pop(self, None)
            self._close_fd()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                self.fs.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        # the pool holds open handles, so an open one is only collected at interpreter exit
        try:
            self._close_fd()
        except Exception:
            pass


@contextlib.contextmanager
def pin_all(handles: Iterable[FdHandle]) -> Iterator[None]:
    """Keep every handle open (and its file readable after a deletion) for a while."""
    done = []
    try:
        for h in handles:
            h.acquire()
            done.append(h)
        yield
    finally:
        for h in done:
            h.unpin()
