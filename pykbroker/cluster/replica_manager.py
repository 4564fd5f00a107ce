"""``ReplicaManager``: the partitions hosted by this broker (Kafka's ReplicaManager).

It owns the ``Partition`` objects and routes produce/fetch to them (``get_partition``); their
logs belong to the ``LogManager`` (storage/manager.py: log dirs, opening and recovering,
deleting, flushing, checkpoints — high watermarks included —, retention, the cleaner, log dir
failure).  The controller's metadata changes reach it through ``make_partitions``,
``delete_partitions`` and ``on_config_change``.

Start-up (``startup``, after the LogManager's): one ``Partition`` per partition of every topic
in the metadata image, wrapping the log the LogManager opened; a partition whose log dir is
offline (or whose log could not be opened) is an ``OfflinePartition``.

Log dir failure: the LogManager tells it which partitions the failed dir held; each becomes
offline (KAFKA_STORAGE_ERROR to Produce, Fetch, ListOffsets; Metadata shows no leader and this
node as offline replica).  The partitions of the other dirs keep serving.

Replication (Kafka's LeaderAndIsr handling, ``becomeLeaderOrFollower``): the controller's
partition-change listener (``_on_partition_change``, registered when a controller is handed
in) and ``make_partitions`` / ``startup`` make each *local* replica (this node in
``state.replicas``) leader or follower.  A follower is added to the ``ReplicaFetcher`` of its
leader (cluster/replica_fetcher.py; one per source broker, started lazily, so a single node has
none); a leader's ISR changes go to ``controller.alter_partition`` (a spawned task per
request), and ``_isr_shrink_loop`` checks every half ``replica.lag.time.max.ms`` for followers
that fell behind.  Leadership changes are told to ``add_leadership_listener`` callbacks
(``cb(topic, partition, is_leader, leader_epoch)``): the broker wires the group coordinator's
``on_become_leader`` / ``on_resign`` for ``__consumer_offsets`` through it.

Produce and fetch (Kafka's ``appendRecords`` / ``fetchMessages``; the handlers decode the request,
call these and encode the answer):
- :meth:`append_records`: per partition the leader lookup (:func:`leader_partition`), the
  internal-topic refusal, ``min.insync.replicas`` for acks=-1, record validation, the topic's
  recompression, the transaction verification (KIP-890, through the transaction coordinator
  handed in with :meth:`set_transaction_coordinator`), the append and ``flush.messages``; then
  acks=-1 waits for the high watermark (cluster/delayed.py, DelayedProduce).
- :meth:`fetch_messages` (sessionless and full fetches) and :meth:`fetch_session_messages`
  (incremental ones): the reads of a request share its byte budget (``max_bytes``, KIP-74's
  first whole batch); consumers read up to the high watermark or the last stable offset,
  followers up to the log end with their position recorded (ISR, HW) and divergence detected;
  then the long poll until ``min_bytes`` (cluster/delayed.py, DelayedFetch).

The partition dict is only mutated on the trio thread.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable, Iterable, Optional

import trio

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import COMPRESSION_TYPES, RecordError
from ..config import inter_broker_listener
from ..storage.log_validator import recompress, validate_produce_records
from .delayed import delayed_fetch, delayed_produce, delayed_session_fetch
from .fetch_session import FULL_SWEEP_S, FetchSessionCache
from .partition import OfflinePartition, Partition, PartitionHooks, ReadResult
from .producer_ids import ProducerIdManager

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..coordinator.txn.coordinator import TransactionCoordinator
    from ..storage.log import Log
    from ..storage.manager import LogManager
    from .controller import Controller
    from .interbroker import InterBrokerVersions
    from .metadata import TopicInfo
    from .fetch_session import FetchSession
    from .metadata_cache import MetadataCache, PartitionState
    from .replica_fetcher import FetcherConfig, ReplicaFetcher

log = logging.getLogger("pykbroker.replica_manager")

# Errors raised while appending to the log that Kafka's ReplicaManager answers with the
# partition's log start offset (every failure but unknown partition / not leader / too large /
# corrupt / storage, which keep -1; request-level record checks keep -1 as well).
_LOG_START_ERRORS = frozenset(int(c) for c in (
    ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TIMESTAMP, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
    ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.UNKNOWN_PRODUCER_ID))

# Answered from Kafka's metadata check (FetchResponse.partitionResponse), before any log read:
# an empty (not null) aborted_transactions list.
_METADATA_ERRORS = frozenset((int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), int(ErrorCode.UNKNOWN_TOPIC_ID)))
# Errors after which Kafka tells the client where the leader is now (KIP-951, Produce v10+ and
# Fetch v12+): the client skips a metadata round trip.
NEW_LEADER_ERRORS = frozenset((int(ErrorCode.NOT_LEADER_OR_FOLLOWER), int(ErrorCode.FENCED_LEADER_EPOCH)))


def leader_partition(replica_manager: ReplicaManager, topic: str, index: int,
                     current_leader_epoch: int = -1) -> Partition:
    """The partition serving a client's produce/fetch/list-offsets/... request, else raises
    Kafka's answer: UNKNOWN_TOPIC_OR_PARTITION; KAFKA_STORAGE_ERROR for a partition whose log dir
    failed (Kafka's Offline partitions; the other dirs keep serving); FENCED_LEADER_EPOCH /
    UNKNOWN_LEADER_EPOCH when the client's ``current_leader_epoch`` is older / newer than ours
    (-1, the field's default in versions without it, skips the check); then
    NOT_LEADER_OR_FOLLOWER when this broker hosts only a follower replica, or none although the
    topic exists (Kafka's ReplicaManager.getPartitionOrException +
    Partition.localLogWithEpochOrThrow, in that order).  Raising costs nothing on the success
    path of the Produce/Fetch loops (a ``try`` is free in Python 3.11+ until something is
    raised)."""
    partition = replica_manager.get_partition(topic, index)
    if partition is None:
        raise KafkaError(_missing_partition_error(replica_manager.metadata, topic, index))
    if partition.offline:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR)
    code = partition.check_leader_epoch(current_leader_epoch)
    if code:
        raise KafkaError(code)
    if not partition.is_leader:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    # an OfflinePartition is always offline (raised above), so this is a Partition; said to the
    # type checker without a check per partition of every Produce and Fetch
    return partition  # type: ignore[return-value]


def _missing_partition_error(metadata: Optional[MetadataCache], topic: str, index: int) -> int:
    """Kafka answers NOT_LEADER_OR_FOLLOWER for a partition that exists in the metadata but has
    no replica on this broker (a client with stale metadata asked the wrong broker)."""
    st = metadata.partition_state(topic, index) if metadata is not None and metadata.get(topic) is not None else None
    return ErrorCode.NOT_LEADER_OR_FOLLOWER if st is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def failed_status(e: KafkaError, partition: Partition | None) -> ProducePartitionStatus:
    """The status of a partition whose append ``e`` refused (nothing appended): Kafka answers
    the errors of ``_LOG_START_ERRORS`` with the partition's log start offset, the others and
    request-level record checks with -1 (also the fast path's, handlers/support/produce_fast.py)."""
    log_start = -1
    if (e.code in _LOG_START_ERRORS and partition is not None
            and not (isinstance(e, RecordError) and e.request_check)):
        log_start = partition.log_start_offset
    return ProducePartitionStatus(e, int(e.code), -1, -1, log_start)


@dataclass(slots=True)
class ProducePartitionStatus:
    """One partition's outcome of :meth:`ReplicaManager.append_records` (Kafka's
    PartitionResponse): ``error`` the KafkaError that refused the append (nothing appended),
    else the append's offsets and ``code``, 0 or what the acks=-1 wait ended with (the offsets
    stay, as in Kafka's DelayedProduce answer)."""
    error: Optional[KafkaError]
    code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int


class FetchParams:
    """One Fetch request's settings (Kafka's FetchParams).  ``authorized(topic)``: whether the
    fetcher may read the topic (None: no authorizer); a follower's CLUSTER_ACTION is decided
    once for the request (``follower_denied``)."""
    __slots__ = ("version", "replica_id", "max_wait_ms", "min_bytes", "max_bytes", "read_committed",
                 "uses_ids", "authorized", "follower_denied")

    def __init__(self, version: int, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                 read_committed: bool, uses_ids: bool, authorized: Optional[Callable[[str], bool]] = None,
                 follower_denied: bool = False) -> None:
        self.version = version
        self.replica_id = replica_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.read_committed = read_committed
        self.uses_ids = uses_ids
        self.authorized = authorized
        self.follower_denied = follower_denied


def _error_data(code: int, metadata: bool = False, leader_hint: bool = False) -> ReadResult:
    """A partition's error answer (aborted_transactions [] for the errors Kafka answers from
    its metadata check, else null)."""
    return ReadResult(int(code), b"", 0, -1, -1, -1, [] if metadata else None, -1, None, leader_hint)


class _Budget:
    """The response's byte limit across partitions (KIP-74: the first partition with data
    always returns at least one whole batch; Kafka's ReplicaManager.readFromLog limitBytes)."""
    __slots__ = ("limit", "min_one", "total")

    def __init__(self, max_bytes: int) -> None:
        self.limit = max(max_bytes, 0)
        self.min_one = True
        self.total = 0

    def take(self, size: int) -> None:
        """A partition returned ``size`` bytes (> 0).  Kafka: only the first partition with data
        may exceed the limits (KIP-74)."""
        if size:
            self.min_one = False
            self.limit = max(0, self.limit - size)
            self.total += size


class _ReadPass:
    """What one pass over a request's partitions read (Kafka's readFromLog result)."""
    __slots__ = ("datas", "budget", "errored")

    def __init__(self, datas: list, budget: _Budget, errored: bool) -> None:
        self.datas = datas
        self.budget = budget
        self.errored = errored


class ReplicaManager:
    """``metadata``: ``.topics`` (name -> TopicInfo) and ``.effective_config(name)``."""

    def __init__(self, node_id: int, log_manager: LogManager, metadata: MetadataCache,
                 controller: Optional[Controller] = None, config: Optional[BrokerConfig] = None,
                 versions: Optional[InterBrokerVersions] = None) -> None:
        self.node_id = node_id
        # the request versions this broker's own code sends to others (cluster/interbroker.py)
        self.interbroker_versions = versions
        # TLS and SASL of this broker's connections to the others' inter-broker listener
        # (security/client.py; None: PLAINTEXT), read once: a bad setting stops the start-up
        self.interbroker_security = None
        if config is not None and config["zookeeper.connect"]:
            from ..security.client import InterBrokerSecurity
            self.interbroker_security = InterBrokerSecurity.from_config(config)
        self.log_manager = log_manager
        self.metadata = metadata
        # an OfflinePartition where the log dir failed (Kafka's HostedPartition.Offline)
        self.partitions: dict[tuple[str, int], Partition | OfflinePartition] = {}
        # a cluster's controller hands out producer id blocks (unique across brokers)
        alloc: Optional[Callable[[], Awaitable[int]]] = None
        if controller is not None and controller.allocates_producer_ids:
            alloc = functools.partial(controller.allocate_producer_id_block, node_id)
        self.producer_ids = ProducerIdManager(log_manager.log_dirs[0], log_manager.fs, alloc)
        # set by startup()
        self._hooks: Optional[PartitionHooks] = None
        self._nursery: Optional[trio.Nursery] = None
        # set by the broker: tells the controller which replicas went offline (a failed dir)
        self.on_replicas_offline: Optional[Callable[[list], None]] = None
        log_manager.add_dir_failure_listener(self._on_dir_offline)
        log_manager.add_log_replaced_listener(self._on_log_replaced)
        # replication: ISR changes go to the controller; its partition changes come back
        self.controller = controller
        self.config = config
        self._fetchers: dict[int, "ReplicaFetcher"] = {}
        self._fetcher_config: Optional[FetcherConfig] = None   # built for the first follower
        self._fetcher_of: dict[tuple[str, int], int] = {}
        self._leadership_listeners: list[Callable[[str, int, bool, int], None]] = []
        # incremental fetch sessions (KIP-227) of consumers and followers (handlers/k01_fetch.py)
        self.fetch_sessions = FetchSessionCache(
            config["max.incremental.fetch.session.cache.slots"] if config is not None else 1000)
        # KIP-890 verification of transactional produce (set_transaction_coordinator)
        self.transaction_coordinator: Optional[TransactionCoordinator] = None
        if controller is not None:
            controller.add_partition_change_listener(self._on_partition_change)

    def set_transaction_coordinator(self, coordinator: TransactionCoordinator) -> None:
        """The coordinator that verifies (and, for transaction version 2, adds) a partition a
        transactional batch would open a transaction on (Kafka's AddPartitionsToTxnManager)."""
        self.transaction_coordinator = coordinator

    # ------------------------------------------------------------------ queries
    def get_partition(self, topic: str, partition: int) -> Partition | OfflinePartition | None:
        return self.partitions.get((topic, partition))

    def partitions_of(self, topic: str) -> list[Partition | OfflinePartition]:
        return [p for (t, _), p in self.partitions.items() if t == topic]

    # ------------------------------------------------------------------ produce
    async def append_records(self, entries: list, acks: int, timeout_ms: int, api_version: int,
                             transactional_id: Optional[str], now_ms: int) -> list[ProducePartitionStatus]:
        """Append each of ``entries`` [(topic, partition, records)] (topics the metadata knows,
        the request's authorization passed) as leader; one :class:`ProducePartitionStatus` each,
        in order.  acks=-1 answers once the high watermark covers the appends (or the wait
        fails: ``code``)."""
        transactional = transactional_id is not None
        topics = self.metadata.topics
        out = []
        waits = []      # (partition, offset the HW must reach, status) for acks=-1
        for topic, idx, records in entries:
            partition = None
            try:
                partition = leader_partition(self, topic, idx)
                info = topics.get(topic)
                if info is not None and info.internal:
                    # Kafka refuses client writes to internal topics (__consumer_offsets, ...)
                    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION)
                cfg = partition.config
                if acks == -1:
                    # Kafka refuses acks=all before appending when the ISR is below (the
                    # effective) min.insync.replicas
                    partition.check_min_isr_for_acks_all()
                # Kafka validates timestamps only on CreateTime topics (LogAppendTime overwrites
                # them) and keys only on compacted ones; the records are walked only then.
                create_time = cfg.get("message.timestamp.type") != "LogAppendTime"
                validated = validate_produce_records(
                    records, cfg["max.message.bytes"], api_version=api_version, now_ms=now_ms,
                    timestamp_before_max_ms=cfg.get("message.timestamp.before.max.ms") if create_time else None,
                    timestamp_after_max_ms=cfg.get("message.timestamp.after.max.ms") if create_time else None,
                    compacted_partition="%s-%d" % (topic, idx)
                    if "compact" in (cfg.get("cleanup.policy") or ()) else None)
                target = COMPRESSION_TYPES.get(cfg.get("compression.type", "producer"))
                if target is not None:
                    # a topic compression.type other than "producer": Kafka rewrites the records
                    # in the topic's codec (at its compression.<codec>.level)
                    level = cfg.get("compression.%s.level" % cfg["compression.type"])
                    validated = recompress(validated, target, level)
                if transactional or validated.batches[0].is_transactional:
                    # KIP-890: a batch opening a transaction here must belong to the producer's
                    # Ongoing transaction (checked with the coordinator: in process, or with the
                    # coordinator broker; the append below re-checks leadership after that wait).
                    tc = self.transaction_coordinator
                    code = await tc.verify_produce(transactional_id, partition, validated, api_version) \
                        if tc else ErrorCode.INVALID_TXN_STATE
                    if code:
                        raise KafkaError(code)
                res = partition.append_records_as_leader(validated, now_ms)
            except KafkaError as e:
                out.append(failed_status(e, partition))
                continue
            st = ProducePartitionStatus(None, 0, res.base_offset, res.log_append_time_ms, res.log_start_offset)
            out.append(st)
            if acks == -1:
                waits.append((partition, res.last_offset + 1, st))
            # flush.messages: fsync before acknowledging once enough messages are unflushed.
            if partition.needs_flush():
                await partition.flush()
        if waits:
            codes = await delayed_produce([(p, hw) for p, hw, _ in waits], timeout_ms)
            for (_, _, st), code in zip(waits, codes):
                st.code = code
        return out

    # ------------------------------------------------------------------ fetch
    def read_partition(self, params: FetchParams, budget: _Budget, topic: Optional[str], topic_id: bytes,
                       fields: dict, targets: Optional[set]) -> ReadResult:
        """One partition of a fetch (Kafka's readFromLog for one partition): its answer, within
        what is left of ``budget``.  ``targets`` collects the partitions to park on."""
        idx = fields["partition"]
        if topic is None:
            return _error_data(ErrorCode.UNKNOWN_TOPIC_ID, metadata=True)
        # Authorization (with an authorizer): a consumer needs READ on each topic, a follower
        # CLUSTER_ACTION on the cluster; else TOPIC_AUTHORIZATION_FAILED per partition (Kafka's
        # handleFetchRequest), before any existence or leadership check.
        if params.authorized is not None and (params.follower_denied if params.replica_id >= 0
                                              else not params.authorized(topic)):
            return _error_data(ErrorCode.TOPIC_AUTHORIZATION_FAILED, metadata=True)
        if params.uses_ids:
            part = self.partitions.get((topic, idx))
            if part is not None and not part.offline and part.topic_id != topic_id:
                return _error_data(ErrorCode.INCONSISTENT_TOPIC_ID)
        if params.replica_id >= 0:
            return self._read_for_follower(params, budget, topic, fields, targets)
        try:
            # (current_leader_epoch is -1, no check, before v9)
            partition = leader_partition(self, topic, idx, fields["current_leader_epoch"])
        except KafkaError as e:
            return _error_data(e.code, e.code in _METADATA_ERRORS, e.code in NEW_LEADER_ERRORS)
        if targets is not None:
            targets.add(partition)
        max_bytes = min(max(fields["partition_max_bytes"], 0), budget.limit)
        res = partition.read_records(fields["fetch_offset"], max_bytes, budget.min_one, params.read_committed)
        if res.size:
            budget.take(res.size)
        return res

    def _read_for_follower(self, params: FetchParams, budget: _Budget, topic: str, p: dict,
                           targets: Optional[set]) -> ReadResult:
        """One partition of a follower's fetch (``replica_id`` >= 0, Kafka's FetchFromFollower):
        it must be led here; the fetch offset is the follower's log end offset, recorded (ISR,
        HW) before reading up to our log end offset, not the HW.  v12 ``last_fetched_epoch``:
        when that epoch ends earlier here than the fetch offset (or is unknown), the answer is
        ``diverging_epoch`` (our end of that epoch) and no records, and the follower truncates
        (Kafka's Partition.fetchRecords divergence check)."""
        idx = p["partition"]
        try:
            partition = leader_partition(self, topic, idx, p["current_leader_epoch"])
        except KafkaError as e:
            return _error_data(e.code)
        fetch_offset = p["fetch_offset"]
        last_epoch = p["last_fetched_epoch"] if params.version >= 12 else -1
        # (fast path: the follower is on our latest epoch, which ends at our log end)
        if last_epoch >= 0 and not (last_epoch == partition.log.epoch_cache.latest_epoch
                                    and fetch_offset <= partition.log_end_offset):
            epoch, end = partition.end_offset_for_epoch(last_epoch)
            if epoch < last_epoch or end < fetch_offset:
                hw = partition.high_watermark
                # answered at once: the follower has to truncate
                return ReadResult(0, b"", 0, hw, hw, partition.log_start_offset, None, partition.log_end_offset,
                                  {"epoch": epoch, "end_offset": end})
        code = partition.update_follower_fetch_state(params.replica_id, fetch_offset) \
            if 0 <= fetch_offset <= partition.log_end_offset else 0
        if code:
            return _error_data(code)
        if targets is not None:
            targets.add(partition)
        max_bytes = min(max(p["partition_max_bytes"], 0), budget.limit)
        res = partition.read_records_for_follower(fetch_offset, max_bytes, budget.min_one)
        if res.size:
            budget.take(res.size)
        return res

    def _read_from_log(self, params: FetchParams, wanted: list, targets: Optional[set]) -> _ReadPass:
        """One pass over ``wanted`` [(key, topic, topic id, fields)] under a fresh budget."""
        budget = _Budget(params.max_bytes)
        datas = []
        errored = False
        read = self.read_partition
        for _key, topic, tid, fields in wanted:
            d = read(params, budget, topic, tid, fields, targets)
            datas.append(d)
            errored = errored or d.error != 0 or d.diverging_epoch is not None
        return _ReadPass(datas, budget, errored)

    def outside_isr(self, topic: str, partition: int, follower: int) -> bool:
        """Whether ``follower`` fetches a partition led here whose ISR does not hold it yet: its
        fetch session reads that partition at every fetch (FetchSession.out_of_isr), from the
        full fetch that creates the session on, so that an ISR expansion the controller refused
        (a restarted follower not registered yet: INELIGIBLE_REPLICA) is asked again within a
        fetch, not at the next sweep, as Kafka, which reads every partition of a follower's
        session."""
        part = self.partitions.get((topic, partition))
        return part is not None and part.is_leader and follower not in part.isr

    async def fetch_messages(self, params: FetchParams, wanted: list) -> list:
        """A sessionless or full fetch of ``wanted`` [(key, topic, topic id, fields)]: one
        :class:`ReadResult` each, in order, after the long poll (cluster/delayed.py)
        when fewer than ``min_bytes`` were there and no partition errored."""
        targets: set = set()
        first = self._read_from_log(params, wanted, targets)
        if params.max_wait_ms > 0 and first.budget.total < params.min_bytes and not first.errored and targets:
            min_bytes = params.min_bytes
            first = await delayed_fetch(
                lambda t: self._read_from_log(params, wanted, t), first, targets, params.max_wait_ms,
                lambda r: r.budget.total >= min_bytes or r.errored)
        return first.datas

    async def fetch_session_messages(self, params: FetchParams, s: FetchSession,
                                     still_cached: Callable[[], bool]) -> dict:
        """An incremental fetch on session ``s`` (already updated with the request's
        partitions): reads the named, dirty, lagging and errored partitions (all of them every
        FULL_SWEEP_S), waits for more (cluster/delayed.py) unless one must be answered at once,
        and returns {key: (cached partition, ReadResult)} of the partitions Kafka would
        list."""
        now = trio.current_time()
        if now - s.last_sweep >= FULL_SWEEP_S:
            s.last_sweep = now
            to_read = set(s.partitions)
        else:
            to_read = s.dirty | s.lagging | s.errored | s.named | s.out_of_isr
        s.dirty = set()
        s.lagging = set()
        budget = _Budget(params.max_bytes)
        out: dict = {}
        metadata = self.metadata
        read_partition = self.read_partition
        follower = params.replica_id

        def read(keys: Iterable) -> bool:
            """Read ``keys`` into ``out``; whether the request can be answered now."""
            ready = False
            for cp in sorted((s.partitions[k] for k in keys if k in s.partitions), key=lambda c: c.seq):
                if cp.topic is None:
                    info = metadata.by_id.get(cp.topic_id)   # Kafka's maybeResolveUnknownName
                    if info is not None:
                        cp.topic = info.name
                s.attach(self, cp)
                d = read_partition(params, budget, cp.topic, cp.topic_id, cp.fields, None)
                key = cp.key
                if follower >= 0 and cp.topic is not None:
                    if self.outside_isr(cp.topic, cp.fields["partition"], follower):
                        s.out_of_isr.add(key)
                    else:
                        s.out_of_isr.discard(key)
                if d.error:
                    s.errored.add(key)
                else:
                    s.errored.discard(key)
                # (a partition listed by an earlier read of this request stays listed: what made
                # it listable is already remembered as told)
                if cp.must_list(d) or key in out:
                    out[key] = (cp, d)
                    # errors and divergence answer at once (Kafka's errorReadingData /
                    # hasDivergingEpoch); anything else waits for min_bytes, a follower's too: a
                    # new high watermark alone completes no fetch (Kafka's DelayedFetch since
                    # KAFKA-9952), it goes out with the next data or when max_wait_ms ends.
                    # Answering it at once doubled the followers' requests under acks=all load,
                    # and a follower busy with that extra round trip was not parked when the
                    # next batch came (compat/bench/results/bench-cluster-acks-all-hw.md)
                    ready = ready or d.error != 0 or d.diverging_epoch is not None
                if d.end > cp.fields["fetch_offset"] and not d.error:
                    s.lagging.add(key)   # more to give: read again next time even if nothing wakes it
                else:
                    s.lagging.discard(key)
            return ready or budget.total >= params.min_bytes

        if not read(to_read) and params.max_wait_ms > 0 and s.partitions:
            await delayed_session_fetch(s, read, params.max_wait_ms, still_cached)
        return out

    # ------------------------------------------------------------------ start-up
    def add_leadership_listener(self, callback: Callable[[str, int, bool, int], None]) -> None:
        """``callback(topic, partition, is_leader, leader_epoch)`` when a local replica becomes
        leader (True) or stops leading (False).  Sync; it must not raise."""
        self._leadership_listeners.append(callback)

    def _is_local(self, state: Optional[PartitionState]) -> bool:
        return state is not None and self.node_id in state.replicas

    async def startup(self, nursery: trio.Nursery) -> None:
        """Wrap the logs the LogManager opened (its ``startup`` ran first) and make each local
        replica leader or follower as the metadata says."""
        lm = self.log_manager
        self._nursery = nursery
        self._hooks = PartitionHooks(lm.on_storage_error, lm.request_checkpoint,
                                     lm.delete_below_log_start, nursery.start_soon,
                                     self._alter_isr if self.controller is not None else None)
        meta = self.metadata
        for info in list(meta.topics.values()):
            cfg = meta.effective_config(info.name)
            for p in info.partition_ids():
                tp = (info.name, p)
                state = meta.partition_state(info.name, p)
                if state is None or self.node_id not in state.replicas:   # not a local replica
                    continue
                lg = lm.get_log(*tp)
                if lm.is_online(tp) and lg is not None:   # (an online dir's partition has its log)
                    part = self.partitions[tp] = self._partition(info, p, lg, cfg)
                    self._started(part)
                else:
                    self.partitions[tp] = OfflinePartition(info.name, info.topic_id, p, cfg, state=state)
        self._report_offline([tp for tp, part in self.partitions.items() if part.offline])
        if self.config is not None and self.controller is not None:
            nursery.start_soon(self._isr_shrink_loop)

    def _partition(self, info: TopicInfo, p: int, lg: Log, cfg: dict) -> Partition:
        assert self._hooks is not None, "partitions are created from startup() on"
        state = self.metadata.partition_state(info.name, p)
        assert state is not None   # callers checked it names this node
        return Partition(info.name, info.topic_id, p, lg, cfg, hooks=self._hooks, state=state, node_id=self.node_id)

    def _started(self, part: Partition) -> None:
        """A new local replica: a follower starts fetching, a leader is announced."""
        if part.is_leader:
            self._notify_leadership(part, True)
        elif part.leader_id >= 0:
            self._add_to_fetcher(part)

    # ------------------------------------------------------------------ leader / follower
    def _on_partition_change(self, topic: str, partition: int, state: PartitionState) -> None:
        """The controller published a new state (Kafka's LeaderAndIsr).  Sync: the work that
        needs an await (creating or deleting a replica) is spawned."""
        tp = (topic, partition)
        part = self.partitions.get(tp)
        if part is None:
            if self._is_local(state) and self._nursery is not None and self.metadata.get(topic) is not None:
                self._nursery.start_soon(self._add_replica, topic, partition)
            return
        if not self._is_local(state):
            if self._nursery is not None:
                self._nursery.start_soon(self._remove_replica, tp)
            return
        if isinstance(part, OfflinePartition) or state.partition_epoch <= part.partition_epoch:
            return   # already applied (or our own ISR change reported back)
        self.become_leader_or_follower(part, state)

    def become_leader_or_follower(self, part: Partition, state: PartitionState) -> None:
        tp = (part.topic, part.partition_id)
        if state.leader == self.node_id:
            if part.make_leader(state):
                self._remove_from_fetcher(tp)
                log.info("%s: leader at epoch %d, ISR %s", part, part.leader_epoch, part.isr)
                self._notify_leadership(part, True)
        else:
            was_leader = part.is_leader
            if part.make_follower(state):
                self._remove_from_fetcher(tp)
                if state.leader >= 0:
                    self._add_to_fetcher(part)
                log.info("%s: follower of %d at epoch %d", part, state.leader, state.leader_epoch)
            if was_leader:
                self._notify_leadership(part, False)

    def _notify_leadership(self, part: Partition | OfflinePartition, is_leader: bool) -> None:
        for cb in self._leadership_listeners:
            try:
                cb(part.topic, part.partition_id, is_leader, part.leader_epoch)
            except Exception:
                log.exception("leadership listener failed for %s", part)

    async def _add_replica(self, topic: str, partition: int) -> None:
        info = self.metadata.get(topic)
        if info is not None:
            await self.make_partitions(info, [partition])

    async def _remove_replica(self, tp: tuple[str, int]) -> None:
        """StopReplica(delete=true): this node is no longer a replica of ``tp``."""
        part = self.partitions.pop(tp, None)
        if part is None:
            return
        self._remove_from_fetcher(tp)
        if part.is_leader:
            self._notify_leadership(part, False)
        part.mark_deleted()
        await self.log_manager.delete_logs([tp])

    # ------------------------------------------------------------------ fetchers
    def _listener_name(self) -> str:
        """Kafka's inter-broker listener: ``inter.broker.listener.name``, else the listener named
        after ``security.inter.broker.protocol`` (PLAINTEXT by default); pykbroker falls back to
        the first listener when there is no such name."""
        if self.config is None:
            return "PLAINTEXT"
        return inter_broker_listener(self.config).name

    def _address_of(self, broker_id: int) -> Optional[tuple[str, int]]:
        reg = self.metadata.broker(broker_id)
        if reg is None:
            return None
        assert self._fetcher_config is not None   # asked only by fetchers, built with it
        e = reg.endpoint(self._fetcher_config.listener_name)
        return (e.host, e.port) if e is not None else None

    def _add_to_fetcher(self, part: Partition) -> None:
        src = part.leader_id
        f = self._fetchers.get(src)
        if f is None:
            # imported by the first follower: a single node never fetches, so its start-up
            # does not pay for the fetcher (tests/install/test_startup_imports.py)
            from .replica_fetcher import FetcherConfig, ReplicaFetcher
            fc = self._fetcher_config
            if fc is None:
                fc = self._fetcher_config = FetcherConfig(self.config, self._listener_name(), self.node_id,
                                                          self.interbroker_versions, self.interbroker_security)
            f = self._fetchers[src] = ReplicaFetcher(self.node_id, src, self._address_of, fc)
            assert self._nursery is not None, "followers are made from startup() on"
            self._nursery.start_soon(f.run)
        tp = (part.topic, part.partition_id)
        f.add_partition(part)
        self._fetcher_of[tp] = src

    def _remove_from_fetcher(self, tp: tuple[str, int]) -> None:
        src = self._fetcher_of.pop(tp, None)
        if src is not None and src in self._fetchers:
            self._fetchers[src].remove_partition(tp)

    def fetcher_of(self, tp: tuple[str, int]) -> Optional[ReplicaFetcher]:
        """The ReplicaFetcher copying ``tp`` (tests, introspection), or None."""
        src = self._fetcher_of.get(tp)
        return self._fetchers.get(src) if src is not None else None

    # ------------------------------------------------------------------ ISR
    def _alter_isr(self, part: Partition, new_isr: list) -> None:
        assert self._nursery is not None   # the hook is handed to partitions by startup()
        self._nursery.start_soon(self._send_alter_isr, part, list(new_isr))

    async def _send_alter_isr(self, part: Partition, new_isr: list) -> None:
        new = None
        assert self.controller is not None   # the hook is installed only with a controller
        try:
            new = await self.controller.alter_partition(part.topic, part.partition_id,
                                                        part.partition_epoch, isr=new_isr)
            log.info("%s: ISR now %s (partition epoch %d)", part, list(new.isr), new.partition_epoch)
        except KafkaError as e:
            # INVALID_UPDATE_VERSION: a newer state is on its way through the listener; other
            # errors (controller unavailable): the next fetch / shrink check asks again
            log.info("%s: ISR change to %s refused: %s", part, new_isr, ErrorCode(e.code).name)
        except Exception:
            log.exception("%s: ISR change to %s failed", part, new_isr)
        finally:
            part.isr_change_done(new)

    async def _isr_shrink_loop(self) -> None:
        """Kafka's isr-expiration task: every half replica.lag.time.max.ms."""
        assert self.config is not None   # started by startup() only with a config
        lag_s = self.config["replica.lag.time.max.ms"] / 1000.0
        while True:
            await trio.sleep(max(lag_s / 2, 0.01))
            for part in list(self.partitions.values()):
                if part.is_leader and len(part.isr) > 1:
                    part.maybe_shrink_isr(lag_s)

    def _on_dir_offline(self, d: str, tps: Iterable[tuple[str, int]]) -> None:
        gone = []
        for tp in tps:
            part = self.partitions.get(tp)
            if part is not None:
                part.mark_offline()
                gone.append(tp)
        self._report_offline(gone)

    def _report_offline(self, tps: list[tuple[str, int]]) -> None:
        if tps and self.on_replicas_offline is not None:
            self.on_replicas_offline(tps)

    def _on_log_replaced(self, tp: tuple[str, int], new_log: Log) -> None:
        """A move between log dirs finished (LogManager.alter_log_dir): the partition now
        appends to and reads from the log in its new dir."""
        part = self.partitions.get(tp)
        if part is not None:
            part.log = new_log

    # ------------------------------------------------------------------ topic changes
    async def make_partitions(self, topic_info: TopicInfo, partition_ids: Iterable[int]) -> None:
        """Create the local replicas (this node in the staged state's replicas) of new
        partitions, each leader or follower as the state says; their logs are made in one
        batch (LogManager.create_logs)."""
        cfg = self.metadata.effective_config(topic_info.name)
        todo = [p for p in partition_ids
                if (topic_info.name, p) not in self.partitions
                and self._is_local(self.metadata.partition_state(topic_info.name, p))]
        if not todo:
            return
        logs, error = await self.log_manager.create_logs(topic_info.name, todo, cfg)
        made = []
        for p, lg in logs:
            tp = (topic_info.name, p)
            if tp in self.partitions:
                continue   # created concurrently (a listener's replica addition)
            part = self.partitions[tp] = self._partition(topic_info, p, lg, cfg)
            self._started(part)
            made.append(tp)
        if error is not None:
            # all or nothing: the caller rolls the creation back, so the replicas made here
            # must not outlive it (a creation made again would find them with the old topic id)
            await self._drop_partitions(made)
            raise error

    async def delete_partitions(self, topic_info: TopicInfo) -> None:
        await self._drop_partitions([tp for tp in self.partitions if tp[0] == topic_info.name])

    async def _drop_partitions(self, doomed: list[tuple[str, int]]) -> None:
        """Stop serving ``doomed`` and delete their logs."""
        for tp in doomed:
            self._remove_from_fetcher(tp)
            part = self.partitions.pop(tp)
            if part.is_leader:
                self._notify_leadership(part, False)
            part.mark_deleted()
        await self.log_manager.delete_logs(doomed)

    def on_config_change(self, topic_info: TopicInfo) -> None:
        cfg = self.metadata.effective_config(topic_info.name)
        self.log_manager.update_config(topic_info.name, cfg)
        for part in self.partitions_of(topic_info.name):
            part.update_config(cfg)

