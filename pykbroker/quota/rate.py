"""Kafka's sampled rate and throttle time (sans-IO; times in ms handed in).

``Rate`` is Kafka's ``Rate`` over a ``WindowedSum`` (clients/.../metrics/stats/Rate.java,
SampledStat.java) with ``MetricConfig.samples = quota.window.num`` (11) and ``timeWindowMs =
quota.window.size.seconds`` x 1000 (1000):
- a value is added to the current sample; a sample older than one window starts a new one
  (``samples + 1`` are kept, the oldest recycled);
- samples without an event for ``samples x window`` are reset before measuring;
- the rate is the sum of the samples over the elapsed time since the oldest sample started,
  counted as at least ``samples - 1`` whole windows (so a first burst is measured over 10 s, not
  over the few ms since it began: Kafka's "assume prior windows with zero records"), and at
  least 1 ms.

tests/quotas/test_rate_oracle.py compares every step with the answers of Kafka 4.4's own classes
(compat/kafka/quota/rate_oracle.py).

``throttle_ms`` is Kafka's QuotaUtils.throttleTime: (observed - bound) / bound x that window,
rounded: the delay after which the average over the window is back at the bound if nothing more
is recorded.
"""
from __future__ import annotations


class Rate:
    __slots__ = ("samples", "window_ms", "_starts", "_lasts", "_values", "_current")

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._starts: list = []
        self._lasts: list = []
        self._values: list = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._starts:
            self._new(now_ms)
        i = self._current
        if now_ms - self._starts[i] >= self.window_ms:
            i = self._current = (i + 1) % (self.samples + 1)
            if i >= len(self._starts):
                self._new(now_ms)
            else:
                self._starts[i] = self._lasts[i] = now_ms
                self._values[i] = 0.0
        self._values[i] += value
        self._lasts[i] = now_ms

    def _new(self, now_ms: int) -> None:
        self._starts.append(now_ms)
        self._lasts.append(now_ms)
        self._values.append(0.0)

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, last in enumerate(self._lasts):
            if now_ms - last >= expire:
                self._starts[i] = self._lasts[i] = now_ms
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        if not self._starts:
            self._new(now_ms)
        elapsed = now_ms - min(self._starts)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        # at least 1 ms, as Kafka: with quota.window.num=1 a first event is measured over 1 ms
        # (a rate over an empty window is undefined), not over nothing
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        window = self.window_size_ms(now_ms)   # first: it drops the expired samples from the sum
        return sum(self._values) / (window / 1000.0)

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """0 within ``bound``, else Kafka's throttle time for the observed rate."""
        observed = self.measure(now_ms)
        if observed <= bound:
            return 0
        # Java's Math.round (half up), not Python's half-to-even
        return int((observed - bound) / bound * self.window_size_ms(now_ms) + 0.5)


class TokenBucket:
    """Kafka's TokenBucket stat (KIP-599, the controller mutation quota): ``bound`` tokens a
    second refill a bucket of ``samples x window`` seconds' worth (the burst); a value takes
    its tokens, and the bucket may go negative.  It starts full."""
    __slots__ = ("burst_seconds", "tokens", "last_ms")

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.burst_seconds = samples * window_ms / 1000.0
        self.tokens: float | None = None   # full at the first use
        self.last_ms = 0

    def _refill(self, bound: float, now_ms: int) -> float:
        burst = self.burst_seconds * bound
        if self.tokens is None:
            tokens = burst
        else:
            tokens = min(burst, self.tokens + bound * (now_ms - self.last_ms) / 1000.0)
        self.tokens = tokens
        self.last_ms = now_ms
        return tokens

    def measure(self, bound: float, now_ms: int) -> float:
        return self._refill(bound, now_ms)

    def record(self, value: float, bound: float, now_ms: int) -> float:
        """Take ``value`` tokens; the tokens left (negative: owed)."""
        tokens = min(self.burst_seconds * bound, self._refill(bound, now_ms) - value)
        self.tokens = tokens
        return tokens

    @staticmethod
    def throttle_ms(tokens: float, bound: float) -> int:
        """Kafka's ControllerMutationQuotaManager.throttleTimeMs: the time to refill to 0."""
        return int(-tokens / bound * 1000 + 0.5) if tokens < 0 else 0
