"""TxnOffsetCommit (key 28), versions 0-6: offsets committed inside a transaction (KIP-98/447).

Behaviour (Apache Kafka 4.4, KafkaApis.handleTxnOffsetCommitRequest and the group coordinator):
- topic checks first, before the coordinator (as Kafka's request handler): v6 names topics by id
  only (KIP-1319): an id this cluster does not know (or the zero id) -> UNKNOWN_TOPIC_ID for all
  its partitions; v0-5: an unknown topic name -> UNKNOWN_TOPIC_OR_PARTITION; a partition the
  topic does not have -> UNKNOWN_TOPIC_OR_PARTITION.  When no partition is left the request is
  answered at once (no transaction or group check).  Kafka builds the answer per topic (by id at
  v6, by name before): the failed partitions first, the coordinator's answers for the others
  appended to the same topic entry.
- the group's ``__consumer_offsets`` partition must have been added to the transaction
  (AddOffsetsToTxn) by this producer id and epoch: unknown id / another producer id ->
  INVALID_PRODUCER_ID_MAPPING, another epoch -> INVALID_PRODUCER_EPOCH (the coordinator's
  PRODUCER_FENCED, mapped as Kafka's AddPartitionsToTxnManager maps it for every caller), partition not in an Ongoing transaction -> TRANSACTION_ABORTABLE
  (v4+; INVALID_TXN_STATE before) (Kafka's KIP-890 verification of the offsets partition, asked
  of the transaction coordinator's broker when that is another one; one it cannot reach, or a
  transaction still completing: COORDINATOR_NOT_AVAILABLE, which clients retry).
- v5+ (transaction version 2 clients, which send no AddOffsetsToTxn): the offsets partition is
  added to the transaction by the transaction coordinator instead of verified (Kafka's
  ADD_PARTITION operation for TxnOffsetCommit v5+).
- v3+ (KIP-447) with a generation / member id: the member must belong to the group with that
  generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), as for OffsetCommit;
  generation -1 without a member id skips the check, even for a KIP-848 group with members
  (Kafka 4.4 takes it; its OffsetCommit does not).  The group's state is not checked (a
  classic group in CompletingRebalance takes the commit: no REBALANCE_IN_PROGRESS, unlike
  OffsetCommit), and the commit is no heartbeat.  A generation for a group that does not
  exist: GROUP_ID_NOT_FOUND at v6, ILLEGAL_GENERATION before; a KIP-848 member's stale epoch:
  STALE_MEMBER_EPOCH at v6, ILLEGAL_GENERATION before (Kafka's mapping for older clients).
- metadata longer than ``offset.metadata.max.bytes`` -> OFFSET_METADATA_TOO_LARGE.
- the offsets are written as a transactional batch of the producer and stay *pending*: OffsetFetch
  does not return them (UNSTABLE_OFFSET_COMMIT with require_stable) until the transaction's
  COMMIT marker materializes them; ABORT drops them.
Version notes: v2 adds committed_leader_epoch; v3 generation/member id/instance id; v3 flexible;
v4 TRANSACTION_ABORTABLE; v5 the implicit add; v6 topic ids instead of names in request and
response (the Java 4.4 producer sends it when it knows every topic's id), GROUP_ID_NOT_FOUND and
STALE_MEMBER_EPOCH.
"""
from __future__ import annotations

from typing import Any


from ..acl.check import session
from ..acl.requirements import need
from ..coordinator.group.api import group_precheck
from ..coordinator.group.offsets import OFFSETS_TOPIC
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.offset_commits import check_topics, every_partition, response, write_offsets
from .support.txn_errors import client_error_code
from .support.versions import VERSIONS

API_KEY = 28
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")
_TOPIC = need(API_KEY, "topic")
_TRANSACTIONAL_ID = need(API_KEY, "transactional_id")


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return every_partition(request, ctx.api_version >= 6, client_error_code(ctx, code))


async def _coordinate(ctx: RequestContext, request: dict, accepted: Any) -> list:
    """The group coordinator's part for the partitions that passed the topic checks:
    [(topic, partition, error code)], written offsets pending until the marker."""
    v = ctx.api_version
    gid = request["group_id"]
    tc = ctx.services.transaction_coordinator
    if tc is None:
        return [(t, p, E.COORDINATOR_NOT_AVAILABLE) for t, _, p in accepted]
    gc, err = await group_precheck(ctx, gid)
    if not err:
        pid, epoch = request["producer_id"], request["producer_epoch"]
        # Kafka's KIP-890 check: the group's offsets partition is in the producer's transaction.
        tp = (OFFSETS_TOPIC, gc.partition_for(gid))
        err = (await tc.verify_anywhere(request["transactional_id"], pid, epoch, [tp], add=v >= 5))[tp]
        if err in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS):
            # The *transaction* coordinator moved or is loading, or (TV2) still completes the
            # previous transaction (this broker still coordinates the group): answered as Kafka's
            # group coordinator maps a failed verification, with a retriable error that does not
            # send the client looking for another group coordinator in vain.
            err = E.COORDINATOR_NOT_AVAILABLE
        elif err == E.PRODUCER_FENCED:
            # Kafka's AddPartitionsToTxnManager answers every verification caller a fenced
            # epoch as INVALID_PRODUCER_EPOCH (the historical code of the verification path)
            err = E.INVALID_PRODUCER_EPOCH
    generation = request["generation_id_or_member_epoch"] if v >= 3 else -1
    if not err and v >= 3 and (generation >= 0 or request["member_id"]):
        err, g = gc.validate_commit(gid, generation, request["member_id"] or "", request["group_instance_id"],
                                    transactional=True)
        if err == E.ILLEGAL_GENERATION and g is None and v >= 6:
            # a generation for a group that does not exist: KIP-1319 names it for v6 clients
            err = E.GROUP_ID_NOT_FOUND
    if err:
        return [(t, p, err) for t, _, p in accepted]
    pid, epoch = request["producer_id"], request["producer_epoch"]
    # pending until the transaction's marker: no expiry of their own
    # the broker's clock, as OffsetCommit (offsets expire on it once the marker commits them)
    return await write_offsets(accepted, ctx.services.clock.time_ms(), None,
                               lambda entries: gc.txn_commit(gid, pid, epoch, entries))


async def handle(ctx: RequestContext, request: dict) -> dict:
    by_id = ctx.api_version >= 6   # v6 names topics by id only (KIP-1319)
    # 1. Topic checks come first (Kafka does them before handing the request to the group
    #    coordinator): their errors lead the response.
    az = session(ctx)
    readable = None
    if az is not None:
        # Kafka's order: WRITE on the transactional id, READ on the group (whole request), then
        # READ on each topic
        if not az.permits(_TRANSACTIONAL_ID, request["transactional_id"]):
            return error_response(ctx, request, _TRANSACTIONAL_ID.denial)
        if not az.permits(_GROUP, request["group_id"]):
            return error_response(ctx, request, _GROUP.denial)
        readable = lambda name: az.permits(_TOPIC, name)   # noqa: E731
    failed, accepted = check_topics(ctx.services.metadata_cache, request, by_id, readable, _TOPIC)
    # 2. The transaction and group checks and the write, for the partitions left (none left:
    #    answered without them, as Kafka does).
    answered = []
    if accepted:
        answered = [(t, p, client_error_code(ctx, code)) for t, p, code in await _coordinate(ctx, request, accepted)]
    # 3. Merged as Kafka's response builder does: one entry per topic (by id at v6), the topics
    #    with early errors first, the coordinator's partitions appended to their topic's entry.
    return response(failed, answered, by_id)
