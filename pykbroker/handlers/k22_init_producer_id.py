"""InitProducerId (key 22), versions 0-5 — idempotent producers only.

Behaviour (Apache Kafka 4.x, KafkaApis.handleInitProducerIdRequest and
TransactionCoordinator.handleInitProducerId):
- ``transactional_id`` null: a fresh producer id with epoch 0, always.  Kafka "blindly
  accepts" a null transactional id and allocates a new id even when v3+ sends an existing
  producer_id/epoch: the KIP-360 epoch bump is done by the coordinator only for transactional
  ids (idempotent Java producers bump their epoch locally).  Ids come from a block persisted in
  the log dir, so they never repeat across restarts.
- v3+: producer_id and producer_epoch must be both -1 or both set, else INVALID_REQUEST.
- ``transactional_id`` "" -> INVALID_REQUEST; any other transactional id ->
  COORDINATOR_NOT_AVAILABLE: pykbroker has no transaction coordinator yet, and that is what
  Kafka answers while no coordinator can serve the id.
Version notes: v1 same as v0; v2 flexible; v3 adds producer_id/epoch (KIP-360); v4 adds
PRODUCER_FENCED as a possible error; v5 (KIP-890) changes nothing for idempotent producers.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


def error_response(ctx, request, code) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": -1, "producer_epoch": -1}


async def handle(ctx, request):
    txn_id = request["transactional_id"]
    if ctx.api_version >= 3:
        pid, epoch = request["producer_id"], request["producer_epoch"]
        if (pid == -1) != (epoch == -1):
            return error_response(ctx, request, ErrorCode.INVALID_REQUEST)
    if txn_id is not None:
        if txn_id == "":
            return error_response(ctx, request, ErrorCode.INVALID_REQUEST)
        return error_response(ctx, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    pid = await ctx.broker.replica_manager.producer_ids.generate()
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}
