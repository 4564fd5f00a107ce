"""``Partition``: the single owner of one partition's log and replication state.

State (mirrors Kafka's Partition/UnifiedLog split):
- ``leader_epoch``: 0 when the partition is created; persisted through the log's leader-epoch
  cache (``leader-epoch-checkpoint``), stamped on every appended batch.  A single node never
  changes leader, so it stays what the cache says; replication will bump it on elections.
- log end offset (``log.log_end_offset``, next offset to assign) vs ``high_watermark`` (the
  last offset every ISR member has, exclusive; frozen while the ISR is below the effective
  ``min.insync.replicas``, as Kafka 3.7+).  They are kept distinct: with ``isr`` = [this
  node] the high watermark moves to the log end offset right after each append, replication
  will move it from follower fetch positions instead.  The high watermark is persisted in
  ``replication-offset-checkpoint`` by the LogManager.
- ``log_start_offset``: first offset still readable (DeleteRecords / retention move it).
- waiters: Fetch long-polls register a ``trio.Event`` that the next append sets.

Concurrency: every method runs on the trio thread.  ``append_records_as_leader`` has no await:
producer-state check, offset assignment, the write, the producer-state update, the high
watermark move and the wake-up all happen in one step, so concurrent produce requests can never
interleave inside an append.  Only fsync (``flush``) leaves the thread, through
``trio.to_thread``.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, NamedTuple, Optional

import trio

from ..protocol.codec import Chunks
from ..protocol.errors import ErrorCode, KafkaError
from ..storage.errors import KafkaStorageError, OffsetOutOfRange, ProducerStateError
from ..storage.log_config import LogConfig
from .delayed import Waiters, wait_woken
from .metadata_cache import PartitionState

if TYPE_CHECKING:
    from ..storage.log_validator import ValidatedRecords
    from ..storage.log import Log

log = logging.getLogger("pykbroker.partition")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool


_new_tuple = tuple.__new__


class ReadResult(NamedTuple):
    """One partition's read for a fetch (Kafka's LogReadResult); the ReplicaManager makes the
    error answers of its own checks in the same shape (cluster/replica_manager.py)."""
    error: int
    records: Chunks | bytes  # Chunks of FileRegions, or b"" (never None: clients want empty bytes)
    size: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    # read_committed: AbortedTxn entries overlapping the read (transactions); else None; []
    # for the errors Kafka answers from its metadata check (unknown topic, not authorized)
    aborted_transactions: Optional[list] = None
    # the offset this fetcher can read up to (a consumer: the HW or LSO; a follower: the log
    # end), -1 after an error: a fetch session reads the partition again while it lags
    end: int = -1
    # a follower's divergence (KIP-320): {"epoch", "end_offset"} of our end of its last epoch
    diverging_epoch: Optional[dict] = None
    # a leadership error of a consumer's fetch: the answer names the current leader (KIP-951)
    leader_hint: bool = False


class PartitionHooks(NamedTuple):
    """What a partition calls outside itself (one instance shared by every partition of the
    ReplicaManager): ``on_storage_error((topic, partition), exc)`` takes the log dir offline,
    ``request_checkpoint()`` makes the log start durable soon, ``delete_below_log_start((topic,
    partition), log)`` removes the segments below the log start (retention's path), ``spawn(fn)``
    starts a background task (the flush after a roll), ``alter_isr(partition, new_isr)`` asks the
    controller for a new ISR (a leader's shrink/expand; None on a single node)."""
    on_storage_error: Callable[[tuple, Exception], None]
    request_checkpoint: Callable[[], None]
    delete_below_log_start: Callable[[tuple, "Log"], Awaitable[int]]
    spawn: Callable[..., None]
    alter_isr: Optional[Callable[["Partition", list], None]] = None


class _RemoteReplica:
    """What a leader knows of one follower (Kafka's Replica): its log end offset (the offset
    of its last fetch; -1 until it fetches from this leader) and when it was last caught up."""
    __slots__ = ("leo", "last_caught_up", "last_fetch_leader_leo", "last_fetch_time")

    def __init__(self, caught_up: float) -> None:
        self.leo = -1
        self.last_caught_up = caught_up
        self.last_fetch_leader_leo = -1
        self.last_fetch_time = 0.0


def log_config_of(cfg: dict) -> LogConfig:
    """Storage's LogConfig from a topic's effective Kafka config."""
    return LogConfig.from_properties({k: cfg.get(k) for k in LogConfig._KAFKA_NAMES})


class Partition:
    def __init__(self, topic: str, topic_id: bytes, partition_id: int,
                 log_: Log, config: dict, high_watermark: Optional[int] = None, *, hooks: PartitionHooks,
                 state: PartitionState, node_id: Optional[int] = None) -> None:
        self._hooks = hooks
        self.topic = topic
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.log = log_
        self.config = config
        # the Produce fast path's reading of ``config`` (handlers/support/produce_fast.py
        # ``_fast_facts``), kept with the dict it was read from: a new config is read again
        self.fast_produce_facts: Optional[tuple] = None
        # this broker's id (a single node: the leader the state names)
        self.node_id = state.leader if node_id is None else node_id
        if high_watermark is not None:
            log_.high_watermark = max(log_.log_start_offset, min(high_watermark, log_.log_end_offset))
        self.data_waiters = Waiters()   # fetches parked for new data (cluster/delayed.py)
        self._hw_waiters: set[trio.Event] = set()
        self._flush_required = False
        self.deleted = False
        # Kafka's HostedPartition.Offline: the partition's log dir failed (I/O error); every
        # request for it answers KAFKA_STORAGE_ERROR until the broker restarts.
        self.offline = False
        self.is_leader = False
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        # leader only: the followers' fetch state, and the LEO when this leader's epoch began
        # (a follower joins the ISR only once it reached it, Kafka's isFollowerInSync)
        self._remote: dict[int, _RemoteReplica] = {}
        self._leader_epoch_start = 0
        self._isr_change_pending = False
        if state.leader == self.node_id:
            self.make_leader(state)
        else:
            self.make_follower(state)

    def __repr__(self) -> str:
        return "Partition(%s-%d)" % (self.topic, self.partition_id)

    # ------------------------------------------------------------------ offsets
    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        # Kafka's LSO: the first offset of the earliest transaction still open (or whose marker
        # is not below the high watermark yet), capped by the high watermark.
        hw = self.log.high_watermark
        fuo = self.log.first_unstable_offset()
        return hw if fuo is None or fuo > hw else fuo

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def effective_min_isr(self) -> int:
        """``min.insync.replicas`` capped by the replication factor (Kafka's effectiveMinIsr:
        the config has no upper bound, and a min ISR above the replica count counts as that
        count), so a single-replica topic with min.insync.replicas 2 still takes acks=all."""
        return min(self.config.get("min.insync.replicas", 1), max(1, len(self.replicas)))

    @property
    def is_under_min_isr(self) -> bool:
        """A leader whose ISR is smaller than its effective min ISR (Kafka's isUnderMinIsr)."""
        return self.is_leader and len(self.isr) < self.effective_min_isr

    def check_min_isr_for_acks_all(self) -> None:
        """An acks=all append (produce, coordinator writes, transaction markers) is refused with
        NOT_ENOUGH_REPLICAS before anything is written while the ISR is below the effective
        min ISR (Kafka's Partition.appendRecordsToLeader with requiredAcks -1)."""
        if self.is_under_min_isr:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "%s: ISR %s is below min.insync.replicas %d"
                             % (self, self.isr, self.effective_min_isr))

    def _maybe_increment_high_watermark(self) -> bool:
        """Leader: the HW is the minimum log end offset over the ISR (Kafka's
        maybeIncrementLeaderHW); it only moves forward.  An ISR member whose position is not
        known yet (-1, no fetch since this leader took over) holds it back.  Returns whether it
        moved; waiters (acks=all, consumers' long polls) are woken then.

        While the ISR is below the effective min ISR the HW does not move at all (Kafka 3.7+,
        KAFKA-15583, unconditional in 3.9's and 4.4's maybeIncrementLeaderHW, ZooKeeper and
        KRaft alike): what a leader alone (or too few) holds is not committed, so no consumer
        reads it and no acks=all write is acknowledged until the ISR is back to min ISR."""
        if self.is_under_min_isr:
            return False
        lg = self.log
        new_hw = lg.log_end_offset
        if len(self.isr) > 1:
            remote = self._remote
            for r in self.isr:
                if r != self.node_id:
                    rep = remote.get(r)
                    leo = rep.leo if rep is not None else -1
                    if leo < new_hw:
                        new_hw = leo
        if new_hw > lg.high_watermark:
            lg.high_watermark = new_hw
            if self._hw_waiters:
                self._wake_hw_waiters()
            # consumers' long polls read up to the HW: they may have something now
            if self.data_waiters:
                self.data_waiters.wake()
            return True
        return False

    def _wake_hw_waiters(self) -> None:
        for ev in self._hw_waiters:
            ev.set()
        self._hw_waiters.clear()

    def make_leader(self, state: PartitionState) -> bool:
        """Take leadership as the controller published it (Kafka's Partition.makeLeader):
        leader, replicas, ISR, partition epoch and leader epoch come from ``state``.  Returns
        True if this is a new leadership (not leader before, or a new leader epoch); a state of
        the same epoch only updates replicas and ISR (Kafka's ISR change through AlterPartition)."""
        new_leadership = not self.is_leader or state.leader_epoch != self.leader_epoch
        self.leader_id = state.leader
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        self.partition_epoch = state.partition_epoch
        now = time.monotonic()
        if new_leadership:
            latest = self.log.epoch_cache.latest_epoch
            if latest is not None and latest >= state.leader_epoch:
                # An epoch never goes backwards: a log written before the controller kept leader
                # epochs (or a restart of a single node, whose epoch never changes) keeps its own.
                self.leader_epoch = latest
            else:
                self.leader_epoch = state.leader_epoch
                # Kafka records the leader's epoch start when it becomes leader, so
                # OffsetForLeaderEpoch answers (epoch, LEO) even before the first append.
                self.log.epoch_cache.assign(self.leader_epoch, self.log.log_end_offset)
            self._leader_epoch_start = self.log.log_end_offset
            # Kafka's resetReplicaState: positions unknown; ISR members count as caught up now
            # (so they get replica.lag.time.max.ms to fetch before being dropped).
            self._remote = {r: _RemoteReplica(now if r in self.isr else 0.0)
                            for r in self.replicas if r != self.node_id}
        else:
            for r in self.replicas:
                if r != self.node_id and r not in self._remote:
                    self._remote[r] = _RemoteReplica(now if r in self.isr else 0.0)
            for r in [r for r in self._remote if r not in self.replicas]:
                del self._remote[r]
        self.is_leader = True
        if new_leadership:
            self.data_waiters.wake()   # followers' fetch sessions re-read it (positions reset)
        self._maybe_increment_high_watermark()
        # acks=all waiters re-check: a smaller ISR may now fail min.insync.replicas
        self._wake_hw_waiters()
        return new_leadership

    def make_follower(self, state: PartitionState) -> bool:
        """Follow ``state.leader`` (Kafka's Partition.makeFollower).  Returns True when the
        leader or its epoch changed: the fetcher must (re)start this partition, after the
        truncation the new leader's epochs call for.  Waiters of a deposed leader wake up and
        see NOT_LEADER_OR_FOLLOWER; the follower's HW comes from its leader's fetch answers."""
        changed = (self.is_leader or state.leader != self.leader_id
                   or state.leader_epoch != self.leader_epoch)
        self.leader_id = state.leader
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        self.partition_epoch = state.partition_epoch
        self.leader_epoch = state.leader_epoch
        self.is_leader = False
        self._remote = {}
        if changed:
            self._wake_hw_waiters()
            self.data_waiters.wake()
        return changed

    # ------------------------------------------------------------------ leader: followers
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int) -> int:
        """A follower fetched from ``fetch_offset`` (its log end offset, Kafka's
        updateFollowerFetchState): record it and when it was last caught up, then maybe expand
        the ISR and move the HW.  Returns an error code (0: fine)."""
        rep = self._remote.get(replica_id)
        if rep is None:
            # not a replica of this partition (Kafka: NotLeaderOrFollower for an unknown replica)
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        now = time.monotonic()
        leo = self.log.log_end_offset
        # Kafka's lastCaughtUpTime: caught up now if it asked for our LEO, else as of its
        # previous fetch if it now reached the LEO we had then.
        if fetch_offset >= leo:
            rep.last_caught_up = now
        elif fetch_offset >= rep.last_fetch_leader_leo:
            rep.last_caught_up = max(rep.last_caught_up, rep.last_fetch_time)
        rep.last_fetch_leader_leo = leo
        rep.last_fetch_time = now
        rep.leo = fetch_offset
        if replica_id not in self.isr:
            self._maybe_expand_isr(replica_id, rep)
        else:
            self._maybe_increment_high_watermark()
        return 0

    def _followers_caught_up_until_now(self, old_leo: int) -> None:
        """Before an append moves the LEO past ``old_leo``: a follower at ``old_leo`` was caught
        up until now.  With a fetch session its fetches stop naming a partition that has nothing
        new (cluster/fetch_session.py), so Kafka's lastCaughtUpTime (set on each fetch at the
        LEO) is kept here instead, per batch, not per idle fetch."""
        if self._remote:
            now = time.monotonic()
            for rep in self._remote.values():
                if rep.leo == old_leo:
                    rep.last_caught_up = now

    def _maybe_expand_isr(self, replica_id: int, rep: _RemoteReplica) -> None:
        # Kafka's isFollowerInSync: the follower reached the HW and this leader's epoch start
        if (rep.leo >= self.log.high_watermark and rep.leo >= self._leader_epoch_start
                and not self._isr_change_pending and self._hooks.alter_isr is not None):
            self._request_isr(self.isr + [replica_id])

    def out_of_sync_replicas(self, max_lag_s: float) -> list[int]:
        """ISR followers not caught up for ``max_lag_s`` (Kafka's getOutOfSyncReplicas: a
        follower at our LEO is always in sync)."""
        now = time.monotonic()
        leo = self.log.log_end_offset
        out = []
        for r in self.isr:
            if r == self.node_id:
                continue
            rep = self._remote.get(r)
            if rep is None or (rep.leo != leo and now - rep.last_caught_up > max_lag_s):
                out.append(r)
        return out

    def maybe_shrink_isr(self, max_lag_s: float) -> None:
        if not self.is_leader or len(self.isr) <= 1 or self._isr_change_pending or self._hooks.alter_isr is None:
            return
        out = self.out_of_sync_replicas(max_lag_s)
        if out:
            log.info("shrinking ISR of %s from %s: %s not caught up for %.0f ms",
                     self, self.isr, out, max_lag_s * 1000)
            self._request_isr([r for r in self.isr if r not in out])

    def _request_isr(self, new_isr: list[int]) -> None:
        self._isr_change_pending = True
        self._hooks.alter_isr(self, new_isr)  # type: ignore[misc]  # both callers checked it is set

    def isr_change_done(self, state: Optional[PartitionState]) -> None:
        """The controller answered an ISR change (``state``: the new state, or None when it
        refused; the next fetch or shrink check tries again)."""
        self._isr_change_pending = False
        if state is not None and self.is_leader and state.partition_epoch > self.partition_epoch \
                and state.leader == self.node_id:
            self.make_leader(state)

    # ------------------------------------------------------------------ follower
    def append_as_follower(self, buf: bytes | bytearray | memoryview) -> Optional[tuple[int, int]]:
        """Append the leader's batches as they are (offsets, epochs, producer ids kept); the
        log's producer state and epoch cache follow them.  Batches this log already holds
        (at offsets below its LEO) are skipped."""
        if self.offline:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)
        try:
            res = self.log.append_as_follower(buf)
        except KafkaStorageError as e:
            log.error("append to %s failed: %s", self, e)
            self._hooks.on_storage_error((self.topic, self.partition_id), e)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from None
        lg = self.log
        if lg.unflushed_messages >= lg.config.flush_interval_messages:
            # flush.messages applies to followers too (off the event loop, in the background)
            self._hooks.spawn(self._flush_after_roll)
        return res

    def update_follower_high_watermark(self, leader_hw: int, leader_log_start: int) -> None:
        """Follower: HW = min(leader's HW, own LEO) (Kafka's follower HW), and the log start
        follows the leader's (DeleteRecords / retention on the leader)."""
        lg = self.log
        if leader_log_start > lg.log_start_offset and leader_log_start <= lg.log_end_offset:
            lg.delete_records_before(leader_log_start)
            self._hooks.request_checkpoint()
            self._hooks.spawn(self._delete_below_start)
        hw = max(lg.log_start_offset, min(leader_hw, lg.log_end_offset))
        if hw != lg.high_watermark:
            lg.high_watermark = hw

    async def _delete_below_start(self) -> None:
        try:
            await self._hooks.delete_below_log_start((self.topic, self.partition_id), self.log)
        except Exception:
            log.exception("deleting segments below the log start of %s failed", self)

    def truncate_to(self, offset: int) -> None:
        """Follower: drop everything at and after ``offset`` (divergence from the leader)."""
        if offset < self.log.log_end_offset:
            log.info("truncating %s from %d to %d", self, self.log.log_end_offset, offset)
            self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Follower behind the leader's log start (OFFSET_OUT_OF_RANGE): start over there."""
        log.info("truncating %s fully, starting at %d", self, offset)
        self.log.truncate_fully_and_start_at(offset)

    def check_leader_epoch(self, current_leader_epoch: int) -> int:
        """Kafka's epoch fencing for client requests: -1 skips the check."""
        if current_leader_epoch == -1:
            return 0
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return 0

    # ------------------------------------------------------------------ config
    def update_config(self, config: dict) -> None:
        self.config = config
        self.log.config = log_config_of(config)

    # ------------------------------------------------------------------ append
    def append_records_as_leader(self, validated: ValidatedRecords, now_ms: int) -> AppendResult:
        """Append one partition's validated produce records.  No await inside."""
        if self.deleted:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if self.offline:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        lg = self.log
        lc = lg.config
        if len(validated.buffer) > lc.segment_bytes:
            # Kafka: a record set larger than a whole segment can never be appended.
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE)
        lat = now_ms if lc.log_append_time else None
        try:
            # (the timestamp type read once, above: lat None is CreateTime)
            info = lg.append(validated, self.leader_epoch, lat, auto_flush=False, time_type_read=True)
        except ProducerStateError as e:
            raise KafkaError(e.code, str(e)) from None
        except KafkaStorageError as e:
            log.error("append to %s failed: %s", self, e)
            self._hooks.on_storage_error((self.topic, self.partition_id), e)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from None
        if not info.duplicate:
            if info.flush_required:
                self._flush_required = True
            elif info.rolled:
                # Kafka flushes a segment in the background when it rolls, so the recovery point
                # advances and an unclean restart only CRC-scans the active segment.
                self._hooks.spawn(self._flush_after_roll)
            if self._remote:   # (the call only with followers: the check is its first line)
                self._followers_caught_up_until_now(info.first_offset)
            if not self._maybe_increment_high_watermark() and self.data_waiters:
                self.data_waiters.wake()   # followers read up to the log end
        # (tuple.__new__: the NamedTuple without its Python-level __new__, a call fewer per append)
        return _new_tuple(AppendResult, (info.first_offset, info.last_offset, info.log_append_time,
                                         lg.log_start_offset, info.duplicate))

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                              coordinator_epoch: int, transaction_version: int = 0) -> int:
        """WriteTxnMarkers: a COMMIT/ABORT control batch as the leader; returns its offset.
        No await inside, like a produce append.  ``transaction_version`` 2: the marker's epoch
        must be above the producer's (see ProducerStateManager.check_marker)."""
        if self.deleted:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if self.offline:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)
        try:
            info = self.log.append_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                                  self.leader_epoch, int(time.time() * 1000),
                                                  transaction_version=transaction_version)
        except ProducerStateError as e:
            raise KafkaError(e.code, str(e)) from None
        except KafkaStorageError as e:
            self._hooks.on_storage_error((self.topic, self.partition_id), e)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from None
        if info.flush_required:
            self._flush_required = True
        self._maybe_increment_high_watermark()
        self.data_waiters.wake()
        return info.first_offset

    def needs_flush(self) -> bool:
        return self._flush_required

    async def flush(self) -> None:
        """fsync the log off the event loop (flush.messages, the flusher, shutdown)."""
        self._flush_required = False
        try:
            await trio.to_thread.run_sync(self.log.flush)
        except KafkaStorageError as e:
            log.error("flush of %s failed: %s", self, e)
            self._hooks.on_storage_error((self.topic, self.partition_id), e)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from None

    async def _flush_after_roll(self) -> None:
        try:
            await self.flush()
        except KafkaError:
            pass  # already logged and the log dir marked offline by flush()

    def check_enough_replicas_reach_offset(self, offset: int) -> Optional[int]:
        """acks=all (Kafka's checkEnoughReplicasReachOffset): None while the HW is below
        ``offset``; then 0, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
        min.insync.replicas meanwhile.  NOT_LEADER_OR_FOLLOWER once leadership is lost."""
        if self.deleted:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if self.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < offset:
            return None
        if len(self.isr) < self.effective_min_isr:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return 0

    async def wait_for_high_watermark(self, offset: int) -> int:
        """Wait until the HW covers ``offset`` (or leadership is lost); returns the error code
        of :meth:`check_enough_replicas_reach_offset`."""
        while True:
            code = self.check_enough_replicas_reach_offset(offset)
            if code is not None:
                return code
            await wait_woken(self._hw_waiters)

    # ------------------------------------------------------------------ fetch
    def _read_log(self, fetch_offset: int, max_bytes: int, max_offset: Optional[int],
                  min_one_batch: bool) -> tuple[Any, Optional[ReadResult]]:
        """``(regions, None)`` read from the log, else ``(None, answer)``: OFFSET_OUT_OF_RANGE, or
        KAFKA_STORAGE_ERROR for a failed read (reported to the log dir's owner, as Kafka's
        LogDirFailureChannel)."""
        try:
            return self.log.read(fetch_offset, max_bytes, max_offset, min_one_batch), None
        except OffsetOutOfRange:
            return None, ReadResult(ErrorCode.OFFSET_OUT_OF_RANGE, b"", 0, -1, -1, -1)
        except KafkaStorageError as e:
            log.error("read from %s failed: %s", self, e)
            self._hooks.on_storage_error((self.topic, self.partition_id), e)
            return None, ReadResult(ErrorCode.KAFKA_STORAGE_ERROR, b"", 0, -1, -1, -1)

    def read_records(self, fetch_offset: int, max_bytes: int, min_one_batch: bool,
                     read_committed: bool) -> ReadResult:
        if self.offline:
            return ReadResult(ErrorCode.KAFKA_STORAGE_ERROR, b"", 0, -1, -1, -1)
        hw = self.log.high_watermark
        lso = self.last_stable_offset
        regions, failed = self._read_log(fetch_offset, max_bytes, lso if read_committed else hw, min_one_batch)
        if failed is not None:
            return failed
        if not regions:
            return ReadResult(0, b"", 0, hw, lso, self.log.log_start_offset, [] if read_committed else None,
                              lso if read_committed else hw)
        chunks = Chunks(regions)
        # Aborted transactions up to the LSO (the read never goes past it): a superset of
        # Kafka's list, which is bounded by an index lookup of the read's end; clients only
        # apply an entry when they reach its producer's batches.
        aborted = self.log.collect_aborted_txns(fetch_offset, lso) if read_committed else None
        return ReadResult(0, chunks, chunks.size, hw, lso, self.log.log_start_offset, aborted,
                          lso if read_committed else hw)

    def read_records_for_follower(self, fetch_offset: int, max_bytes: int, min_one_batch: bool) -> ReadResult:
        """A follower's read: up to the log end offset, not the HW (Kafka's FetchLogEnd)."""
        if self.offline:
            return ReadResult(ErrorCode.KAFKA_STORAGE_ERROR, b"", 0, -1, -1, -1)
        regions, failed = self._read_log(fetch_offset, max_bytes, None, min_one_batch)
        if failed is not None:
            return failed
        hw = self.log.high_watermark
        if not regions:
            return ReadResult(0, b"", 0, hw, hw, self.log.log_start_offset, None, self.log_end_offset)
        chunks = Chunks(regions)
        return ReadResult(0, chunks, chunks.size, hw, hw, self.log.log_start_offset, None, self.log_end_offset)

    # ------------------------------------------------------------------ list offsets
    def fetch_offset_for_timestamp(self, timestamp: int, read_committed: bool, from_replica: bool) -> Optional[tuple[int, int, int]]:
        """(timestamp, offset, leader_epoch) or None (Kafka's Partition.fetchOffsetForTimestamp)."""
        if self.offline:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)
        lg = self.log
        if from_replica:
            last_fetchable = lg.log_end_offset
        else:
            last_fetchable = self.last_stable_offset if read_committed else lg.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return -1, last_fetchable, self.leader_epoch
        if timestamp == EARLIEST_TIMESTAMP:
            start = lg.log_start_offset
            epoch = lg.epoch_for_offset(start)
            return -1, start, epoch if epoch is not None else -1
        try:
            if timestamp == MAX_TIMESTAMP:
                found = lg.max_timestamp_offset()
            else:
                found = lg.offset_for_timestamp(timestamp)
        except (KafkaStorageError, OSError) as e:
            log.error("timestamp lookup in %s failed: %s", self, e)
            self._hooks.on_storage_error((self.topic, self.partition_id), e)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from None
        if found is None:
            return None
        offset, ts, epoch = found
        if offset >= last_fetchable:
            return None  # Kafka hides records not yet committed (beyond HW / LSO)
        return ts, offset, epoch if epoch is not None and epoch >= 0 else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.log.end_offset_for_epoch(epoch)

    # ------------------------------------------------------------------ delete records
    async def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: returns the new log start offset (low watermark)."""
        if self.offline:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)
        hw = self.log.high_watermark
        target = hw if offset == -1 else offset
        if target < 0:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
        if "delete" not in (self.config.get("cleanup.policy") or ["delete"]):
            # Kafka refuses DeleteRecords on compact-only topics.
            raise KafkaError(ErrorCode.POLICY_VIOLATION)
        if target > hw:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
        try:
            self.log.delete_records_before(target)
        except OffsetOutOfRange:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE) from None
        except (KafkaStorageError, OSError) as e:
            self._hooks.on_storage_error((self.topic, self.partition_id), e)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from None
        # Make the new log start durable soon, so deleted records never come back.
        self._hooks.request_checkpoint()
        # followers' fetch sessions answer the new log start (they follow it)
        self.data_waiters.wake()
        # Segments now wholly below the start: renamed to .deleted in a worker thread and
        # unlinked after file.delete.delay.ms (storage/retention.py), never on the event loop.
        # A fetch still sending from one of them keeps its open fd until it is done.
        try:
            await self._hooks.delete_below_log_start((self.topic, self.partition_id), self.log)
        except Exception:
            # the log start has moved already (that is the answer); the next retention pass
            # retries the deletion
            log.exception("deleting segments below the log start of %s failed", self)
        return self.log.log_start_offset

    # ------------------------------------------------------------------ lifecycle
    def mark_offline(self) -> None:
        """The log dir failed: stop serving; long-polls and acks=all waiters wake and see it."""
        self.offline = True
        self.data_waiters.wake()
        self._wake_hw_waiters()

    def mark_deleted(self) -> None:
        self.deleted = True
        self.data_waiters.wake()
        self._wake_hw_waiters()


class OfflinePartition:
    """A partition whose log could not be opened because its log dir failed at start-up
    (Kafka keeps it as HostedPartition.Offline): requests for it get KAFKA_STORAGE_ERROR."""
    offline = True
    deleted = False
    is_leader = False
    log = None
    fast_produce_facts: Optional[tuple] = None   # never read: the fast path stops at ``offline``

    def __init__(self, topic: str, topic_id: bytes, partition_id: int, config: dict,
                 *, state: PartitionState) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.config = config
        self.leader_epoch = state.leader_epoch
        self.isr = list(state.isr)
        self.replicas = list(state.replicas)

    def __repr__(self) -> str:
        return "OfflinePartition(%s-%d)" % (self.topic, self.partition_id)

    # A replica whose log dir failed takes no part in replication: a follower fetching from it
    # and a leader's data for it get KAFKA_STORAGE_ERROR (Kafka's Offline hosted partition).
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int) -> int:
        return ErrorCode.KAFKA_STORAGE_ERROR

    def append_as_follower(self, buf: bytes | bytearray | memoryview) -> Optional[tuple[int, int]]:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)

    def maybe_shrink_isr(self, max_lag_s: float) -> None:
        pass

    def check_leader_epoch(self, current_leader_epoch: int) -> int:
        return 0

    def needs_flush(self) -> bool:
        return False

    def mark_offline(self) -> None:
        pass

    def mark_deleted(self) -> None:
        self.deleted = True

    def update_config(self, config: dict) -> None:
        self.config = config

    def append_records_as_leader(self, validated: ValidatedRecords, now_ms: int) -> AppendResult:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)

    def check_min_isr_for_acks_all(self) -> None:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)

    def read_records(self, *args: Any, **kwargs: Any) -> ReadResult:
        return ReadResult(ErrorCode.KAFKA_STORAGE_ERROR, b"", 0, -1, -1, -1)

    def append_end_txn_marker(self, *args: Any, **kwargs: Any) -> int:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)

    def fetch_offset_for_timestamp(self, *args: Any, **kwargs: Any) -> Optional[tuple[int, int, int]]:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)

    async def delete_records_before(self, offset: int) -> int:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log dir of %s is offline" % self)
