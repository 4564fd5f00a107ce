"""InitProducerId (key 22), versions 0-5.

Behaviour (Apache Kafka 4.x, KafkaApis.handleInitProducerIdRequest and
TransactionCoordinator.handleInitProducerId):
- ``transactional_id`` null: a fresh producer id with epoch 0, always.  Kafka "blindly
  accepts" a null transactional id and allocates a new id even when v3+ sends an existing
  producer_id/epoch: the KIP-360 epoch bump is done by the coordinator only for transactional
  ids (idempotent Java producers bump their epoch locally).  Ids come from a block persisted in
  the log dir, so they never repeat across restarts.
- v3+: producer_id and producer_epoch must be both -1 or both set, else INVALID_REQUEST.
- ``transactional_id`` "" -> INVALID_REQUEST; any other transactional id goes to the transaction
  coordinator (coordinator/txn/coordinator.py): a new id gets a producer id with epoch 0, a
  known one its epoch bumped (fencing the previous producer; an open transaction is aborted
  first and the request answered CONCURRENT_TRANSACTIONS, which clients retry);
  ``transaction_timeout_ms`` above ``transaction.max.timeout.ms`` (or <= 0) ->
  INVALID_TRANSACTION_TIMEOUT; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when the id's
  ``__transaction_state`` partition is not loaded here.  With a producer id/epoch (v3+, KIP-360):
  another producer id -> PRODUCER_FENCED; the previous epoch (a retried bump, or the epoch before
  a transaction version 2 EndTxn whose answer the client lost) -> the current one.
- Authorization (with an authorizer), first: WRITE on the transactional id (else
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one, IDEMPOTENT_WRITE on the cluster or WRITE on
  any topic (KIP-679, Kafka's authorizeByResourceType), else CLUSTER_AUTHORIZATION_FAILED.
- Errors carry producer_id -1 and producer_epoch -1.  PRODUCER_FENCED exists from v4 on; older
  versions get INVALID_PRODUCER_EPOCH instead, as Kafka's response downgrades it.
Version notes: v1 same as v0; v2 flexible; v3 adds producer_id/epoch (KIP-360); v4 adds
PRODUCER_FENCED as a possible error; v5 (KIP-890) changes nothing for this flow (v6, KIP-939
two-phase commit, is not offered).
"""
from __future__ import annotations

from ..acl.check import session
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .support.txn_errors import top_level_error_response
from .support.versions import VERSIONS

API_KEY = 22
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_IDEMPOTENT = need(API_KEY, "idempotent")
_IDEMPOTENT_ANY_TOPIC = need(API_KEY, "idempotent_any_topic")
_TRANSACTIONAL_ID = need(API_KEY, "transactional_id")


# PRODUCER_FENCED from v4 on (INVALID_PRODUCER_EPOCH before); no producer id or epoch on an error
error_response = top_level_error_response(producer_id=-1, producer_epoch=-1)


async def handle(ctx: RequestContext, request: dict) -> dict:
    txn_id = request["transactional_id"]
    az = session(ctx)
    if az is not None:
        # Kafka's checks come first: WRITE on the transactional id; an idempotent producer needs
        # IDEMPOTENT_WRITE on the cluster or, since KIP-679, WRITE on some topic
        if txn_id is not None:
            if not az.permits(_TRANSACTIONAL_ID, txn_id):
                return error_response(ctx, request, _TRANSACTIONAL_ID.denial)
        elif not az.permits(_IDEMPOTENT, log_denied=False) and not az.permits_any(_IDEMPOTENT_ANY_TOPIC):
            return error_response(ctx, request, _IDEMPOTENT.denial)
    pid, epoch = -1, -1
    if ctx.api_version >= 3:
        pid, epoch = request["producer_id"], request["producer_epoch"]
        if (pid == -1) != (epoch == -1):
            return error_response(ctx, request, ErrorCode.INVALID_REQUEST)
    if txn_id is not None:
        if txn_id == "":
            return error_response(ctx, request, ErrorCode.INVALID_REQUEST)
        tc = ctx.services.transaction_coordinator
        if tc is None:
            return error_response(ctx, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        code, pid, epoch = await tc.init_producer_id(txn_id, request["transaction_timeout_ms"], pid, epoch)
        if code:
            return error_response(ctx, request, code)
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": epoch}
    pid = await ctx.services.replica_manager.producer_ids.generate()
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}
