"""TxnOffsetCommit (key 28), versions 0-5: offsets committed inside a transaction (KIP-98/447).

Behaviour (Apache Kafka 4.x, KafkaApis.handleTxnOffsetCommitRequest and the group coordinator):
- the group's ``__consumer_offsets`` partition must have been added to the transaction
  (AddOffsetsToTxn) by this producer id and epoch: unknown id / another producer id ->
  INVALID_PRODUCER_ID_MAPPING, another epoch -> PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before
  v3... as Kafka downgrades it), partition not in an Ongoing transaction -> TRANSACTION_ABORTABLE
  (v4+; INVALID_TXN_STATE before) (Kafka's KIP-890 verification of the offsets partition, asked
  of the transaction coordinator's broker when that is another one; one it cannot reach, or a
  transaction still completing: COORDINATOR_NOT_AVAILABLE, which clients retry).
- v5+ (transaction version 2 clients, which send no AddOffsetsToTxn): the offsets partition is
  added to the transaction by the transaction coordinator instead of verified (Kafka's
  ADD_PARTITION operation for TxnOffsetCommit v5+).
- v3+ (KIP-447) with a generation / member id: the member must belong to the group with that
  generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), as for OffsetCommit;
  generation -1 skips the check.
- unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION for it; metadata longer than
  ``offset.metadata.max.bytes`` -> OFFSET_METADATA_TOO_LARGE.
- the offsets are written as a transactional batch of the producer and stay *pending*: OffsetFetch
  does not return them (UNSTABLE_OFFSET_COMMIT with require_stable) until the transaction's
  COMMIT marker materializes them; ABORT drops them.
Version notes: v2 adds committed_leader_epoch; v3 generation/member id/instance id; v3 flexible;
v4 TRANSACTION_ABORTABLE; v5 the implicit add.  v6 (topic ids, KIP-1319) is not offered.
"""
from __future__ import annotations

import time

from ..coordinator.group.api import group_precheck
from ..coordinator.group.coordinator import OFFSET_METADATA_MAX_BYTES
from ..coordinator.group.offsets import OFFSETS_TOPIC, OffsetAndMetadata
from ..protocol.errors import ErrorCode as E

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5


def _downgrade(ctx, code):
    if code == E.PRODUCER_FENCED and ctx.api_version < 3:
        return int(E.INVALID_PRODUCER_EPOCH)
    if code == E.TRANSACTION_ABORTABLE and ctx.api_version < 4:
        return int(E.INVALID_TXN_STATE)
    return int(code)


def error_response(ctx, request, code):
    code = _downgrade(ctx, code)
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                                           for p in t["partitions"]]} for t in request["topics"]]}


async def handle(ctx, request):
    gid = request["group_id"]
    md = ctx.broker.metadata_cache
    tc = getattr(ctx.broker, "transaction_coordinator", None)
    if tc is None:
        return error_response(ctx, request, E.COORDINATOR_NOT_AVAILABLE)
    gc, err = await group_precheck(ctx, gid)
    if err:
        return error_response(ctx, request, err)
    pid, epoch = request["producer_id"], request["producer_epoch"]
    # Kafka's KIP-890 check: the group's offsets partition is in the producer's transaction.
    tp = (OFFSETS_TOPIC, gc.partition_for(gid))
    err = (await tc.verify_anywhere(request["transactional_id"], pid, epoch, [tp], add=ctx.api_version >= 5))[tp]
    if err in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS):
        # The *transaction* coordinator moved or is loading, or (TV2) still completes the
        # previous transaction (this broker still coordinates the group): answered as Kafka's
        # group coordinator maps a failed verification, with a retriable error that does not
        # send the client looking for another group coordinator in vain.
        err = E.COORDINATOR_NOT_AVAILABLE
    if err:
        return error_response(ctx, request, err)
    if ctx.api_version >= 3 and (request["generation_id"] >= 0 or request["member_id"]):
        err, _ = gc.validate_commit(gid, request["generation_id"], request["member_id"] or "",
                                    request["group_instance_id"])
        if err:
            return error_response(ctx, request, err)
    now = int(time.time() * 1000)
    entries = {}
    topics = []
    for t in request["topics"]:
        name = t["name"]
        info = md.get(name)
        parts = []
        for p in t["partitions"]:
            idx = p["partition_index"]
            meta = p["committed_metadata"]
            if info is None or not (0 <= idx < info.num_partitions):
                code = E.UNKNOWN_TOPIC_OR_PARTITION
            elif meta is not None and len(meta.encode("utf-8")) > OFFSET_METADATA_MAX_BYTES:
                code = E.OFFSET_METADATA_TOO_LARGE
            else:
                code = E.NONE
                entries[(name, idx)] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                         meta or "", now, None)
            parts.append({"partition_index": idx, "error_code": int(code)})
        topics.append({"name": name, "partitions": parts})
    if entries:
        code = await gc.txn_commit(gid, pid, epoch, entries).get()
        if code:
            for t in topics:
                for r in t["partitions"]:
                    if (t["name"], r["partition_index"]) in entries:
                        r["error_code"] = _downgrade(ctx, code)
    return {"throttle_time_ms": 0, "topics": topics}
