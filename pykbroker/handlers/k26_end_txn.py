"""EndTxn (key 26), versions 0-4.

Behaviour (Apache Kafka 4.x, TransactionCoordinator.handleEndTransaction, transaction version 1):
``committed`` true commits, false aborts the producer's Ongoing transaction.  The answer comes
once PrepareCommit/PrepareAbort is durable in ``__transaction_state``; the COMMIT/ABORT markers
are then written to every partition of the transaction (and ``__consumer_offsets`` for
transactional offsets) and the transaction completes; until then the id answers
CONCURRENT_TRANSACTIONS.  Errors: INVALID_PRODUCER_ID_MAPPING (unknown id, another producer id),
PRODUCER_FENCED (another epoch; INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS
(transition in flight, or the same outcome still being written), INVALID_TXN_STATE (no
transaction, or the opposite outcome already decided); a retried EndTxn whose outcome is complete
answers NONE.  NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for every coordinator request.
Version notes: v1 same as v0; v2 PRODUCER_FENCED; v3 flexible; v4 adds TRANSACTION_ABORTABLE
(never answered here).  v5 (transaction version 2, epoch bump per transaction) is not offered.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode as E

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 4


def error_response(ctx, request, code):
    if code == E.PRODUCER_FENCED and ctx.api_version < 2:
        code = E.INVALID_PRODUCER_EPOCH
    return {"throttle_time_ms": 0, "error_code": int(code)}


async def handle(ctx, request):
    tc = getattr(ctx.broker, "transaction_coordinator", None)
    if tc is None:
        return error_response(ctx, request, E.COORDINATOR_NOT_AVAILABLE)
    code = await tc.end_txn(request["transactional_id"], request["producer_id"], request["producer_epoch"],
                            request["committed"])
    return error_response(ctx, request, code)
