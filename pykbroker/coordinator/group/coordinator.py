"""The group coordinator: owner of every group and every committed offset on this broker.

- Groups (classic, and KIP-848 consumer groups) live in ``self.groups``; only coordinator code
  mutates them, synchronously between awaits.  Handlers call in, get an answer or a
  :class:`~.classic.Future` to await.
- Committed offsets live in ``self.offsets[group][(topic, partition)]`` and are made durable as
  records in ``__consumer_offsets`` (see :mod:`.offsets`).  Writes go through the coordinator
  runtime (:mod:`..runtime`): one writer per partition appends in request order, and a change is
  applied to the in-memory cache only once its batch is committed (high watermark), so an
  OffsetFetch never returns an offset that a crash or a leader change could lose.
- Each partition of ``__consumer_offsets`` is a runtime shard: its groups and offsets are rebuilt
  by replaying the partition when this broker becomes its leader (:meth:`on_become_leader`) and
  dropped when it resigns (:meth:`on_resign`).  A group request answers NOT_COORDINATOR for a
  shard not loaded here and COORDINATOR_LOAD_IN_PROGRESS while it loads.  A single broker leads
  every partition: it loads them all at start-up (before listeners open, so clients never see
  the load) and when it creates the topic.
- ``__consumer_offsets`` is created on first use (FindCoordinator / first group request), as
  Kafka does, so a broker that never sees a group never shows the internal topic.
- Offsets expire after ``offsets.retention.minutes`` (checked every
  ``offsets.retention.check.interval.ms``): for a group with a protocol, counted from when it
  became Empty; for a standalone group (no protocol), from the commit time.  A group left Empty
  with no offsets is then removed (Dead), as Kafka does; so is an empty KIP-848 group.
- KIP-848 groups are persisted and replayed by :mod:`.consumer` (records in
  :mod:`.consumer_records`), classic and consumer records side by side in the same partitions.
- Transactional offsets (TxnOffsetCommit, KIP-98/447): written as a transactional batch of the
  producer, kept in ``pending_txn_offsets[producer id][group]`` and never returned by OffsetFetch;
  the transaction coordinator's marker (:meth:`complete_transaction`, a control batch written in
  order with the shard's other writes) materializes them on COMMIT or drops them on ABORT.  A
  reload replays the same: transactional records stay pending until their marker is read.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Iterable, Optional

import trio

from ...protocol.errors import ErrorCode as E, KafkaError
from ...protocol.records import parse_header
from ...storage.log_validator import internal_validated, validate_produce_records
from ..internal_log import InternalTopicLog
from ..runtime import CoordinatorRuntime
from ..service import CoordinatorService
from . import offsets as O
from .classic import DEAD, EMPTY, ClassicGroup, Future
from .timer import Timer

if TYPE_CHECKING:   # built on first use (see __init__)
    from .consumer import ConsumerGroupManager
    from .modern import ModernGroup
    from .share import ShareGroupManager
    from .streams import StreamsGroupManager


def _wall_ms() -> int:
    return int(time.time() * 1000)

log = logging.getLogger("pykbroker.group")

# Kafka's offset.metadata.max.bytes default (commit metadata longer than this is refused).
OFFSET_METADATA_MAX_BYTES = 4096


def append_error_to_response(code: int) -> int:
    """The error a group-metadata append failure is answered with (Kafka's
    appendGroupMetadataErrorToResponseError): replication/timeouts mean the coordinator is not
    available, a lost leadership or storage failure that this broker no longer coordinates,
    size errors are server errors; anything else as is."""
    code = int(code)
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                E.REQUEST_TIMED_OUT):
        return int(E.COORDINATOR_NOT_AVAILABLE)
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return int(E.NOT_COORDINATOR)
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return int(E.UNKNOWN_SERVER_ERROR)
    return code


class GroupCoordinator(CoordinatorService):
    # __consumer_offsets at creation (compacted, internal)
    REPLICATION_FACTOR_CONFIG = "offsets.topic.replication.factor"
    SEGMENT_BYTES_CONFIG = "offsets.topic.segment.bytes"

    """Handed its dependencies: ``config`` (key -> value), ``metadata`` (topic lookups for KIP-848
    subscriptions) and ``log``, the ``__consumer_offsets`` backend (:class:`BrokerOffsetsLog`, or
    :class:`MemoryOffsetsLog` in unit tests; may also be given to :meth:`startup`).
    ``leads_every_partition``: a single broker, leader of every ``__consumer_offsets`` partition,
    loads them all itself; with a controller (False) its leadership events call
    :meth:`on_become_leader` / :meth:`on_resign`.  ``group_configs``: the GROUP configs
    (``override(group_id, name, default)``)."""

    def __init__(self, config: Any, metadata: Any = None, log: Any = None, leads_every_partition: bool = True,
                 clock: Any = None, group_configs: Any = None) -> None:
        super().__init__(config, log, leads_every_partition, config["offsets.topic.num.partitions"])
        # the groups' dynamic configs (pykbroker/config/group.py GroupConfigView; None in unit
        # tests): session timeouts and heartbeat intervals per group
        self.group_configs = group_configs
        # the broker's clock (pykbroker/clock.py): commit / state timestamps and offsets expiry
        # (its timer runs on trio's clock, which is the same clock in a broker)
        self.now_ms = clock.time_ms if clock is not None else _wall_ms
        self.metadata = metadata
        self.timer = Timer()
        self.groups: dict = {}
        self.offsets: dict[str, dict[tuple[str, int], O.OffsetAndMetadata]] = {}
        self.initial_rebalance_delay_ms = self.config["group.initial.rebalance.delay.ms"]
        self.min_session_timeout_ms = self.config["group.min.session.timeout.ms"]
        self.max_session_timeout_ms = self.config["group.max.session.timeout.ms"]
        self.group_max_size = self.config["group.max.size"]
        self.retention_ms = self.config["offsets.retention.minutes"] * 60000
        self.retention_check_s = self.config["offsets.retention.check.interval.ms"] / 1000.0
        self.expiry_passes = 0   # periodic offset-expiry passes finished (for logs and tests)
        # KIP-848 consumer groups (consumer.py), KIP-932 share groups (share.py) and KIP-1071
        # streams groups (streams.py): each manager is built, and its module imported, by its
        # first use (a group of that type loaded from __consumer_offsets, or a request): a broker
        # answers its first request without them (start-up time; streams' record codecs alone
        # were compiled at import).
        self._consumer: ConsumerGroupManager | None = None
        self._share: ShareGroupManager | None = None
        self._streams: StreamsGroupManager | None = None
        # streams groups create their internal topics: the controller's create_topic (set by the
        # broker; None in unit tests) and a spawn function on the coordinator's nursery
        self.topic_creator: Callable[..., Awaitable[Any]] | None = None
        self.spawn: Any = None   # nursery.start_soon once started
        # producer id -> group -> (topic, partition) -> offset, until the transaction completes
        self.pending_txn_offsets: dict[int, dict[str, dict[tuple[str, int], O.OffsetAndMetadata]]] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    async def startup(self, nursery: trio.Nursery, backend: Any = None) -> None:
        if backend is not None:
            self.log = backend
        self.spawn = nursery.start_soon
        # every group write waits at most offsets.commit.timeout.ms to be committed (Kafka 4.4's
        # GroupCoordinatorService builds its runtime withWriteTimeout(offsetCommitTimeoutMs));
        # the OffsetCommit then answers COORDINATOR_NOT_AVAILABLE (REQUEST_TIMED_OUT mapped by
        # append_error_to_response, Kafka's CoordinatorOperationExceptionHelper; 3.9's
        # ZooKeeper-mode GroupMetadataManager passed REQUEST_TIMED_OUT through as is)
        self.runtime = CoordinatorRuntime(O.OFFSETS_TOPIC, self.log, lambda p: GroupShard(self, p), nursery,
                                          now_ms=self.now_ms,
                                          write_timeout_ms=self.config_value("offsets.commit.timeout.ms", None))
        nursery.start_soon(self.timer.run)
        nursery.start_soon(self._expiry_loop)
        await self._load_existing_topic()

    @property
    def consumer(self) -> ConsumerGroupManager:
        """The KIP-848 consumer groups' manager, built on first use (see ``__init__``)."""
        if self._consumer is None:
            from .consumer import ConsumerGroupManager
            self._consumer = ConsumerGroupManager(self)
        return self._consumer

    @property
    def share(self) -> ShareGroupManager:
        """The share groups' manager (KIP-932), built on first use (see ``__init__``)."""
        if self._share is None:
            from .share import ShareGroupManager
            self._share = ShareGroupManager(self)
        return self._share

    @property
    def streams(self) -> StreamsGroupManager:
        """The streams groups' manager (KIP-1071), built on first use (see ``__init__``)."""
        if self._streams is None:
            from .streams import StreamsGroupManager
            self._streams = StreamsGroupManager(self)
        return self._streams

    def _log_loaded(self, seconds: float) -> None:
        n_members = sum(len(g.members) for g in self.groups.values() if g.kind == "consumer")
        log.info("loaded %d group(s) (%d KIP-848 member(s)) and offsets of %d group(s) from %s in %.3fs",
                 len(self.groups), n_members, len(self.offsets), O.OFFSETS_TOPIC, seconds)

    async def shutdown(self) -> None:
        for g in list(self.groups.values()):
            if isinstance(g, ClassicGroup):
                g.cancel_timers()


    def partition_for(self, group_id: str) -> int:
        return O.partition_for(group_id, self.num_partitions)

    def coordinator_error(self, group_id: str) -> int:
        """0 if this broker coordinates the group (its offsets partition is loaded here), else
        NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while that partition loads."""
        if not self._topic_ready:
            return 0
        assert self.runtime is not None     # set in startup, before the topic is ready
        return self.runtime.status(self.partition_for(group_id))

    def is_coordinator_for(self, group_id: str) -> bool:
        return self.coordinator_error(group_id) == 0

    # -- groups ------------------------------------------------------------------------------
    def get_group(self, group_id: str) -> Any:
        g = self.groups.get(group_id)
        if g is not None and g.state == DEAD:
            return None
        return g

    def get_or_create_classic(self, group_id: str) -> ClassicGroup:
        g = self.get_group(group_id)
        if g is None:
            g = ClassicGroup(self, group_id)
            self.groups[group_id] = g
        return g

    def persist_group(self, group: ClassicGroup, assignment: dict | None = None,
                      on_complete: Optional[Callable[[int], None]] = None) -> None:
        """Append the group's metadata (called by the state machine on generation changes).

        ``assignment`` (member id -> bytes) overrides the members' current assignments in the
        record (SyncGroup writes the leader's new assignment before applying it);
        ``on_complete(code)`` runs on the writer task once the append is done, with 0 or the
        error mapped as Kafka maps group-metadata append errors for the response."""
        if not self._topic_ready:
            if on_complete is not None:
                on_complete(0)
            return
        rec = (O.group_key(group.group_id), O.group_value(group, assignment))
        self._enqueue(self.partition_for(group.group_id), [rec], None, None, on_complete)

    def group_became_empty(self, group: ClassicGroup) -> None:
        pass

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id))

    def delete_group(self, group_id: str) -> Future:
        """DeleteGroups for one group: only an Empty (or Dead) group with no members."""
        g = self.get_group(group_id)
        if g is None:
            return Future(int(E.GROUP_ID_NOT_FOUND), done=True)
        if g.state != EMPTY or g.members:
            return Future(int(E.NON_EMPTY_GROUP), done=True)
        return self._remove_group(g)

    def _remove_group(self, g: Any) -> Future:   # a group of any kind
        if isinstance(g, ClassicGroup):
            g.cancel_timers()
        g.state = DEAD
        self.groups.pop(g.group_id, None)
        gid = g.group_id
        recs = [(O.offset_key(gid, t, p), None) for (t, p) in self.offsets.get(gid, {})]
        if g.kind == "consumer":
            recs += self.consumer.tombstones(g)
        elif g.kind == "share":
            recs += self.share.tombstones(g)
        elif g.kind == "streams":
            recs += self.streams.tombstones(g)
        else:
            recs.append((O.group_key(gid), None))
        fut = Future()

        def done() -> None:
            self.offsets.pop(gid, None)
        self._enqueue(self.partition_for(gid), recs, fut, done)
        return fut

    # -- offsets -----------------------------------------------------------------------------
    def validate_commit(self, group_id: str, generation: int, member_id: Optional[str], instance_id: Optional[str],
                        transactional: bool = False, commit_version: Optional[int] = None) -> tuple[int, Any]:
        """Kafka's checks for an OffsetCommit (``transactional``: a TxnOffsetCommit) against a
        classic group, in Kafka's order.  ``commit_version``: the OffsetCommit request's version
        (None for a TxnOffsetCommit).  Returns (error code or 0, group)."""
        g = self.get_group(group_id)
        if g is None:
            if generation < 0:
                # Not using group management (assign + commit): Kafka keeps these offsets under
                # an Empty group with no protocol.
                return 0, self.get_or_create_classic(group_id)
            if commit_version is not None and commit_version >= 9:
                # Kafka 4.x's OffsetCommit v9+ names the missing group (both protocols' clients
                # handle it); older versions keep the old answer below
                return E.GROUP_ID_NOT_FOUND, None
            # A generation for a group that does not exist: an old generation.
            return E.ILLEGAL_GENERATION, None
        if g.kind == "consumer":
            return self.consumer.validate_commit(g, generation, member_id, instance_id), g
        if g.kind == "streams":
            return self.streams.validate_commit(g, generation, member_id, instance_id), g
        if g.kind == "share":
            # Kafka's ShareGroup.validateOffsetCommit: a share group keeps no committed offsets
            # ("Group %s is not a consumer group.")
            return E.GROUP_ID_NOT_FOUND, g
        if generation < 0 and g.state == EMPTY:
            # Admin client or assign() consumer committing for an empty group.
            return 0, g
        if generation >= 0 or member_id or instance_id is not None:
            # Member identity first, then the generation, then the state (Kafka's order): an
            # unknown member committing during CompletingRebalance learns it is unknown.
            err = g._validate_member(member_id, instance_id)
            if err:
                return err, g
            if generation != g.generation:
                return E.ILLEGAL_GENERATION, g
        elif g.state != EMPTY:
            # No member id and no generation (v0-style) only commits for an empty group.
            return E.UNKNOWN_MEMBER_ID, g
        if transactional:
            # Kafka's ClassicGroup.validateOffsetCommit leaves the group state out for a
            # transactional commit (a producer commits for the generation it read in, whatever
            # the group does meanwhile), and only OffsetCommit counts as a heartbeat.
            return 0, g
        if g.state == "CompletingRebalance":
            # A member of this generation that has not got its assignment yet: it handles
            # REBALANCE_IN_PROGRESS gracefully (Kafka's answer too).
            return E.REBALANCE_IN_PROGRESS, g
        if member_id in g.members:
            g._schedule_heartbeat(g.members[member_id])  # a commit counts as a heartbeat, as in Kafka
        return 0, g

    def commit(self, group_id: str, entries: dict[tuple[str, int], O.OffsetAndMetadata]) -> Future:
        recs = [(O.offset_key(group_id, t, p), O.offset_value(om)) for (t, p), om in entries.items()]
        fut = Future()

        def done() -> None:
            self.offsets.setdefault(group_id, {}).update(entries)
        if not recs:
            fut.set(0)
            return fut
        # OffsetCommit answers an append failure as Kafka's coordinator maps it (a write refused or
        # failed for min.insync.replicas: COORDINATOR_NOT_AVAILABLE, which the client retries)
        self._enqueue(self.partition_for(group_id), recs, None, done, on_complete=fut.set)
        return fut

    # -- transactional offsets ----------------------------------------------------------------
    def txn_commit(self, group_id: str, producer_id: int, producer_epoch: int,
                   entries: dict[tuple[str, int], O.OffsetAndMetadata]) -> Future:
        """TxnOffsetCommit: write the offsets as a transactional batch of the producer; once
        committed they are pending until the transaction's marker."""
        recs = [(O.offset_key(group_id, t, p), O.offset_value(om)) for (t, p), om in entries.items()]
        fut = Future()
        if not recs:
            fut.set(0)
            return fut

        def complete(code: int) -> None:
            if code == 0:
                self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {}).update(entries)
            fut.set(append_error_to_response(code) if code else 0)
        assert self.runtime is not None     # set in startup
        self.runtime.write(self.partition_for(group_id), recs, complete, producer_id=producer_id,
                           producer_epoch=producer_epoch, transactional=True)
        return fut

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool) -> Future:
        """The transaction coordinator's marker for ``__consumer_offsets``-``partition`` (Kafka's
        completeTransaction): the control batch is written after every earlier write of the
        shard; once committed the producer's pending offsets of this partition's groups are
        materialized (commit) or dropped (abort)."""
        fut = Future()

        def complete(code: int) -> None:
            if code == 0:
                self.apply_txn_end(partition, producer_id, commit)
            fut.set(int(code))
        assert self.runtime is not None     # set in startup
        self.runtime.write_marker(partition, producer_id, producer_epoch, commit, complete)
        return fut

    def apply_txn_end(self, partition: int, producer_id: int, commit: bool) -> None:
        groups = self.pending_txn_offsets.get(producer_id)
        if not groups:
            return
        for gid in [g for g in groups if self.partition_for(g) == partition]:
            entries = groups.pop(gid)
            if commit and entries:
                self.offsets.setdefault(gid, {}).update(entries)
                if self.get_group(gid) is None:
                    self.get_or_create_classic(gid)  # offsets live under a group, as for commits
        if not groups:
            del self.pending_txn_offsets[producer_id]

    def has_pending_txn_offset(self, group_id: str, tp: tuple[str, int]) -> bool:
        for groups in self.pending_txn_offsets.values():
            g = groups.get(group_id)
            if g and tp in g:
                return True
        return False

    def fetch_offsets(self, group_id: str, partitions: Optional[Iterable[tuple[str, int]]] = None) -> dict:
        """Committed offsets of a group (all of them when ``partitions`` is None)."""
        committed = self.offsets.get(group_id, {})
        if partitions is None:
            return dict(committed)
        return {tp: committed.get(tp) for tp in partitions}

    def delete_offsets(self, group_id: str, tps: Iterable[tuple[str, int]]) -> Future:
        committed = self.offsets.get(group_id, {})
        present = [tp for tp in tps if tp in committed]
        recs = [(O.offset_key(group_id, t, p), None) for t, p in present]
        fut = Future()

        def done() -> None:
            for tp in present:
                committed.pop(tp, None)
        if not recs:
            fut.set(0)
            return fut
        self._enqueue(self.partition_for(group_id), recs, fut, done)
        return fut

    def on_topic_deleted(self, name: str) -> int:
        """A topic was deleted: as Kafka's onPartitionsDeleted, every group's committed offsets
        for its partitions are removed (tombstones in __consumer_offsets), so a topic created
        again under the same name starts without stale positions.  Returns how many."""
        n = 0
        for gid, committed in list(self.offsets.items()):
            tps = [tp for tp in committed if tp[0] == name]
            if tps:
                n += len(tps)
                # Gone from the cache at once (the topic no longer exists, so no fetch may
                # return them); the tombstones follow on the writer, ahead of any later commit.
                for tp in tps:
                    committed.pop(tp, None)
                self._enqueue(self.partition_for(gid), [(O.offset_key(gid, t, p), None) for t, p in tps],
                              None, None)
        if n:
            log.info("topic %s deleted: removing %d committed offset(s)", name, n)
        return n

    # -- the log -----------------------------------------------------------------------------
    def _enqueue(self, partition: int, recs: list, fut: Optional[Future], done: Optional[Callable[[], None]],
                 on_complete: Optional[Callable[[int], None]] = None) -> None:
        """Write ``recs`` to the partition through the runtime; once committed, ``done()`` applies
        the change to the cache; ``fut`` gets the code, ``on_complete`` the code as Kafka maps
        group-metadata append errors for the response."""
        def complete(code: int) -> None:
            if code == 0 and done is not None:
                done()
            if fut is not None:
                fut.set(int(code))
            if on_complete is not None:
                on_complete(append_error_to_response(code))
        assert self.runtime is not None     # set in startup
        self.runtime.write(partition, recs, complete)

    def _drop_partition(self, partition: int) -> None:
        """Leadership of ``partition`` lost: forget its groups and offsets, stop their timers."""
        for gid in [gid for gid in self.groups if self.partition_for(gid) == partition]:
            g = self.groups.pop(gid)
            if isinstance(g, ClassicGroup):
                g.unload()
            else:
                for mid in g.members:
                    self.timer.cancel((g.timer_kind, gid, mid))
                g.state = DEAD
        for gid in [gid for gid in self.offsets if self.partition_for(gid) == partition]:
            del self.offsets[gid]
        for pid, groups in list(self.pending_txn_offsets.items()):
            for gid in [g for g in groups if self.partition_for(g) == partition]:
                del groups[gid]
            if not groups:
                del self.pending_txn_offsets[pid]

    def _restore_group(self, gid: str, lg: O.LoadedGroup) -> None:
        from .classic import Member, STABLE
        g = ClassicGroup(self, gid)
        g.generation = lg.generation
        g.protocol_type = lg.protocol_type or None
        g.protocol_name = lg.protocol
        g.leader = lg.leader
        if lg.state_timestamp >= 0:
            g.state_timestamp = lg.state_timestamp
        for lm in lg.members:
            m = Member(lm.member_id, lm.group_instance_id, lm.client_id, lm.client_host,
                       lm.rebalance_timeout_ms, lm.session_timeout_ms, g.protocol_type,
                       [(lg.protocol, lm.subscription)])  # type: ignore[list-item]  # set when it has members
            m.assignment = lm.assignment
            g.members[m.member_id] = m
            if m.group_instance_id is not None:
                g.static[m.group_instance_id] = m.member_id
        if g.members:
            # Members keep their generation across a coordinator restart: they resume with
            # heartbeats; those that never come back expire after their session timeout.
            g.state = STABLE
            for m in g.members.values():
                g._schedule_heartbeat(m)
        else:
            g.state = EMPTY
        self.groups[gid] = g

    # -- expiry ------------------------------------------------------------------------------
    async def _expiry_loop(self) -> None:
        while True:
            await trio.sleep(self.retention_check_s)
            try:
                self.expire_offsets(self.now_ms())
            except Exception:
                log.exception("offset expiry failed")
            self.expiry_passes += 1

    def expire_offsets(self, now_ms: int) -> int:
        """offsets.retention.minutes: returns how many offsets were expired."""
        expired = 0
        for gid in list(self.offsets):
            g = self.get_group(gid)
            committed = self.offsets[gid]
            doomed = []
            if g is not None and g.state != EMPTY:
                continue  # offsets of an active group never expire (KIP-211)
            for tp, om in committed.items():
                if om.expire_timestamp is not None:
                    dead = now_ms >= om.expire_timestamp
                else:
                    base = om.commit_timestamp
                    if g is not None and g.protocol_type:
                        base = max(g.state_timestamp, 0) or om.commit_timestamp
                    dead = now_ms - base >= self.retention_ms
                if dead:
                    doomed.append(tp)
            if doomed:
                expired += len(doomed)
                log.info("group %s: expiring %d committed offset(s)", gid, len(doomed))
                self.delete_offsets(gid, doomed)
                if len(doomed) == len(committed) and g is not None and not g.members:
                    self._remove_group(g)
        for gid, g in list(self.groups.items()):
            # An empty KIP-848 group without offsets is deleted (tombstones), as Kafka's periodic
            # group cleanup does; it would otherwise live forever in the log.
            if g.kind in ("consumer", "streams") and not g.members and not self.offsets.get(gid) and g.state != DEAD:
                log.info("%s group %s: empty with no offsets, deleting", g.kind, gid)
                self._remove_group(g)
        return expired


class GroupShard:
    """One partition of ``__consumer_offsets`` being loaded (the runtime's shard): records are
    replayed into local state, which becomes the coordinator's when the whole partition is read.
    A group lives in exactly one partition, so shards never share a group."""

    def __init__(self, gc: GroupCoordinator, partition: int) -> None:
        self.gc = gc
        self.partition = partition
        self.groups: dict[str, O.LoadedGroup | None] = {}
        self.consumer_groups: dict[str, dict] = {}  # KIP-848 groups, replayed by the consumer manager
        self.share_groups: dict[str, dict] = {}     # KIP-932 share groups, replayed by the share manager
        self.streams_groups: dict[str, dict] = {}   # KIP-1071 groups, replayed by the streams manager
        # a modern group record's family (its key's first element) -> the states it replays into
        self._modern = {"consumer": self.consumer_groups, "share": self.share_groups,
                        "streams": self.streams_groups}
        self.offsets: dict[str, dict] = {}
        self.last_seen: dict[tuple[str, str], int] = {}  # (kind, group) -> order of its last record
        self.seq = 0
        self.pending: dict[int, dict[str, dict]] = {}  # producer id -> group -> tp -> offset (open txns)

    def replay_transactional(self, producer_id: int, key: bytes, value: Optional[bytes]) -> None:
        k = O.parse_key(key)
        if k[0] != "offset":
            self.replay(key, value)  # only offsets are ever written transactionally
            return
        _, gid, topic, part = k
        if value is not None:
            self.pending.setdefault(producer_id, {}).setdefault(gid, {})[(topic, part)] = O.parse_offset_value(value)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        groups = self.pending.pop(producer_id, None)
        if commit and groups:
            for gid, entries in groups.items():
                self.offsets.setdefault(gid, {}).update(entries)

    def replay(self, key: bytes, value: Optional[bytes]) -> None:
        self.seq += 1
        k = O.parse_key(key)
        states = self._modern.get(k[0])
        if states is not None:
            # replayed by the family's manager (gc.consumer, gc.share, gc.streams); last_seen
            # tells loaded() which type a group id had last
            family, kind, gid, mid = k
            getattr(self.gc, family).replay(states, kind, gid, mid, bytes(key), value)
            self.last_seen[(family, gid)] = self.seq
        elif k[0] == "offset":
            _, gid, topic, part = k
            if value is None:
                self.offsets.get(gid, {}).pop((topic, part), None)
            else:
                self.offsets.setdefault(gid, {})[(topic, part)] = O.parse_offset_value(value)
        elif k[0] == "group":
            gid = k[1]
            self.groups[gid] = None if value is None else O.parse_group_value(value)
            self.last_seen[("classic", gid)] = self.seq

    def loaded(self) -> None:
        gc, last_seen = self.gc, self.last_seen
        g: ModernGroup | None       # a consumer, share or streams group in turn
        for pid, groups in self.pending.items():   # transactions still open: pending until their marker
            mine = gc.pending_txn_offsets.setdefault(pid, {})
            for gid, entries in groups.items():
                mine.setdefault(gid, {}).update(entries)
        for gid, committed in self.offsets.items():
            if committed:
                gc.offsets[gid] = committed
        for gid, lg in self.groups.items():
            if lg is None:
                continue
            if gid in self.consumer_groups and last_seen.get(("consumer", gid), 0) > last_seen[("classic", gid)]:
                continue  # converted to a consumer group after its last classic record
            gc._restore_group(gid, lg)
        for gid, st in self.consumer_groups.items():
            if gid in gc.groups and last_seen[("consumer", gid)] < last_seen.get(("classic", gid), 0):
                continue  # converted back to classic (Kafka tombstones first; be safe anyway)
            g = gc.consumer.finish_load(gid, st)
            if g is not None:
                gc.groups.pop(gid, None)
                gc.groups[gid] = g
        for gid, st in self.share_groups.items():
            g = gc.share.finish_load(gid, st)
            if g is not None:
                gc.groups[gid] = g
        for gid, st in self.streams_groups.items():
            if last_seen[("streams", gid)] < max(last_seen.get(("classic", gid), 0), last_seen.get(("consumer", gid), 0)):
                continue
            g = gc.streams.finish_load(gid, st)
            if g is not None:
                gc.groups.pop(gid, None)
                gc.groups[gid] = g
        for gid in self.offsets:
            if gid not in gc.groups and gc.offsets.get(gid):
                gc.get_or_create_classic(gid)

    def unloaded(self) -> None:
        self.gc._drop_partition(self.partition)


class BrokerOffsetsLog(InternalTopicLog):
    """``__consumer_offsets`` in this broker's own log: the runtime's PartitionWriter, over the
    metadata cache (partition count), the controller (topic creation) and the replica manager
    (the partitions)."""

    TOPIC = O.OFFSETS_TOPIC
    CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}

    async def append(self, partition: int, batch: bytes) -> int:
        """Append as the leader (honours the topic's flush settings like Produce does); returns
        the log end offset after the batch, for the runtime to wait for the high watermark."""
        p = self._leader_for_write(partition)
        now = int(time.time() * 1000)
        if parse_header(batch).producer_id >= 0:
            # a transactional offset commit: no sequence (the log checks the epoch only)
            if len(batch) > p.config["max.message.bytes"]:
                raise KafkaError(E.MESSAGE_TOO_LARGE)
            validated = internal_validated(batch)
        else:
            validated = validate_produce_records(batch, p.config["max.message.bytes"], now_ms=now)
        p.append_records_as_leader(validated, now)
        end = p.log_end_offset
        if p.needs_flush():
            await p.flush()
        return end

    async def append_end_txn_marker(self, partition: int, producer_id: int, producer_epoch: int,
                                    commit: bool, coordinator_epoch: int) -> int:
        p = self._leader_for_write(partition)
        offset = p.append_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch)
        if p.needs_flush():
            await p.flush()
        return offset + 1


class MemoryOffsetsLog:
    """An in-memory stand-in for unit tests (keeps batches; survives "restarts" if reused).
    Offsets count batches; the high watermark follows each append at once, as on one broker."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[bytes]] | None = None

    def exists(self) -> bool:
        return self.partitions is not None

    def num_partitions(self) -> int:
        assert self.partitions is not None  # asked once exists()
        return len(self.partitions)

    def leader_epoch(self, partition: int) -> int:
        return 0

    async def create(self, n: int, rf: int, segment_bytes: int, configs: dict | None = None) -> None:
        self.partitions = {i: [] for i in range(n)}

    async def append(self, partition: int, batch: bytes) -> int:
        await trio.sleep(0)
        assert self.partitions is not None  # created before the first append
        self.partitions[partition].append(batch)
        return len(self.partitions[partition])

    async def wait_for_high_watermark(self, partition: int, offset: int) -> None:
        pass

    async def read(self, partition: int) -> AsyncIterator[bytes]:
        assert self.partitions is not None  # read once exists()
        for b in self.partitions[partition]:
            yield b
