"""The coordinator runtime: one writer per partition of a coordinator's internal topic.

As Apache Kafka's coordinator-common ``CoordinatorRuntime``: a coordinator (groups now, transactions
next) keeps its state in a compacted internal topic (``__consumer_offsets``); each partition of that
topic is a *shard*.  This broker coordinates a shard only while it leads the shard's partition:

- ``on_become_leader(partition, leader_epoch)`` (Kafka's onElection) starts loading the shard: its
  partition is read from the log start to the log end and every record handed to the shard's
  ``replay(key, value)``; then ``loaded()`` makes the state live.  Until then requests for the
  shard answer COORDINATOR_LOAD_IN_PROGRESS.
- ``on_resign(partition, leader_epoch)`` (Kafka's onResignation) unloads it: ``unloaded()`` drops
  the state, queued and uncommitted writes fail with NOT_COORDINATOR, and so does every later
  request for the shard (as for a shard never loaded).
- ``write(partition, records, callback)`` appends the records as one batch, in call order, by the
  shard's single writer task; ``callback(code)`` runs once the batch is *committed* (the partition's
  high watermark passed its last offset), or with the append's error.  On a single broker the high
  watermark moves right after the append; with replication it moves when the ISR caught up.

Transactions (Kafka's transactional coordinator writes): ``write(..., producer_id=,
producer_epoch=, transactional=True)`` appends the records as a transactional batch of that
producer (no sequence: the log checks only the epoch, as for Kafka's AppendOrigin.COORDINATOR);
``write_marker(partition, producer_id, producer_epoch, commit, callback)`` appends a COMMIT/ABORT
control batch through the writer's ``append_end_txn_marker``, in order with the shard's other
writes.  At load, records of transactional batches go to the shard's
``replay_transactional(producer_id, key, value)`` and markers to
``replay_end_transaction(producer_id, commit)`` when the shard has them (a shard without them
sees transactional records through ``replay`` and never sees markers).

The runtime is handed what it needs, nothing else: a :class:`PartitionWriter` (append, read, wait
for the high watermark of a partition of its topic), the nursery its shard tasks run in, and a
wall clock for record timestamps.  All state changes happen on the trio loop between awaits, so
shards need no locks.
"""
from __future__ import annotations

import collections
import logging
import math
import time
from typing import AsyncIterator, Callable, Iterable, Optional, Protocol

import trio

from ..protocol.errors import ErrorCode as E, KafkaError
from ..protocol.records import (CONTROL_COMMIT, Record, control_type, decode_records, encode_batch,
                                iter_batches)

log = logging.getLogger("pykbroker.coordinator.runtime")

LOADING = "Loading"
ACTIVE = "Active"
FAILED = "Failed"


class PartitionWriter(Protocol):
    """The internal topic's partitions as the runtime uses them (Kafka's PartitionWriter)."""

    async def append(self, partition: int, batch: bytes) -> int:
        """Append one batch as the leader; returns the offset after its last record."""

    async def wait_for_high_watermark(self, partition: int, offset: int) -> None:
        """Return once the partition's high watermark is at least ``offset``; raise (a KafkaError)
        if that can no longer happen (partition gone)."""

    def read(self, partition: int) -> AsyncIterator[bytes]:
        """Every batch of the partition from the log start to the log end (bytes)."""

    async def append_end_txn_marker(self, partition: int, producer_id: int, producer_epoch: int,
                                    commit: bool, coordinator_epoch: int) -> int:
        """Append the COMMIT (``commit``) or ABORT marker of ``producer_id``'s transaction as the
        leader; returns the offset after it."""


class CoordinatorShard(Protocol):
    """What a coordinator gives the runtime for one partition (built by ``shard_factory``)."""

    def replay(self, key: bytes, value: bytes | None) -> None:
        """One record read back while loading (value None: a tombstone)."""

    def loaded(self) -> None:
        """The whole partition was replayed: make the state live (timers armed here)."""

    def unloaded(self) -> None:
        """Leadership lost after ``loaded()``: drop the state and its timers."""


def _wall_ms() -> int:
    return int(time.time() * 1000)


class _Shard:
    __slots__ = ("partition", "epoch", "state", "handler", "scope", "loaded", "send", "recv", "pending",
                 "pending_added", "wait_scope")

    def __init__(self, partition: int, epoch: int, queue_size: int) -> None:
        self.partition = partition
        self.epoch = epoch
        self.state = LOADING
        self.handler: CoordinatorShard | None = None
        self.scope = trio.CancelScope()
        self.loaded = trio.Event()  # set once loaded, failed or unloaded (nobody waits forever)
        self.send, self.recv = trio.open_memory_channel(queue_size)
        # (end offset, callback, deadline on trio's clock), append order
        self.pending: collections.deque = collections.deque()
        self.pending_added = trio.Event()
        # the wait for the high watermark of the oldest pending write: its deadline is the
        # earliest pending one (a write appended with an earlier one moves it)
        self.wait_scope: trio.CancelScope | None = None


class CoordinatorRuntime:
    def __init__(self, name: str, writer: PartitionWriter, shard_factory: Callable[[int], CoordinatorShard],
                 nursery: trio.Nursery, now_ms: Callable[[], int] = _wall_ms, queue_size: int = 10000,
                 write_timeout_ms: Optional[int] = None) -> None:
        self.name = name  # the internal topic, for logs
        # How long an appended write may wait to be committed (Kafka's CoordinatorRuntime
        # writeTimeout: the group coordinator's offsets.commit.timeout.ms): past it the write
        # fails with REQUEST_TIMED_OUT (which each coordinator maps to its answer) and is not
        # applied; the records stay in the log (they may still be committed, and a reload or a
        # new leader then reads them, as Kafka's).  None: no limit; ``write(timeout_ms=)`` overrides.
        self.write_timeout_ms = write_timeout_ms
        self._writer = writer
        self._factory = shard_factory
        self._nursery = nursery
        self._now_ms = now_ms
        self._queue_size = queue_size
        self._shards: dict[int, _Shard] = {}

    # -- leadership (called by the controller's events; single node: every partition at start) ----
    def on_become_leader(self, partition: int, leader_epoch: int) -> None:
        sh = self._shards.get(partition)
        if sh is not None and sh.state != FAILED:
            sh.epoch = max(sh.epoch, leader_epoch)  # already loading/loaded: a newer epoch keeps it
            return
        sh = _Shard(partition, leader_epoch, self._queue_size)
        self._shards[partition] = sh
        self._nursery.start_soon(self._run_shard, sh)

    def on_resign(self, partition: int, leader_epoch: int | None = None) -> None:
        """Stop coordinating ``partition`` (``leader_epoch`` None: unconditionally); a resignation
        older than the epoch the shard was loaded for is ignored, as in Kafka."""
        sh = self._shards.get(partition)
        if sh is None or (leader_epoch is not None and leader_epoch < sh.epoch):
            return
        del self._shards[partition]
        was_active = sh.state == ACTIVE
        sh.state = FAILED
        sh.scope.cancel()
        sh.loaded.set()
        if was_active and sh.handler is not None:
            try:
                sh.handler.unloaded()
            except Exception:
                log.exception("unloading %s-%d failed", self.name, partition)
        self._fail_all(sh, int(E.NOT_COORDINATOR))
        log.info("%s-%d: unloaded (leader epoch %s)", self.name, partition, leader_epoch)

    async def wait_loaded(self, partitions: Optional[Iterable[int]] = None) -> None:
        """Wait until the given shards (default: all known) are loaded, failed or unloaded."""
        for p in list(self._shards) if partitions is None else partitions:
            sh = self._shards.get(p)
            if sh is not None:
                await sh.loaded.wait()

    # -- queries ----------------------------------------------------------------------------
    def status(self, partition: int) -> int:
        """0 when this broker coordinates the shard, else the error a request gets."""
        sh = self._shards.get(partition)
        if sh is None or sh.state == FAILED:
            return int(E.NOT_COORDINATOR)
        if sh.state == LOADING:
            return int(E.COORDINATOR_LOAD_IN_PROGRESS)
        return 0

    def leader_epoch(self, partition: int) -> int | None:
        sh = self._shards.get(partition)
        return None if sh is None else sh.epoch

    def active_partitions(self) -> list[int]:
        return sorted(p for p, sh in self._shards.items() if sh.state == ACTIVE)

    # -- writes -----------------------------------------------------------------------------
    def write(self, partition: int, records: list, callback: Callable[[int], None], *,
              producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False,
              timeout_ms: Optional[int] = None) -> None:
        """Append ``records`` ((key, value) pairs) to the shard's partition as one batch after
        every earlier write of the shard; ``callback(code)`` once committed (0) or failed
        (REQUEST_TIMED_OUT when not committed ``timeout_ms`` after the append, default the
        runtime's ``write_timeout_ms``).  With a ``producer_id``: a batch of that producer
        (transactional if asked)."""
        self._enqueue(partition, (records, callback, producer_id, producer_epoch, transactional, None, timeout_ms))

    def write_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                     callback: Callable[[int], None]) -> None:
        """Append a COMMIT/ABORT marker of ``producer_id`` after every earlier write."""
        self._enqueue(partition, (None, callback, producer_id, producer_epoch, True, commit, None))

    def _enqueue(self, partition: int, item: tuple) -> None:
        callback = item[1]
        sh = self._shards.get(partition)
        if sh is None or sh.state != ACTIVE:
            _call(callback, self.status(partition))
            return
        try:
            sh.send.send_nowait(item)
        except trio.WouldBlock:
            _call(callback, int(E.COORDINATOR_NOT_AVAILABLE))

    # -- the shard's tasks ------------------------------------------------------------------
    async def _run_shard(self, sh: _Shard) -> None:
        with sh.scope:
            try:
                await self._load(sh)
            except Exception:
                log.exception("loading %s-%d failed", self.name, sh.partition)
                if self._shards.get(sh.partition) is sh:
                    del self._shards[sh.partition]
                sh.state = FAILED
                sh.loaded.set()
                return
            async with trio.open_nursery() as n:
                n.start_soon(self._complete_committed, sh)
                await self._append_loop(sh)

    async def _load(self, sh: _Shard) -> None:
        t0 = time.monotonic()
        handler = self._factory(sh.partition)
        n = 0
        replay_txn = getattr(handler, "replay_transactional", None)
        replay_end = getattr(handler, "replay_end_transaction", None)
        async for batch in self._writer.read(sh.partition):
            for h in iter_batches(batch):
                body = memoryview(batch)[h.position:h.position + h.size]
                if h.is_control:
                    if replay_end is not None and h.producer_id >= 0:
                        ctype = control_type(body)
                        if ctype is not None:
                            replay_end(h.producer_id, ctype == CONTROL_COMMIT)
                    continue
                txn = replay_txn if h.is_transactional and h.producer_id >= 0 else None
                for rec in decode_records(body):
                    if rec.key is None:
                        continue
                    n += 1
                    try:
                        if txn is not None:
                            txn(h.producer_id, rec.key, rec.value)
                        else:
                            handler.replay(rec.key, rec.value)
                    except (ValueError, IndexError, UnicodeDecodeError) as e:
                        log.warning("skipping unreadable record in %s-%d: %s", self.name, sh.partition, e)
        sh.handler = handler
        handler.loaded()
        sh.state = ACTIVE
        sh.loaded.set()
        log.debug("%s-%d: loaded %d record(s) in %.3fs (leader epoch %d)", self.name, sh.partition, n,
                  time.monotonic() - t0, sh.epoch)

    async def _append_loop(self, sh: _Shard) -> None:
        async for records, callback, pid, epoch, transactional, commit, timeout_ms in sh.recv:
            code = 0
            # Shielded: an unload while a batch is half-written (flush) must not tear it.
            with trio.CancelScope(shield=True):
                try:
                    if commit is not None:
                        end = await self._writer.append_end_txn_marker(sh.partition, pid, epoch, commit, sh.epoch)
                    else:
                        batch = encode_batch([Record(None, self._now_ms(), k, v) for k, v in records],
                                             producer_id=pid, producer_epoch=epoch,
                                             is_transactional=transactional)
                        end = await self._writer.append(sh.partition, batch)
                except KafkaError as e:
                    # a refusal with Kafka's error (NOT_ENOUGH_REPLICAS below min.insync.replicas,
                    # leadership lost): answered with it, one line
                    log.warning("appending to %s-%d failed: %s (error %d)", self.name, sh.partition, e, e.code)
                    code = int(e.code)
                except Exception as e:
                    log.exception("appending to %s-%d failed", self.name, sh.partition)
                    code = int(getattr(e, "code", None) or E.COORDINATOR_NOT_AVAILABLE)
            if code:
                _call(callback, code)
            elif sh.state != ACTIVE:
                _call(callback, int(E.NOT_COORDINATOR))  # unloaded meanwhile: not ours to confirm
            else:
                # the timeout counts from the append, as Kafka's (its OperationTimeout is armed
                # once the write's records are in the log and it waits for the HW)
                if timeout_ms is None:
                    timeout_ms = self.write_timeout_ms
                deadline = math.inf if timeout_ms is None else trio.current_time() + timeout_ms / 1000.0
                sh.pending.append((end, callback, deadline))
                if sh.wait_scope is not None and deadline < sh.wait_scope.deadline:
                    sh.wait_scope.deadline = deadline
                sh.pending_added.set()

    async def _complete_committed(self, sh: _Shard) -> None:
        """Answer writes in order as the high watermark passes them; a write still waiting at
        its deadline fails with REQUEST_TIMED_OUT."""
        while True:
            if not sh.pending:
                sh.pending_added = trio.Event()
                await sh.pending_added.wait()
                continue
            end = sh.pending[0][0]
            code = 0
            with trio.CancelScope(deadline=min(p[2] for p in sh.pending)) as scope:
                sh.wait_scope = scope
                try:
                    await self._writer.wait_for_high_watermark(sh.partition, end)
                except Exception as e:
                    code = int(getattr(e, "code", None) or E.NOT_COORDINATOR)
            sh.wait_scope = None
            if scope.cancelled_caught:
                self._fail_timed_out(sh)   # the earliest deadline passed, the HW did not get there
                continue
            while sh.pending and sh.pending[0][0] <= end:
                _call(sh.pending.popleft()[1], code)

    def _fail_timed_out(self, sh: _Shard) -> None:
        """Fail every pending write whose deadline passed (REQUEST_TIMED_OUT), keeping the
        others in order."""
        now = trio.current_time()
        keep: collections.deque = collections.deque()
        while sh.pending:
            item = sh.pending.popleft()
            if item[2] <= now:
                log.warning("%s-%d: a write ending at offset %d was not committed in time (high watermark "
                            "behind: too few in-sync replicas?)", self.name, sh.partition, item[0])
                _call(item[1], int(E.REQUEST_TIMED_OUT))
            else:
                keep.append(item)
        sh.pending = keep

    def _fail_all(self, sh: _Shard, code: int) -> None:
        while sh.pending:
            _call(sh.pending.popleft()[1], code)
        while True:
            try:
                callback = sh.recv.receive_nowait()[1]
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            _call(callback, code)


def _call(callback: Callable[[int], None], code: int) -> None:
    try:
        callback(code)
    except Exception:
        log.exception("coordinator write callback failed")
