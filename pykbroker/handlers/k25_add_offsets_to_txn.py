"""AddOffsetsToTxn (key 25), versions 0-4.

Behaviour (Apache Kafka 4.x): the ``__consumer_offsets`` partition of ``group_id`` joins the
producer's transaction, exactly like AddPartitionsToTxn for that one partition (the same errors:
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, ...), so
the transaction's COMMIT/ABORT marker reaches the group's offsets.  ``__consumer_offsets`` is
created first if no group was ever used (as FindCoordinator for a group would).
Version notes: v1 same as v0; v2 PRODUCER_FENCED for clients (older ones get
INVALID_PRODUCER_EPOCH); v3 flexible; v4 the same (TRANSACTION_ABORTABLE may be answered; KIP-890).
Transaction version 2 clients do not send it: TxnOffsetCommit v5 adds the offsets partition.
"""
from __future__ import annotations

from ..acl.check import permits
from ..acl.requirements import need
from ..coordinator.group.api import group_precheck
from ..coordinator.group.offsets import OFFSETS_TOPIC
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.txn_errors import top_level_error_response
from .support.versions import VERSIONS

API_KEY = 25
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")
_TRANSACTIONAL_ID = need(API_KEY, "transactional_id")


# PRODUCER_FENCED from v2 on (INVALID_PRODUCER_EPOCH before); every answer is this shape
error_response = top_level_error_response()


async def handle(ctx: RequestContext, request: dict) -> dict:
    # Kafka's order: WRITE on the transactional id, then READ on the group
    if not permits(ctx, _TRANSACTIONAL_ID, request["transactional_id"]):
        return error_response(ctx, request, _TRANSACTIONAL_ID.denial)
    if not permits(ctx, _GROUP, request["group_id"]):
        return error_response(ctx, request, _GROUP.denial)
    tc = ctx.services.transaction_coordinator
    if tc is None:
        return error_response(ctx, request, E.COORDINATOR_NOT_AVAILABLE)
    gc, err = await group_precheck(ctx, request["group_id"])   # creates __consumer_offsets if needed
    if err == E.COORDINATOR_NOT_AVAILABLE:
        return error_response(ctx, request, err)
    code = await tc.add_partitions(request["transactional_id"], request["producer_id"], request["producer_epoch"],
                                   [(OFFSETS_TOPIC, gc.partition_for(request["group_id"]))])
    return error_response(ctx, request, code)
