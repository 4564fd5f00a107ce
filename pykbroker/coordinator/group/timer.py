"""Deadlines on trio's clock for the group coordinator (session, rebalance, sync, expiry timers).

One background task owns the heap; callers schedule plain (synchronous) callbacks by key, and a
key rescheduled or cancelled simply makes older heap entries stale.  Callbacks run on the loop
between awaits, so they may mutate coordinator state directly (the coordinator is the single
owner of its groups).  Because deadlines are ``trio.current_time()`` values, tests drive every
timeout with ``trio.testing.MockClock``.
"""
from __future__ import annotations

import heapq
import itertools
import logging
from typing import Callable, Hashable

import trio

log = logging.getLogger("pykbroker.group.timer")


class Timer:
    def __init__(self) -> None:
        self._heap: list = []
        self._live: dict[Hashable, int] = {}  # key -> sequence number of its live entry
        self._seq = itertools.count()
        self._wake = trio.Event()

    def schedule(self, key: Hashable, delay_s: float, fn: Callable[[], None]) -> None:
        """(Re)arm ``key`` to call ``fn`` after ``delay_s`` seconds (replaces a pending one)."""
        seq = next(self._seq)
        deadline = trio.current_time() + max(0.0, delay_s)
        self._live[key] = seq
        heapq.heappush(self._heap, (deadline, seq, key, fn))
        if self._heap[0][1] == seq:
            self._wake.set()

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def pending(self, key: Hashable) -> bool:
        return key in self._live

    async def run(self) -> None:
        while True:
            now = trio.current_time()
            while self._heap and (self._heap[0][0] <= now or self._live.get(self._heap[0][2]) != self._heap[0][1]):
                deadline, seq, key, fn = heapq.heappop(self._heap)
                if self._live.get(key) != seq:
                    continue  # cancelled or rescheduled
                del self._live[key]
                try:
                    fn()
                except Exception:
                    log.exception("group timer %r failed", key)
            self._wake = trio.Event()
            if self._heap:
                with trio.move_on_at(self._heap[0][0]):
                    await self._wake.wait()
            else:
                await self._wake.wait()
