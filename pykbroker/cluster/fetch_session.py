"""Incremental fetch sessions (KIP-227): the broker's session cache, for every fetcher.

Why: a fetcher of N partitions (a consumer, a follower) would otherwise name all N in every
Fetch, and the broker would read, park on and answer all N each time, even when nothing happens.
With a session the fetcher names only partitions whose fetch position changed, and the broker
answers only partitions with something new.

Kafka's rules (FetchMetadata, FetchManager / FetchSessionCacheShard / FetchContext in Kafka 4.x):
- ``session_id`` 0 and epoch 0: a full fetch that asks for a session; the answer carries its id
  (0 when the cache has no room for it) and lists every partition.  Epoch -1: a full fetch
  without a session.  A full fetch naming a session id closes that session first.
- ``session_id`` S with epoch E > 0: incremental.  Unknown S -> FETCH_SESSION_ID_NOT_FOUND; E not
  the session's next epoch -> INVALID_FETCH_SESSION_EPOCH; a session created with topic ids (v13+)
  used by a request without them or the other way round -> FETCH_SESSION_TOPIC_ID_ERROR.  These
  answers have session id 0 and no partition.  Named partitions are added or updated, then
  ``forgotten_topics_data`` removed; a session left empty is closed and the request is answered
  as a sessionless one (session id 0).  The session id is not tied to the fetcher that made it.
- An incremental answer lists a partition only if it has records, an error, a diverging epoch,
  or a high watermark / log start offset different from what this session last said (an error
  resets the remembered high watermark to -1 so the partition is listed again once it heals).
  Partitions that returned records move to the end of the session's order (fairness under the
  response's byte limit).
- The cache (``max.incremental.fetch.session.cache.slots``, default 1000) is split into 8
  shards of slots/8 sessions each (Kafka's NumFetchSessionCacheShards; with fewer than 8 slots no
  session is ever created, as in Kafka); new sessions go round robin, a session id encodes its
  shard.  A shard that is full may evict, for a new session A, an existing session B when: B
  was last used more than 120 s ago (the least recently used one goes first); else the first of
  B ordered by (privileged, partitions, id) when A is privileged (a follower's) and B is not, or
  B is privileged but older than 120 s; or when A has more partitions than B and B is older
  than 120 s (``EVICTION_MS``, Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS).  Which
  sessions are evictable, and with what size, is decided when a session is used (touched),
  as in Kafka.

What pykbroker reads per incremental request (the O(touched) rule; Kafka itself re-reads every
partition of the session on every request): the partitions the request names, the session's
*dirty* partitions (each partition of a session holds a waker that marks it dirty when data is
appended, the high watermark moves, or leadership changes there; the same wake-up serves the
long poll), the partitions that still have data to give (a partial answer), the ones whose last
answer was an error (Kafka lists errors in every answer), and every ``FULL_SWEEP_S`` all of them
(what no wake-up reports: a log start moved by retention, a partition object replaced).  The
answer is the same as Kafka's.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Optional

import trio

if TYPE_CHECKING:
    from .partition import ReadResult

# Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (a constant, not a config): a session unused
# for longer is evictable by anyone; a younger one only by the rules in the docstring.
EVICTION_MS = 120_000
# Kafka's NumFetchSessionCacheShards.
NUM_SHARDS = 8
INT32_MAX = (1 << 31) - 1
# How often a session re-reads all its partitions (what no wake-up reports, see the docstring).
FULL_SWEEP_S = 10.0


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: epochs run 1..INT32_MAX, then wrap to 1."""
    if epoch < 0:
        return 0          # FINAL_EPOCH -> INITIAL_EPOCH (unused for open sessions)
    return 1 if epoch == INT32_MAX else epoch + 1


class CachedPartition:
    """What a session knows of one partition: the fetcher's last request fields, what this broker
    last answered (high watermark, log start offset; -1 before the first answer or after an
    error), its place in the session's order, and the waker on the partition object."""
    __slots__ = ("key", "topic", "topic_id", "partition", "fields", "hw", "log_start", "seq",
                 "part", "waker")

    def __init__(self, key: tuple, topic: Optional[str], topic_id: bytes, partition: int, fields: dict,
                 seq: int) -> None:
        self.key = key
        self.topic = topic              # None: a topic id this broker does not know (yet)
        self.topic_id = topic_id
        self.partition = partition
        self.fields = fields
        self.hw = -1
        self.log_start = -1
        self.seq = seq
        self.part = None        # the Partition object the waker is registered on
        self.waker: Optional[_Waker] = None

    def must_list(self, d: ReadResult) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: whether an incremental answer lists
        the partition, given its read ``d`` (partition.ReadResult); remembers
        what it was told."""
        if d.error:
            self.hw = -1     # listed again once the error goes away
            return True
        must = len(d.records) > 0
        if d.high_watermark != self.hw:
            self.hw = d.high_watermark
            must = True
        if d.log_start_offset != self.log_start:
            self.log_start = d.log_start_offset
            must = True
        div = d.diverging_epoch
        if div is not None and (div["epoch"] != -1 or div["end_offset"] != -1):
            must = True
        return must


class _Waker:
    """Registered in ``Partition.data_waiters``: its ``set()`` marks the partition dirty."""
    __slots__ = ("session", "key")

    def __init__(self, session: "FetchSession", key: tuple) -> None:
        self.session = session
        self.key = key

    def set(self) -> None:
        s = self.session
        s.dirty.add(self.key)
        for ev in s.events:
            ev.set()


class FetchSession:
    def __init__(self, session_id: int, privileged: bool, uses_topic_ids: bool, now_ms: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = 1                 # the epoch of the next incremental request
        # key -> CachedPartition; key = (topic id, partition) with topic ids, else (name, partition)
        self.partitions: dict = {}
        self.dirty: set = set()
        self.lagging: set = set()      # had more to give after the last answer
        self.errored: set = set()      # the last answer was an error
        self.named: set = set()        # named by the request being served
        # a follower's session: the partitions whose ISR does not hold it yet, read at every
        # fetch (so the leader asks for the expansion again after a refusal, as Kafka, which
        # reads every session partition of a follower's fetch), not only at the next sweep
        self.out_of_isr: set = set()
        # the long polls parked on this session (one, unless a client sends a request again
        # before the answer to the previous one: Kafka then answers the older one with
        # INVALID_FETCH_SESSION_EPOCH)
        self.events: set = set()
        self.last_sweep = now_ms / 1000.0   # (trio.current_time() seconds, see FetchSessionCache.now_ms)
        self._seq = 0
        # the cache's view, set by touch (Kafka's cachedSize and evictable-tree membership)
        self.cached_size = -1
        self.evictable_by_privileged = False
        self.evictable_by_all = False

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def add(self, key: tuple, topic: Optional[str], topic_id: bytes, partition: int, fields: dict) -> CachedPartition:
        cp = self.partitions[key] = CachedPartition(key, topic, topic_id, partition, fields, self.next_seq())
        return cp

    def forget(self, key: tuple) -> bool:
        cp = self.partitions.pop(key, None)
        if cp is None:
            return False
        self.detach(cp)
        self.dirty.discard(key)
        self.lagging.discard(key)
        self.errored.discard(key)
        self.out_of_isr.discard(key)
        return True

    def attach(self, rm: Any, cp: CachedPartition) -> None:
        """(Re-)register this session's waker on the partition object ``rm`` has now."""
        part = rm.get_partition(cp.topic, cp.partition) if cp.topic is not None else None
        if part is cp.part:
            return
        self.detach(cp)
        if part is not None and hasattr(part, "data_waiters"):
            cp.waker = _Waker(self, cp.key)
            part.data_waiters.add(cp.waker)
            cp.part = part

    @staticmethod
    def detach(cp: CachedPartition) -> None:
        if cp.part is not None:
            cp.part.data_waiters.discard(cp.waker)
        cp.part = cp.waker = None

    def close(self) -> None:
        for cp in self.partitions.values():
            self.detach(cp)
        self.partitions.clear()
        self.dirty.clear()
        self.lagging.clear()
        self.errored.clear()
        for ev in self.events:
            ev.set()


class FetchSessionCacheShard:
    """One of Kafka's FetchSessionCacheShards (rules in the module docstring).  Lookups are O(1);
    only creating a session in a full shard scans the shard (slots/8 sessions)."""

    def __init__(self, max_entries: int, eviction_ms: int, id_range: int, shard_num: int, stats: dict) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.id_range = id_range
        self.shard_num = shard_num
        self.sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0
        self.stats = stats

    def _new_id(self) -> int:
        lo = max(1, self.shard_num * self.id_range)
        hi = (self.shard_num + 1) * self.id_range
        while True:
            sid = random.randrange(lo, hi)
            if sid not in self.sessions:
                return sid

    def maybe_create(self, now_ms: int, privileged: bool, size: int, uses_topic_ids: bool) -> Optional[FetchSession]:
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now_ms):
            return None
        s = FetchSession(self._new_id(), privileged, uses_topic_ids, now_ms)
        self.sessions[s.id] = s
        self.stats["sessions_created"] += 1
        return s

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            self._evict(lru)
            return True
        flag = "evictable_by_privileged" if privileged else "evictable_by_all"
        candidates = [s for s in self.sessions.values() if getattr(s, flag)]
        if not candidates:
            return False
        first = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        # Kafka compares EvictableKey(privileged, size, 0) with the first evictable one
        if (privileged, size, 0) < (first.privileged, first.cached_size, first.id):
            return False
        self._evict(first)
        return True

    def _evict(self, s: FetchSession) -> None:
        self.remove(s)
        self.stats["evictions"] += 1

    def remove(self, s: FetchSession) -> bool:
        if self.sessions.pop(s.id, None) is None:
            return False
        if s.cached_size > 0:
            self.num_partitions -= s.cached_size
        s.close()
        return True

    def touch(self, s: FetchSession, now_ms: int) -> None:
        s.last_used_ms = now_ms
        if s.cached_size != -1:
            self.num_partitions -= s.cached_size
        s.cached_size = len(s.partitions)
        self.num_partitions += s.cached_size
        old = now_ms - s.creation_ms > self.eviction_ms
        s.evictable_by_privileged = (not s.privileged) or old
        s.evictable_by_all = old


class FetchSessionCache:
    """The broker's fetch sessions (owned by the ReplicaManager; touched only on the trio
    thread).  ``stats`` counts what happened (tests and introspection read it): full fetches
    that asked for a session, sessions created, incremental fetches served, evictions, session
    errors by name."""

    def __init__(self, slots: int = 1000, eviction_ms: int = EVICTION_MS) -> None:
        self.stats = {"full_fetches": 0, "sessionless_fetches": 0, "sessions_created": 0,
                      "incremental_fetches": 0, "evictions": 0, "session_errors": 0}
        id_range = INT32_MAX // NUM_SHARDS
        self.shards = [FetchSessionCacheShard(max(slots, 0) // NUM_SHARDS, eviction_ms, id_range, n, self.stats)
                       for n in range(NUM_SHARDS)]
        self._id_range = id_range
        self._counter = 0

    @staticmethod
    def now_ms() -> int:
        return int(trio.current_time() * 1000)

    def _shard_of(self, session_id: int) -> Optional[FetchSessionCacheShard]:
        n = session_id // self._id_range
        return self.shards[n] if 0 <= n < len(self.shards) else None

    def get(self, session_id: int) -> Optional[FetchSession]:
        shard = self._shard_of(session_id)
        return shard.sessions.get(session_id) if shard is not None else None

    def remove(self, session_id: int) -> bool:
        shard = self._shard_of(session_id)
        if shard is None:
            return False
        s = shard.sessions.get(session_id)
        return shard.remove(s) if s is not None else False

    def touch(self, s: FetchSession) -> None:
        # a live session's id always maps to a shard (no check on the per-request path)
        self._shard_of(s.id).touch(s, self.now_ms())  # type: ignore[union-attr]

    def maybe_create(self, privileged: bool, size: int, uses_topic_ids: bool) -> Optional[FetchSession]:
        """A session for a full fetch's answer of ``size`` partitions, or None (no room).  The
        caller fills its partitions, then calls :meth:`touch` (Kafka touches it at creation)."""
        shard = self.shards[self._counter % NUM_SHARDS]
        self._counter += 1
        return shard.maybe_create(self.now_ms(), privileged, size, uses_topic_ids)

    def __len__(self) -> int:
        return sum(len(s.sessions) for s in self.shards)

    @property
    def total_partitions(self) -> int:
        return sum(s.num_partitions for s in self.shards)
