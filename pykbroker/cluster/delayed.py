"""The waits of produce and fetch (Kafka's DelayedProduce and DelayedFetch), used by the
``ReplicaManager`` (cluster/replica_manager.py) only.

- :func:`delayed_produce`: acks=-1 answers once the high watermark covers each appended batch,
  within the request's ``timeout_ms`` (REQUEST_TIMED_OUT after it).  A partition's own
  ``wait_for_high_watermark`` gives NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below
  ``min.insync.replicas`` before the HW got there) or NOT_LEADER_OR_FOLLOWER (leadership lost
  meanwhile).  One deadline for the whole request, as Kafka's one DelayedProduce per request.
- :func:`delayed_fetch`: a sessionless or full fetch that found fewer than ``min_bytes`` parks
  on the partitions it read (``Partition.data_waiters``: appends, high watermark moves,
  leadership changes and deletion wake it) and reads again after each wake-up, until enough
  bytes, an error, or ``max_wait_ms``.
- :func:`delayed_session_fetch`: the same wait for an incremental fetch, parked on its fetch
  session (cluster/fetch_session.py: a partition's waker marks it dirty and wakes the session's
  waiters), reading only the partitions that changed.

- :class:`Waiters`: the waiters of one thing (a partition's new data, a share group's records
  available again), woken all at once.

Nothing here holds state between requests: each wait lives in the request's task, and trio's
cancel scopes are the timers (Kafka's purgatory and its timing wheel).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Protocol, TypeVar

import trio

from ..protocol.errors import ErrorCode

if TYPE_CHECKING:
    from .fetch_session import FetchSession

R = TypeVar("R")   # what one read of a fetch returns


async def delayed_produce(waits: list, timeout_ms: int) -> list:
    """``waits``: [(partition, offset the HW must reach)] of an acks=-1 request, in request
    order.  Returns the error code of each (0: acknowledged)."""
    deadline = trio.current_time() + max(timeout_ms, 0) / 1000.0
    codes = []
    for partition, hw in waits:
        code = ErrorCode.REQUEST_TIMED_OUT
        with trio.move_on_at(deadline):
            code = await partition.wait_for_high_watermark(hw)
        codes.append(int(code))
    return codes


async def delayed_fetch(read: Callable[[Optional[set]], R], first: R, targets: set, max_wait_ms: int,
                        done: Callable[[R], bool]) -> R:
    """Park on ``targets`` (the partitions the ``first`` read found) and ``read(targets)`` again
    on every wake-up until ``done(result)`` or ``max_wait_ms``; returns the last result.
    ``read`` refills the set it is given with the partitions to park on next."""
    result = first
    deadline = trio.current_time() + max_wait_ms / 1000.0
    with trio.move_on_at(deadline) as scope:
        while True:
            wake = trio.Event()
            for part in targets:
                part.data_waiters.add(wake)
            try:
                await wake.wait()
            finally:
                for part in targets:
                    part.data_waiters.discard(wake)
            targets = set()
            result = read(targets)
            if done(result):
                break
    if scope.cancelled_caught and wake.is_set():
        # Timed out after a wake-up that was not read yet: answer with whatever is there now
        # (like Kafka's DelayedFetch.onComplete).  Without a wake-up since the last read nothing
        # it depends on changed, so that answer stands: an idle long poll costs one pass, not two.
        result = read(None)
    return result


class _Wakeable(Protocol):
    def set(self) -> None: ...


class Waiters(set[_Wakeable]):
    """Who waits for one thing to happen (data appended to a partition, records a share group may
    acquire again): each waiter adds its event (a ``trio.Event`` or anything with ``set()``) and
    discards it when its wait ends; ``wake()`` sets them all and leaves them registered."""

    def wake(self) -> None:
        for ev in self:
            ev.set()


async def wait_woken(waiters: set) -> None:
    """Wait until someone sets the events of ``waiters`` (a wake-up of everyone waiting on one
    thing: the HW moving, a session's partitions changing); the event registered for the wait
    leaves the set however the wait ends."""
    ev = trio.Event()
    waiters.add(ev)
    try:
        await ev.wait()
    finally:
        waiters.discard(ev)


async def delayed_session_fetch(session: FetchSession, read_dirty: Callable[[set], bool], max_wait_ms: int,
                                still_cached: Callable[[], bool]) -> None:
    """Wait on ``session`` until ``read_dirty(keys)`` (given the partitions marked dirty since
    the last read) says the request can be answered, ``max_wait_ms`` passes, or the session
    leaves the cache (evicted or closed meanwhile: stop waiting)."""
    with trio.move_on_after(max_wait_ms / 1000.0):
        while still_cached():
            if not session.dirty:
                await wait_woken(session.events)
            dirty, session.dirty = session.dirty, set()
            if read_dirty(dirty):
                return
