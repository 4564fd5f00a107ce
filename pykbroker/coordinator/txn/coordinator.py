"""The transaction coordinator (Kafka's TransactionCoordinator, transaction versions 1 and 2).

State: one :class:`TxnMetadata` per transactional id, held by the shard of its
``__transaction_state`` partition (:mod:`.state_log`), on the coordinator runtime like the group
coordinator: loaded by replaying the partition when this broker leads it, dropped when it resigns
(requests then get NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS).  Every state change is a
record written through the runtime and applied to memory only once committed (high watermark);
while it is in flight the id has a *pending* state and other requests for it answer
CONCURRENT_TRANSACTIONS, as in Kafka.

Transitions (Kafka's; TV1 unless said otherwise):
- InitProducerId: a new id gets a fresh producer id, epoch 0, state Empty.  A known id in
  Empty/CompleteCommit/CompleteAbort gets its epoch bumped (a new producer id once the epoch is
  exhausted), which fences the previous producer.  An id in Ongoing is fenced first: its epoch is
  bumped, its transaction aborted (PrepareAbort, markers, CompleteAbort) and the request answered
  CONCURRENT_TRANSACTIONS, so the client retries once the abort completed.  PrepareCommit /
  PrepareAbort answer CONCURRENT_TRANSACTIONS until the markers are written.  With a
  producer id/epoch in the request (KIP-360): a mismatching id is PRODUCER_FENCED; the current
  epoch is bumped; the last epoch (the one before the last bump, or before a transaction version
  2 EndTxn's bump, kept through Complete*) is a retry: the current epoch again, written as Empty;
  any other epoch is PRODUCER_FENCED.  A request without id/epoch (a new producer) forgets the
  last epoch, so an older incarnation's re-init is fenced rather than taken for a retry.  The
  last epoch is not in the log: after a load it is unknown (-1), as in Kafka, so a re-init
  across a coordinator move is fenced.
- AddPartitionsToTxn / AddOffsetsToTxn: the partitions join the transaction (state Ongoing, start
  time set when the transaction begins); partitions already in an Ongoing transaction answer at
  once without a write.
- EndTxn: Ongoing -> PrepareCommit/PrepareAbort is written, the client answered, then the
  COMMIT/ABORT markers are written to every partition of the transaction (to
  ``__consumer_offsets`` partitions through the group coordinator, which materializes the
  transactional offsets) and finally CompleteCommit/CompleteAbort.  A retried EndTxn after
  completion answers NONE; the wrong outcome is INVALID_TXN_STATE.
- Errors, in Kafka's order: unknown id or another producer id -> INVALID_PRODUCER_ID_MAPPING;
  another epoch -> PRODUCER_FENCED; pending transition or Prepare* -> CONCURRENT_TRANSACTIONS;
  EndTxn without a transaction -> INVALID_TXN_STATE; a timeout above
  ``transaction.max.timeout.ms`` -> INVALID_TRANSACTION_TIMEOUT.
- Timeouts: every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` an Ongoing
  transaction older than its ``transaction.timeout.ms`` is aborted with an epoch bump, so the
  producer is fenced (its next produce: INVALID_PRODUCER_EPOCH; its EndTxn: PRODUCER_FENCED).
- Expiry: every ``transaction.remove.expired.transaction.cleanup.interval.ms`` an id without an
  open transaction (Empty, CompleteCommit, CompleteAbort) not used for
  ``transactional.id.expiration.ms`` is removed (a tombstone), as Kafka does; the next
  InitProducerId for it starts afresh with a new producer id.
- Crash safety: markers are only written after Prepare* is durable; a shard loaded with an id in
  PrepareCommit/PrepareAbort writes the markers again and completes (markers are idempotent for
  the log: a second marker for a closed transaction changes nothing); an Ongoing one is aborted
  by the timeout.
- KIP-890 part 1: a transactional produce to a partition where the producer has no open
  transaction is verified here (:meth:`verify_produce`): the partition must be in the producer's
  Ongoing transaction, with its current epoch, else the write is refused, so a late produce can
  never open a hanging transaction.  TxnOffsetCommit makes the same check for the group's
  offsets partition.  On a cluster, a broker that is not the id's coordinator asks the
  coordinator's broker (:meth:`verify_anywhere`, AddPartitionsToTxn v5 ``verify_only``).
- Transaction version 2 (KIP-890 part 2; offered when the broker's ``transaction.version`` is 2,
  which ApiVersions reports as finalized): the client sends no AddPartitionsToTxn /
  AddOffsetsToTxn.  Its first transactional Produce (v12+) to a partition, and its
  TxnOffsetCommit v5+, make the partition leader / group coordinator *add* the partition
  (:meth:`verify_anywhere` with ``add``: in process, or AddPartitionsToTxn v5 without
  ``verify_only``), recorded with client transaction version 2.  EndTxn v5 bumps the epoch with
  Prepare* (an exhausted epoch reserves the next producer id, taken over at Complete*), the
  markers carry the bumped epoch (WriteTxnMarkers v2 names the version, and the partition then
  requires an epoch above its batches'), and the response returns the id/epoch to continue
  with.  Retries are told apart by epoch (Kafka's rules): in Prepare*/Complete* a retry carries
  the epoch before the bump; the current epoch in Complete* is the next transaction's end: an
  abort of a transaction no partition ever saw is written (no markers), a commit is
  INVALID_TXN_STATE.  Timeouts and fencing bump the epoch once, as before.

The coordinator epoch written in markers is the leader epoch of the ``__transaction_state``
partition, as in Kafka.
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

import trio

from ...protocol.errors import ErrorCode as E
from ..group.classic import Future
from ..group.offsets import partition_for
from ..runtime import CoordinatorRuntime
from ..service import CoordinatorService
from . import state_log as S
from .markers import TxnMarkerWriter
from .metadata import MAX_EPOCH, TxnMetadata, TxnTransitMetadata
from .state_log import (COMPLETE_ABORT, COMPLETE_COMMIT, DEAD, EMPTY, ONGOING, PREPARE_ABORT, PREPARE_COMMIT,
                        TRANSACTION_STATE_TOPIC)
from .state_store import append_error, wall_ms

if TYPE_CHECKING:
    from ...cluster.interbroker import InterBrokerVersions
    from ...cluster.partition import Partition
    from ...cluster.producer_ids import ProducerIdManager
    from ...cluster.replica_manager import ReplicaManager
    from ...storage.log_validator import ValidatedRecords
    from ..group.coordinator import GroupCoordinator
    from .markers import RemoteVerifier

log = logging.getLogger("pykbroker.txn")

# Backoff between tries of a marker write that failed with a retriable error (storage, leadership):
# doubled per try up to the maximum, so an offline partition does not flood the log.
MARKER_RETRY_S = 0.1
MARKER_RETRY_MAX_S = 5.0


# Crash-test hook (tests/transactions/test_crash.py): with PYKBROKER_TXN_PAUSE set to
# "before-markers" or "after-first-marker", the coordinator logs a line and stops for good at
# that point of completing a transaction, so a test can kill -9 the broker exactly there.
_PAUSE_AT = os.environ.get("PYKBROKER_TXN_PAUSE") or None


async def _maybe_pause(point: str, m: TxnMetadata) -> None:
    if _PAUSE_AT == point:
        log.warning("test hook: transaction %r paused %s", m.transactional_id, point)
        await trio.sleep_forever()


class TxnShard:
    """One ``__transaction_state`` partition being loaded (the runtime's shard)."""

    def __init__(self, tc: "TransactionCoordinator", partition: int) -> None:
        self.tc = tc
        self.partition = partition
        self.txns: dict[str, TxnMetadata] = {}

    def replay(self, key: bytes, value: bytes | None) -> None:
        tid = S.parse_key(key)
        if value is None:
            self.txns.pop(tid, None)
            return
        v = S.parse_value(value)
        m = self.txns.get(tid)
        if m is not None and m.producer_id != v["producer_id"]:
            m.last_producer_id = m.producer_id
        nm = TxnMetadata(tid, v["producer_id"], v["producer_epoch"], v["timeout_ms"], v["state"],
                         v["partitions"], v["start_ms"], v["last_update_ms"])
        # The last epoch is not in the log and stays unknown (-1) after a load, as in Kafka
        # (TransactionLog reads lastProducerEpoch as NO_PRODUCER_EPOCH): inferring it from the
        # previous record would take a replaced incarnation's KIP-360 re-init for a retry of
        # the new incarnation's bump and hand the old one the new epoch.
        if m is not None:
            nm.last_producer_id = m.last_producer_id
        if v["previous_producer_id"] not in (-1, v["producer_id"]):
            nm.last_producer_id = v["previous_producer_id"]   # v1 values name it
        nm.client_tv = v["client_transaction_version"]
        nm.next_producer_id = v["next_producer_id"]
        self.txns[tid] = nm

    def loaded(self) -> None:
        self.tc._shard_loaded(self.partition, self.txns)

    def unloaded(self) -> None:
        self.tc._shard_unloaded(self.partition)


class TransactionCoordinator(CoordinatorService):
    """Handed its dependencies: ``config``, ``log`` (:class:`TxnStateLog`), ``replica_manager``
    (partitions to write markers to), ``producer_ids`` (``await generate()``) and
    ``group_coordinator`` (markers of ``__consumer_offsets`` partitions; may be None).
    ``__transaction_state`` is created on first use (FindCoordinator for a transactional id)."""

    # __transaction_state at creation
    REPLICATION_FACTOR_CONFIG = "transaction.state.log.replication.factor"
    SEGMENT_BYTES_CONFIG = "transaction.state.log.segment.bytes"
    MIN_ISR_CONFIG = "transaction.state.log.min.isr"

    def __init__(self, config: Any, log_: Any, replica_manager: ReplicaManager, producer_ids: ProducerIdManager,
                 group_coordinator: Optional[GroupCoordinator] = None,
                 leads_every_partition: bool = True, now_ms: Callable[[], int] = wall_ms,
                 interbroker_versions: Optional[InterBrokerVersions] = None) -> None:
        super().__init__(config, log_, leads_every_partition, config["transaction.state.log.num.partitions"])
        # the versions of WriteTxnMarkers / AddPartitionsToTxn this broker sends (cluster/interbroker.py)
        self.interbroker_versions = interbroker_versions
        self.replica_manager = replica_manager
        self.producer_ids = producer_ids
        # writes the markers of a completing transaction (markers.py)
        self.markers = TxnMarkerWriter(replica_manager, group_coordinator, leads_every_partition, interbroker_versions)
        self._remote_verifier: Optional[RemoteVerifier] = None  # KIP-890 verification with another coordinator (cluster only)
        self.now_ms = now_ms
        self.max_timeout_ms = config["transaction.max.timeout.ms"]
        self.abort_interval_s = config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000.0
        self.expiry_interval_s = config["transaction.remove.expired.transaction.cleanup.interval.ms"] / 1000.0
        self.expiration_ms = config["transactional.id.expiration.ms"]
        self.verification = config["transaction.partition.verification.enable"]   # dynamic: reconfigure
        # The finalized transaction.version (config/broker.py): the version the coordinator itself uses
        # for the transitions no client asked for (timeouts, fencing), as Kafka's
        # transactionVersionLevel(), and the __transaction_state value version it writes.
        self.tv_level = config["transaction.version"]
        self.log_value_version = 1 if self.tv_level >= 1 else 0
        self.txns: dict[int, dict[str, TxnMetadata]] = {}   # loaded shards: partition -> id -> metadata
        self._nursery: Optional[trio.Nursery] = None   # set in startup()

    # -- lifecycle ---------------------------------------------------------------------------
    async def startup(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self.runtime = CoordinatorRuntime(TRANSACTION_STATE_TOPIC, self.log, lambda p: TxnShard(self, p), nursery)
        nursery.start_soon(self._abort_timed_out_loop)
        await self._load_existing_topic()

    async def shutdown(self) -> None:
        pass

    def _log_loaded(self, seconds: float) -> None:
        log.info("loaded %d transactional id(s) from %s in %.3fs", sum(len(t) for t in self.txns.values()),
                 TRANSACTION_STATE_TOPIC, seconds)

    def reconfigure(self, config: Any) -> None:
        """A dynamic broker config changed (config/dynamic.py)."""
        self.verification = config["transaction.partition.verification.enable"]

    def _shard_loaded(self, partition: int, txns: dict) -> None:
        self.txns[partition] = txns
        for m in txns.values():
            if m.state in (PREPARE_COMMIT, PREPARE_ABORT):
                # Prepare* is durable, the markers may not all be: write them (again) and complete.
                log.info("transaction %r was in %s: completing it", m.transactional_id, S.STATE_NAMES[m.state])
                assert self._nursery is not None   # shards load once startup() ran
                self._nursery.start_soon(self._complete, partition, m)

    def _shard_unloaded(self, partition: int) -> None:
        self.txns.pop(partition, None)

    # -- lookups -----------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def coordinator_error(self, transactional_id: str) -> int:
        if not self._topic_ready:
            if self.leads_every_partition or not self.log.exists():
                # no __transaction_state yet (no FindCoordinator for a transactional id so
                # far): Kafka's TransactionStateManager owns no partition then and answers
                # NOT_COORDINATOR (tests/differential/test_txn_error_paths.py)
                return int(E.NOT_COORDINATOR)
            # a cluster: another broker created the topic; its partitions this broker leads
            # are loaded through on_become_leader
            self.num_partitions = self.log.num_partitions()
            self._topic_ready = True
        assert self.runtime is not None   # set in startup, before any request
        return self.runtime.status(self.partition_for(transactional_id))

    def _lookup(self, transactional_id: str) -> tuple[int, int, Any]:   # metadata: None only with an error
        """(error, shard partition, metadata or None)."""
        if not transactional_id:
            return int(E.INVALID_REQUEST), -1, None
        err = self.coordinator_error(transactional_id)
        if err:
            return err, -1, None
        part = self.partition_for(transactional_id)
        shard = self.txns.get(part)
        if shard is None:
            return int(E.COORDINATOR_LOAD_IN_PROGRESS), part, None
        return 0, part, shard.get(transactional_id)

    def _coordinator_epoch(self, partition: int) -> int:
        assert self.runtime is not None   # set in startup
        e = self.runtime.leader_epoch(partition)
        return 0 if e is None else e

    # -- writes ------------------------------------------------------------------------------
    def _persist(self, part: int, m: TxnMetadata, target: TxnTransitMetadata, then: Callable[[int], None] | None = None) -> Future:
        """Write ``target`` for ``m``; applied to memory once committed.  ``then(code)`` runs in
        the write's callback (not in the request, which may be cancelled)."""
        m.pending = target.state
        fut = Future()
        shard = self.txns.get(part)
        if shard is not None and m.transactional_id not in shard:
            shard[m.transactional_id] = m    # a new id: visible (pending) while its first write runs

        def done(code: int) -> None:
            if m.pending == target.state:
                m.pending = None
            if code == 0:
                target.apply(m)
            elif m.state is None:            # the first write of a new id failed: forget it
                s = self.txns.get(part)
                if s is not None and s.get(m.transactional_id) is m:
                    del s[m.transactional_id]
            code = append_error(code) if code else 0
            if then is not None:
                try:
                    then(code)
                except Exception:
                    log.exception("after a transaction state write")
            fut.set(code)
        rec = (S.key(m.transactional_id),
               S.value(target.producer_id, target.producer_epoch, target.timeout_ms, target.state,
                       target.partitions, target.last_update_ms, target.start_ms, self.log_value_version,
                       previous_producer_id=m.producer_id if m.producer_id >= 0 else target.producer_id,
                       next_producer_id=target.next_producer_id, client_transaction_version=target.client_tv))
        assert self.runtime is not None   # set in startup
        # Kafka's appendTransactionToLog waits for the replicas at most the transaction's own
        # timeout (the new state's txnTimeoutMs, 3.9 and 4.4); then COORDINATOR_NOT_AVAILABLE
        self.runtime.write(part, [rec], done, timeout_ms=target.timeout_ms)
        return fut

    # -- InitProducerId --------------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> tuple[int, int, int]:
        """-> (error, producer id, epoch)."""
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return int(E.INVALID_TRANSACTION_TIMEOUT), -1, -1
        err, part, m = self._lookup(transactional_id)
        if err:
            return err, -1, -1
        now = self.now_ms()
        if m is None:
            pid = await self.producer_ids.generate()
            err, part, m = self._lookup(transactional_id)   # re-check after the await
            if err:
                return err, -1, -1
            if m is None:
                m = TxnMetadata(transactional_id, pid, -1, timeout_ms, state=None)
                target = TxnTransitMetadata(m, producer_epoch=0, state=EMPTY, timeout_ms=timeout_ms, partitions=set(),
                                 start_ms=-1, last_update_ms=now, client_tv=0)
                code = await self._persist(part, m, target).get()
                return (code, -1, -1) if code else (0, m.producer_id, m.producer_epoch)
        if m.pending is not None:
            return int(E.CONCURRENT_TRANSACTIONS), -1, -1
        if producer_id != -1 and not (m.producer_epoch == -1 or producer_id == m.producer_id or
                                      (producer_id == m.last_producer_id and producer_epoch >= MAX_EPOCH)):
            return int(E.PRODUCER_FENCED), -1, -1
        if m.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return int(E.CONCURRENT_TRANSACTIONS), -1, -1
        if m.state == ONGOING:
            # Fence the current producer and abort its transaction; the caller retries.
            self._fence_and_abort(part, m)
            return int(E.CONCURRENT_TRANSACTIONS), -1, -1
        # Empty / CompleteCommit / CompleteAbort (Kafka's prepareProducerIdRotation and
        # prepareIncrementProducerEpoch).  ``expected``: the request names the producer's id/epoch
        # (KIP-360: a producer recovering from an error, or from an EndTxn whose answer it never got).
        expected = producer_id != -1
        common = dict(timeout_ms=timeout_ms, state=EMPTY, partitions=set(), start_ms=-1, last_update_ms=now,
                      client_tv=0, next_producer_id=-1)
        if m.producer_epoch >= MAX_EPOCH and (not expected or producer_epoch == m.producer_epoch):
            pid = await self.producer_ids.generate()
            if m.pending is not None:
                return int(E.CONCURRENT_TRANSACTIONS), -1, -1
            target = TxnTransitMetadata(m, producer_id=pid, last_producer_id=m.producer_id, producer_epoch=0,
                             last_producer_epoch=m.producer_epoch if expected else -1, **common)
        elif not expected:
            # A new producer: bumped, and the last epoch forgotten (-1), so that an older
            # incarnation's KIP-360 retry can no longer pass for a retry of this bump: it is fenced.
            target = TxnTransitMetadata(m, producer_epoch=m.producer_epoch + 1, last_producer_epoch=-1, **common)
        elif m.producer_epoch == -1 or producer_epoch == m.producer_epoch:
            # the producer continues after an error, nobody else initialized meanwhile: bumped
            target = TxnTransitMetadata(m, producer_epoch=m.producer_epoch + 1, last_producer_epoch=m.producer_epoch,
                             **common)
        elif producer_epoch == m.last_producer_epoch:
            # A retry of a call that succeeded (a bump, or a transaction version 2 EndTxn, which
            # bumped the epoch and kept the one before as the last epoch): the current epoch, not
            # bumped again, written as Empty as Kafka does.
            target = TxnTransitMetadata(m, **common)
        else:
            return int(E.PRODUCER_FENCED), -1, -1
        code = await self._persist(part, m, target).get()
        if code:
            return code, -1, -1
        return 0, m.producer_id, m.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------
    def _check_producer(self, m: Optional[TxnMetadata], producer_id: int, producer_epoch: int) -> int:
        if m is None or m.state is None or m.producer_id != producer_id:
            return int(E.INVALID_PRODUCER_ID_MAPPING)
        if m.producer_epoch != producer_epoch:
            return int(E.PRODUCER_FENCED)
        if m.pending is not None or m.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return int(E.CONCURRENT_TRANSACTIONS)
        return 0

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[tuple[str, int]], client_tv: int = 0) -> int:
        """AddPartitionsToTxn / AddOffsetsToTxn, and (``client_tv`` 2) the implicit add of
        transaction version 2, asked by a partition leader or group coordinator."""
        err, part, m = self._lookup(transactional_id)
        if err:
            return err
        err = self._check_producer(m, producer_id, producer_epoch)
        if err:
            return err
        new = set(partitions)
        if m.state == ONGOING and new <= m.partitions:
            return 0
        now = self.now_ms()
        start = m.start_ms if m.state == ONGOING else now
        target = TxnTransitMetadata(m, state=ONGOING, partitions=m.partitions | new, start_ms=start, last_update_ms=now,
                         client_tv=client_tv)
        return await self._persist(part, m, target).get()

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: Iterable[tuple[str, int]]) -> dict:
        """KIP-890 verification (AddPartitionsToTxn verify_only): partition -> error."""
        err, part, m = self._lookup(transactional_id)
        if not err:
            if m is None or m.state is None or m.producer_id != producer_id:
                err = int(E.INVALID_PRODUCER_ID_MAPPING)
            elif m.producer_epoch != producer_epoch:
                err = int(E.PRODUCER_FENCED)
            elif m.state in (PREPARE_COMMIT, PREPARE_ABORT):
                err = int(E.CONCURRENT_TRANSACTIONS)
        if err:
            return {tp: err for tp in partitions}
        # Kafka's coordinator answers TRANSACTION_ABORTABLE for a partition outside the
        # transaction; the asking broker downgrades it for clients that predate it.
        return {tp: 0 if (m.state == ONGOING and tp in m.partitions) else int(E.TRANSACTION_ABORTABLE)
                for tp in partitions}

    async def verify_anywhere(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable[tuple[str, int]], add: bool = False) -> dict:
        """:meth:`verify` (or, with ``add``, the implicit add of transaction version 2:
        :meth:`add_partitions` as a TV2 client's) where the transaction's coordinator is: in
        process when this broker is it, else with the coordinator broker (AddPartitionsToTxn v5,
        ``verify_only`` unless adding, as Kafka's partition leaders and group coordinators ask
        it).  Partition -> error code; a coordinator that cannot be found or reached answers
        NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, which the callers map to their retriable
        errors."""
        if add:
            code = await self.add_partitions(transactional_id, producer_id, producer_epoch, partitions, client_tv=2)
            codes = {tp: int(code) for tp in partitions}
        else:
            codes = self.verify(transactional_id, producer_id, producer_epoch, partitions)
        if self.leads_every_partition or not transactional_id or \
                any(c != E.NOT_COORDINATOR for c in codes.values()):
            return codes
        rm = self.replica_manager
        info = rm.metadata.get(TRANSACTION_STATE_TOPIC)
        if info is None:
            return {tp: int(E.COORDINATOR_NOT_AVAILABLE) for tp in partitions}
        leader = rm.metadata.leader_of(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, info.num_partitions))
        if leader < 0 or leader == rm.node_id:
            # no leader yet, or this broker is about to load the partition: retried
            return {tp: int(E.COORDINATOR_NOT_AVAILABLE) for tp in partitions}
        if self._remote_verifier is None:
            from .markers import RemoteVerifier
            self._remote_verifier = RemoteVerifier(rm.metadata, rm.node_id, rm._listener_name(),
                                                   self.interbroker_versions, getattr(rm, "interbroker_security", None))
        return await self._remote_verifier.verify(leader, transactional_id, producer_id, producer_epoch, partitions,
                                                  verify_only=not add)

    async def verify_produce(self, transactional_id: Optional[str], partition: Partition, validated: ValidatedRecords,
                             version: int = 11) -> int:
        """Produce's KIP-890 check of a transactional batch: 0 or the partition's error.
        Only a batch that would open a transaction on the partition is verified (once per
        partition and transaction: later batches find it open).  Produce v12+ (sent only by
        transaction version 2 clients) adds the partition to the transaction instead of
        verifying it (Kafka's ADD_PARTITION operation), even with verification disabled: the
        client no longer sends AddPartitionsToTxn."""
        batches = validated.batches
        txn = [b for b in batches if b.is_transactional]
        if not txn:
            return 0
        if transactional_id is None:
            # Kafka refuses transactional records without a transactional id in the request
            return int(E.INVALID_TXN_STATE)
        b = txn[0]
        add = version >= 12
        if (not self.verification and not add) or \
                partition.log.producer_state.has_ongoing_txn(b.producer_id, b.producer_epoch):
            return 0
        tp = (partition.topic, partition.partition_id)
        code = (await self.verify_anywhere(transactional_id, b.producer_id, b.producer_epoch, [tp], add=add))[tp]
        # As Kafka's produce path maps verification errors: a fenced epoch is the produce
        # error INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE exists from Produce v11 on
        # (INVALID_TXN_STATE before); coordinator unavailability is retriable
        # (NOT_ENOUGH_REPLICAS for clients that predate the newer codes).
        if code == E.PRODUCER_FENCED:
            return int(E.INVALID_PRODUCER_EPOCH)
        if code == E.TRANSACTION_ABORTABLE and version <= 10:
            return int(E.INVALID_TXN_STATE)
        if code in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS,
                    E.CONCURRENT_TRANSACTIONS):
            return int(E.NOT_ENOUGH_REPLICAS)
        return code

    # -- EndTxn --------------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                      client_tv: int = 0) -> tuple[int, int, int]:
        """-> (error, producer id, producer epoch): the id's current ones after success (EndTxn
        v5 returns them: with transaction version 2 the epoch was bumped), -1/-1 with an error."""
        code = await self._end_txn(transactional_id, producer_id, producer_epoch, commit, client_tv)
        if code:
            return code, -1, -1
        _, _, m = self._lookup(transactional_id)
        return (0, m.producer_id, m.producer_epoch) if m is not None else (0, -1, -1)

    async def _end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                       client_tv: int) -> int:
        err, part, m = self._lookup(transactional_id)
        if err:
            return err
        if m is None or m.state is None:
            return int(E.INVALID_PRODUCER_ID_MAPPING)
        st = m.state
        if m.client_tv >= 2:
            # Kafka's TV2 epoch rules: every EndTxn bumped the epoch, so in Prepare*/Complete* a
            # retry carries the previous epoch (or, after an exhausted epoch moved the id to a
            # new producer id, the old id with the last epoch); the same epoch there would be
            # the next transaction's EndTxn arriving early and is fenced.
            bumped = m.producer_epoch == producer_epoch + 1
            overflow = (m.last_producer_id == producer_id and producer_epoch == MAX_EPOCH and m.producer_epoch == 0)
            if st in (PREPARE_COMMIT, PREPARE_ABORT):
                valid = bumped
            elif st in (COMPLETE_COMMIT, COMPLETE_ABORT):
                # (or the current epoch: the next transaction's end, e.g. the empty abort below)
                valid = bumped or overflow or producer_epoch == m.producer_epoch
            else:
                valid = producer_epoch == m.producer_epoch
        else:
            overflow = False
            valid = producer_epoch == m.producer_epoch
        if m.producer_id != producer_id and not overflow:
            return int(E.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            return int(E.PRODUCER_FENCED)
        if m.pending is not None:
            return int(E.CONCURRENT_TRANSACTIONS)
        if client_tv >= 2 and not commit and producer_epoch == m.producer_epoch and \
                st in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT):
            # A TV2 client cannot know whether its first write reached a partition leader (the
            # leader adds the partition), so it may abort a transaction the coordinator never
            # saw: Kafka 4.4 aborts it anyway (no partitions, no markers), bumping the epoch.
            now = self.now_ms()
            target = TxnTransitMetadata(m, state=PREPARE_ABORT, last_update_ms=now, start_ms=now, partitions=set(),
                             producer_epoch=min(m.producer_epoch + 1, 32767), last_producer_epoch=m.producer_epoch,
                             next_producer_id=-1, client_tv=client_tv)
            return await self._persist(part, m, target, then=lambda code: self._after_prepare(code, part, m)).get()
        if client_tv >= 2 and commit and producer_epoch == m.producer_epoch and m.client_tv >= 2 and \
                st in (COMPLETE_COMMIT, COMPLETE_ABORT):
            # the current epoch is not a retry there (a retry carries the one before the bump)
            return int(E.INVALID_TXN_STATE)
        if st == ONGOING:
            now = self.now_ms()
            state = PREPARE_COMMIT if commit else PREPARE_ABORT
            if client_tv >= 2:
                # TV2: the epoch is bumped with Prepare* (the markers carry the new one, which
                # fences any late write of this transaction); an exhausted epoch also reserves
                # the producer id that takes over once the transaction is complete.
                nxt = -1
                if m.producer_epoch >= MAX_EPOCH:
                    nxt = await self.producer_ids.generate()
                    if m.pending is not None or m.state != ONGOING:
                        return int(E.CONCURRENT_TRANSACTIONS)
                target = TxnTransitMetadata(m, state=state, last_update_ms=now, producer_epoch=min(m.producer_epoch + 1, 32767),
                                 last_producer_epoch=m.producer_epoch, next_producer_id=nxt, client_tv=client_tv)
            else:
                target = TxnTransitMetadata(m, state=state, last_update_ms=now, client_tv=client_tv)
            return await self._persist(part, m, target, then=lambda code: self._after_prepare(code, part, m)).get()
        if st == COMPLETE_COMMIT:
            return 0 if commit else int(E.INVALID_TXN_STATE)
        if st == COMPLETE_ABORT:
            return 0 if not commit else int(E.INVALID_TXN_STATE)
        if st == PREPARE_COMMIT:
            return int(E.CONCURRENT_TRANSACTIONS) if commit else int(E.INVALID_TXN_STATE)
        if st == PREPARE_ABORT:
            return int(E.CONCURRENT_TRANSACTIONS) if not commit else int(E.INVALID_TXN_STATE)
        return int(E.INVALID_TXN_STATE)   # Empty: no transaction to end

    def _after_prepare(self, code: int, part: int, m: TxnMetadata) -> None:
        if code == 0:
            assert self._nursery is not None   # set in startup
            self._nursery.start_soon(self._complete, part, m)

    def _fence_and_abort(self, part: int, m: TxnMetadata) -> None:
        """Abort ``m``'s Ongoing transaction with a bumped epoch (fencing its producer).  The
        epoch is bumped once, whatever the transaction version (Kafka 4.4's timeout abort of a
        transaction version 1 client: epoch + 1); the markers carry it, and the transaction keeps
        its client's version."""
        epoch = m.producer_epoch + 1 if m.producer_epoch < MAX_EPOCH else m.producer_epoch
        target = TxnTransitMetadata(m, producer_epoch=epoch, last_producer_epoch=m.producer_epoch, state=PREPARE_ABORT,
                         last_update_ms=self.now_ms(), next_producer_id=-1,
                         client_tv=2 if m.client_tv >= 2 and self.tv_level >= 2 else 0)
        self._persist(part, m, target, then=lambda code: self._after_prepare(code, part, m))

    async def _complete(self, part: int, m: TxnMetadata) -> None:
        """Write the markers of ``m``'s prepared transaction, then Complete*."""
        commit = m.state == PREPARE_COMMIT
        pid, epoch, tv = m.producer_id, m.producer_epoch, m.client_tv
        coordinator_epoch = self._coordinator_epoch(part)
        m.pending = COMPLETE_COMMIT if commit else COMPLETE_ABORT   # nothing else may start meanwhile
        try:
            await _maybe_pause("before-markers", m)
            for i, tp in enumerate(sorted(m.partitions)):
                if i == 1:
                    await _maybe_pause("after-first-marker", m)
                backoff = MARKER_RETRY_S
                while not await self.markers.write(tp, pid, epoch, commit, coordinator_epoch, tv):
                    if self.txns.get(part, {}).get(m.transactional_id) is not m:
                        return  # the shard was unloaded: its next leader completes the transaction
                    await trio.sleep(backoff)
                    backoff = min(backoff * 2, MARKER_RETRY_MAX_S)
        finally:
            m.pending = None
        if self.txns.get(part, {}).get(m.transactional_id) is not m:
            return
        target = TxnTransitMetadata(m, state=COMPLETE_COMMIT if commit else COMPLETE_ABORT, partitions=set(),
                         last_update_ms=self.now_ms())
        if tv >= 2:
            # Kafka's prepareComplete for TV2: an exhausted epoch hands over to the reserved id.
            # The last epoch stays the one before Prepare*'s bump (the last one the client saw
            # before this EndTxn's answer), so a client that lost that answer and re-runs
            # InitProducerId with it is taken for a retry (KIP-360) and gets the current epoch.
            if m.next_producer_id >= 0:
                target.producer_id, target.producer_epoch = m.next_producer_id, 0
                target.last_producer_id, target.next_producer_id = m.producer_id, -1
        code = await self._persist(part, m, target).get()
        if code:
            log.warning("transaction %r: writing %s failed (%s); completing again", m.transactional_id,
                        S.STATE_NAMES[target.state], E(code).name)
            if self.txns.get(part, {}).get(m.transactional_id) is m:
                await trio.sleep(MARKER_RETRY_S)
                assert self._nursery is not None   # set in startup
                self._nursery.start_soon(self._complete, part, m)


    # -- timeouts --------------------------------------------------------------------------------
    async def _abort_timed_out_loop(self) -> None:
        next_expiry = trio.current_time() + self.expiry_interval_s
        while True:
            await trio.sleep(self.abort_interval_s)
            try:
                self.abort_timed_out(self.now_ms())
                if trio.current_time() >= next_expiry:
                    next_expiry = trio.current_time() + self.expiry_interval_s
                    self.remove_expired(self.now_ms())
            except Exception:
                log.exception("aborting timed-out transactions failed")

    def remove_expired(self, now_ms: int) -> int:
        """transactional.id.expiration.ms: tombstone idle ids without an open transaction."""
        n = 0
        for part, shard in list(self.txns.items()):
            for m in list(shard.values()):
                if m.pending is None and m.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) and \
                        now_ms - m.last_update_ms > self.expiration_ms:
                    m.pending = DEAD

                    def done(code: int, m: TxnMetadata = m, part: int = part) -> None:
                        if m.pending == DEAD:
                            m.pending = None
                        s = self.txns.get(part)
                        if code == 0 and s is not None and s.get(m.transactional_id) is m:
                            del s[m.transactional_id]
                            log.info("transactional id %r expired", m.transactional_id)
                    assert self.runtime is not None   # shards exist once startup() ran
                    # Kafka's tombstone append waits at most request.timeout.ms
                    self.runtime.write(part, [(S.key(m.transactional_id), None)], done,
                                       timeout_ms=self.config_value("request.timeout.ms", 30000))
                    n += 1
        return n

    def abort_timed_out(self, now_ms: int) -> int:
        n = 0
        for part, shard in list(self.txns.items()):
            for m in list(shard.values()):
                if m.state == ONGOING and m.pending is None and m.start_ms >= 0 and now_ms > m.start_ms + m.timeout_ms:
                    log.info("transaction %r (producer %d epoch %d) timed out after %d ms: aborting",
                             m.transactional_id, m.producer_id, m.producer_epoch, m.timeout_ms)
                    self._fence_and_abort(part, m)
                    n += 1
        return n

    # -- Describe / List -------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> dict:
        err, part, m = self._lookup(transactional_id) if transactional_id else (int(E.TRANSACTIONAL_ID_NOT_FOUND), -1, None)
        if not err and (m is None or m.state is None):
            err = int(E.TRANSACTIONAL_ID_NOT_FOUND)
        if err:
            return {"error_code": err, "transactional_id": transactional_id, "transaction_state": "",
                    "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                    "producer_epoch": -1, "topics": []}
        assert m is not None   # err is set when m is None
        by_topic: dict = {}
        for t, p in sorted(m.partitions):
            by_topic.setdefault(t, []).append(p)
        return {"error_code": 0, "transactional_id": transactional_id,
                "transaction_state": S.STATE_NAMES[m.state], "transaction_timeout_ms": m.timeout_ms,
                "transaction_start_time_ms": m.start_ms, "producer_id": m.producer_id,
                "producer_epoch": m.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          duration_filter_ms: int = -1) -> tuple[int, list]:
        """-> (error, [(id, producer id, state name)]); error COORDINATOR_LOAD_IN_PROGRESS while a
        shard loads, as Kafka."""
        rt = self.runtime
        assert rt is not None   # set in startup
        if self._topic_ready and any(rt.status(p) == E.COORDINATOR_LOAD_IN_PROGRESS
                                     for p in range(self.num_partitions)):
            return int(E.COORDINATOR_LOAD_IN_PROGRESS), []
        want_states = {S.STATES_BY_NAME[s] for s in states if s in S.STATES_BY_NAME}
        if states and not want_states:
            return 0, []
        now = self.now_ms()
        out = []
        for shard in self.txns.values():
            for m in shard.values():
                if m.state is None:
                    continue
                if want_states and m.state not in want_states:
                    continue
                if producer_ids and m.producer_id not in producer_ids:
                    continue
                if duration_filter_ms >= 0 and now - m.start_ms < duration_filter_ms:
                    continue
                out.append((m.transactional_id, m.producer_id, S.STATE_NAMES[m.state]))
        return 0, sorted(out)
