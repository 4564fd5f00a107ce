"""Incremental fetch sessions for follower fetches (KIP-227), the leader's side.

Why: a follower of N partitions would otherwise name all N in every Fetch, every
``replica.fetch.wait.max.ms`` (500 ms), and the leader would read, park on and answer all N each
time, even when nothing happens.  With a session the follower names only partitions whose fetch
position changed, and the leader answers only partitions with something new, so an idle
follower's fetch is a few bytes and O(1) work on both sides.

Kafka's request/response rules (FetchMetadata, FetchSession.scala):
- ``session_id`` 0 and epoch 0: a full fetch that creates a session; the answer carries its
  id and lists every partition.  Epoch -1: a full fetch without a session (what consumers of
  pykbroker always get: sessions are kept for followers only, as if the cache were full for
  consumers, which Kafka also answers with session id 0).  A session id with epoch 0 closes
  that session and creates a new one; with epoch -1 it closes it.
- ``session_id`` S with epoch E > 0: incremental.  Unknown S -> FETCH_SESSION_ID_NOT_FOUND;
  E not the session's next epoch -> INVALID_FETCH_SESSION_EPOCH.  Named partitions are added
  or updated, ``forgotten_topics_data`` removed, the others keep their cached fetch position.
- An incremental answer lists a partition only if it has records, an error, a diverging
  epoch, or a high watermark / log start offset different from what this session last said.
  A partition whose follower is still behind the log end after an answer (the response's
  byte limit, a partial batch) stays dirty: it is read again on the next request.

What the leader reads per request (the O(touched) rule): the partitions the request names, the
session's *dirty* partitions (each partition of a session holds a waker that marks it dirty
when data is appended, the high watermark moves, or leadership changes there; the same wake-up
serves the long poll), and, every ``FULL_SWEEP_S``, all of its partitions (catches what no wake
reports: a log start moved by retention, a partition object replaced).  Sessions idle for
``EVICTION_S`` are evicted (Kafka's min.incremental.fetch.session.eviction.ms default).
"""
from __future__ import annotations

import random
from typing import Optional

import trio

# Kafka's min.incremental.fetch.session.eviction.ms default (2 minutes): an idle session goes.
EVICTION_S = 120.0
# Kafka's max.incremental.fetch.session.cache.slots default: beyond it, full fetches get no session.
MAX_SESSIONS = 1000
# How often a session re-reads all its partitions (what no wake-up reports, see the docstring).
FULL_SWEEP_S = 10.0


class CachedPartition:
    """What a session knows of one partition: the follower's last fetch fields and what this
    leader last answered (high watermark, log start offset; -1 before the first answer)."""
    __slots__ = ("topic", "partition", "fields", "hw", "log_start", "part", "waker")

    def __init__(self, topic: str, partition: int, fields: dict):
        self.topic = topic
        self.partition = partition
        self.fields = fields
        self.hw = -1
        self.log_start = -1
        self.part = None        # the Partition object the waker is registered on
        self.waker = None


class _Waker:
    """Registered with ``Partition.add_data_waiter``: its ``set()`` marks the partition dirty."""
    __slots__ = ("session", "tp")

    def __init__(self, session: "FetchSession", tp):
        self.session = session
        self.tp = tp

    def set(self) -> None:
        s = self.session
        s.dirty.add(self.tp)
        if s.event is not None:
            s.event.set()


class FetchSession:
    def __init__(self, session_id: int, replica_id: int):
        self.id = session_id
        self.replica_id = replica_id
        self.epoch = 1                 # the epoch of the next incremental request
        self.partitions: dict[tuple[str, int], CachedPartition] = {}
        self.dirty: set[tuple[str, int]] = set()
        self.event: Optional[trio.Event] = None
        self.last_used = trio.current_time()
        self.last_sweep = self.last_used

    def attach(self, rm, cp: CachedPartition) -> None:
        """(Re-)register this session's waker on the partition object ``rm`` has now."""
        part = rm.get_partition(cp.topic, cp.partition)
        if part is cp.part:
            return
        self.detach(cp)
        if part is not None and hasattr(part, "add_data_waiter"):
            cp.waker = _Waker(self, (cp.topic, cp.partition))
            part.add_data_waiter(cp.waker)
            cp.part = part

    @staticmethod
    def detach(cp: CachedPartition) -> None:
        if cp.part is not None:
            cp.part.remove_data_waiter(cp.waker)
        cp.part = cp.waker = None

    def close(self) -> None:
        for cp in self.partitions.values():
            self.detach(cp)
        self.partitions.clear()
        self.dirty.clear()


class FetchSessionCache:
    """The sessions of this broker (owned by the ReplicaManager; touched only on the trio thread)."""

    def __init__(self):
        self.sessions: dict[int, FetchSession] = {}

    def get(self, session_id: int, replica_id: int) -> Optional[FetchSession]:
        s = self.sessions.get(session_id)
        return s if s is not None and s.replica_id == replica_id else None

    def remove(self, session_id: int) -> None:
        s = self.sessions.pop(session_id, None)
        if s is not None:
            s.close()

    def create(self, replica_id: int) -> Optional[FetchSession]:
        now = trio.current_time()
        for sid in [sid for sid, s in self.sessions.items() if now - s.last_used > EVICTION_S]:
            self.remove(sid)
        if len(self.sessions) >= MAX_SESSIONS:
            return None
        while True:
            sid = random.randint(1, (1 << 31) - 1)
            if sid not in self.sessions:
                break
        s = self.sessions[sid] = FetchSession(sid, replica_id)
        return s
