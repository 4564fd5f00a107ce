"""The broker's clock: one object that says what time it is, so a test can move time.

Two readings, as Kafka's ``Time`` has (``milliseconds()`` and ``nanoseconds()``):

- :meth:`BrokerClock.time_ms`, wall-clock milliseconds: retention by time, segment.ms, offsets
  retention, commit and LogAppendTime timestamps, producer-id expiry, the cleaner's delete horizon.
- :meth:`BrokerClock.current_time`, monotonic seconds: the clock of the broker's trio run.  The
  broker's loop is started with ``trio.run(..., clock=clock)``, so every trio deadline (session
  timeouts and rebalance delays of the group coordinator's timer, Fetch ``max_wait_ms``, Produce
  ``timeout_ms``, the retention / checkpoint / offsets-expiry loops' sleeps) runs on it too.

By default it is real time.  :meth:`advance` moves both readings forward at once; :meth:`freeze`
stops both (time then moves only by :meth:`advance`), :meth:`unfreeze` lets them run again from
where they are.  Time never goes back.  ``advance`` is called from any thread (a test thread, the
HTTP control endpoint); it wakes the broker's loop (``wake``, set by whoever runs the loop) so the
deadlines that passed fire at once rather than at the next I/O event.

The clock is handed to the broker explicitly (``BrokerServer(config, clock=...)``), and from it to the
components that read the time; nothing patches ``time`` globally, so two brokers in one process
have two clocks.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Callable, Optional

import trio


class BrokerClock(trio.abc.Clock):
    """Real time plus an offset that only grows; optionally frozen.  Also a ``trio.abc.Clock``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()    # advance/freeze from other threads; reads are lock-free
        self._offset = 0.0               # seconds added to both readings by advance()
        self._frozen: Optional[tuple[float, float]] = None   # (monotonic, wall) while frozen
        self.wake: Optional[Callable[[], None]] = None       # wakes the broker's loop (any thread)

    # -- readings ------------------------------------------------------------------------------
    def current_time(self) -> float:
        """Monotonic seconds (trio's clock interface)."""
        f = self._frozen
        if f is not None:
            return f[0]
        return time.perf_counter() + self._offset

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        f = self._frozen
        if f is not None:
            return f[1]
        return time.time() + self._offset

    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (Kafka's ``time.milliseconds()``): ``time()``
        in ms, read here without calling it (every Produce reads it)."""
        f = self._frozen
        if f is not None:
            return int(f[1] * 1000)
        return int((time.time() + self._offset) * 1000)

    @property
    def offset(self) -> float:
        """Seconds added to real time by :meth:`advance` (less the time spent frozen)."""
        return self._offset

    @property
    def frozen(self) -> bool:
        return self._frozen is not None

    # -- trio.abc.Clock ------------------------------------------------------------------------
    def start_clock(self) -> None:
        pass

    def deadline_to_sleep_time(self, deadline: float) -> float:
        f = self._frozen
        now = self.current_time()
        if deadline <= now:
            return 0.0
        # frozen: nothing expires until advance() (which wakes the loop)
        return math.inf if f is not None else deadline - now

    # -- control -------------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (>= 0): timers whose deadline passes fire now."""
        seconds = float(seconds)
        if not seconds >= 0:
            raise ValueError("a clock only moves forward (seconds=%r)" % seconds)
        with self._lock:
            self._offset += seconds
            f = self._frozen
            if f is not None:
                self._frozen = (f[0] + seconds, f[1] + seconds)
        self._wake()

    def freeze(self) -> None:
        """Stop time: from now on it moves only by :meth:`advance`."""
        with self._lock:
            if self._frozen is None:
                self._frozen = (self.current_time(), self.time())
        self._wake()

    def unfreeze(self) -> None:
        """Let time run again, from the frozen instant (it does not jump to real time)."""
        with self._lock:
            f = self._frozen
            if f is not None:
                # current_time() = perf_counter() + offset must continue from f[0]; the wall
                # reading keeps the same offset (the two offsets differ by at most the freeze's
                # length, which a single offset cannot express: the monotonic one wins)
                self._offset = f[0] - time.perf_counter()
                self._frozen = None
        self._wake()

    def state(self) -> dict:
        """For the HTTP control endpoint and reprs."""
        return {"time_ms": self.time_ms(), "offset_ms": int(self._offset * 1000), "frozen": self.frozen}

    def _wake(self) -> None:
        w = self.wake
        if w is not None:
            try:
                w()
            except Exception:   # the loop has ended (trio.RunFinishedError): nothing to wake
                pass

    def __repr__(self) -> str:
        return "BrokerClock(offset=%.3fs%s)" % (self._offset, ", frozen" if self.frozen else "")
