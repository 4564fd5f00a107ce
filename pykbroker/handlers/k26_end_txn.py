"""EndTxn (key 26), versions 0-5.

Behaviour (Apache Kafka 4.x, TransactionCoordinator.handleEndTransaction):
``committed`` true commits, false aborts the producer's Ongoing transaction.  The answer comes
once PrepareCommit/PrepareAbort is durable in ``__transaction_state``; the COMMIT/ABORT markers
are then written to every partition of the transaction (and ``__consumer_offsets`` for
transactional offsets) and the transaction completes; until then the id answers
CONCURRENT_TRANSACTIONS.  Errors: INVALID_PRODUCER_ID_MAPPING (unknown id, another producer id),
PRODUCER_FENCED (another epoch; INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS
(transition in flight, or the same outcome still being written), INVALID_TXN_STATE (no
transaction, or the opposite outcome already decided); a retried EndTxn whose outcome is complete
answers NONE.  NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for every coordinator request.
v5 is transaction version 2 (KIP-890 part 2; Kafka's transactionVersionForEndTxn): Prepare*
bumps the producer epoch (an exhausted epoch also reserves a new producer id, which takes over
when the transaction completes), the markers carry the bumped epoch, and the response returns
the producer id and epoch the client continues with.  Retries are told apart by epoch: in
Prepare*/Complete* the request's epoch must be the one before the bump (the bumped one there is
PRODUCER_FENCED).
Version notes: v1 same as v0; v2 PRODUCER_FENCED; v3 flexible; v4 adds TRANSACTION_ABORTABLE
(never answered here); v5 adds producer_id/producer_epoch to the response (-1 with an error).
"""
from __future__ import annotations

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.txn_errors import top_level_error_response
from .support.versions import VERSIONS

API_KEY = 26
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_TRANSACTIONAL_ID = need(API_KEY, "transactional_id")


# PRODUCER_FENCED from v2 on (INVALID_PRODUCER_EPOCH before); v5's producer id and epoch are
# -1 on an error
error_response = top_level_error_response(producer_id=-1, producer_epoch=-1)


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _TRANSACTIONAL_ID, request["transactional_id"]):
        return error_response(ctx, request, _TRANSACTIONAL_ID.denial)   # first (Kafka)
    tc = ctx.services.transaction_coordinator
    if tc is None:
        return error_response(ctx, request, E.COORDINATOR_NOT_AVAILABLE)
    code, pid, epoch = await tc.end_txn(request["transactional_id"], request["producer_id"],
                                        request["producer_epoch"], request["committed"],
                                        client_tv=2 if ctx.api_version >= 5 else 0)
    if code:
        return error_response(ctx, request, code)
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": epoch}
