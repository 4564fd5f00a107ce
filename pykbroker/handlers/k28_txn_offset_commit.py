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
  generation -1 without a member id skips the check.  A generation for a group that does not
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

import time

from ..coordinator.group.api import group_precheck
from ..coordinator.group.coordinator import OFFSET_METADATA_MAX_BYTES
from ..coordinator.group.offsets import OFFSETS_TOPIC, OffsetAndMetadata
from ..protocol.errors import ErrorCode as E

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 6


def _downgrade(ctx, code):
    if code == E.PRODUCER_FENCED and ctx.api_version < 3:
        return int(E.INVALID_PRODUCER_EPOCH)
    if code == E.TRANSACTION_ABORTABLE and ctx.api_version < 4:
        return int(E.INVALID_TXN_STATE)
    if code == E.STALE_MEMBER_EPOCH and ctx.api_version < 6:
        # Kafka's group coordinator maps it for clients that predate KIP-1319
        return int(E.ILLEGAL_GENERATION)
    return int(code)


def _tkey(t, v):
    return t["topic_id"] if v >= 6 else t["name"]


def _topic(t, v, parts):
    if v >= 6:
        return {"name": "", "topic_id": t["topic_id"], "partitions": parts}
    return {"name": t["name"], "partitions": parts}


def error_response(ctx, request, code):
    v = ctx.api_version
    code = _downgrade(ctx, code)
    return {"throttle_time_ms": 0, "topics": [
        _topic(t, v, [{"partition_index": p["partition_index"], "error_code": code} for p in t["partitions"]])
        for t in request["topics"]]}


async def _coordinate(ctx, request, accepted):
    """The group coordinator's part for the partitions that passed the topic checks:
    [(topic, partition, error code)], written offsets pending until the marker."""
    v = ctx.api_version
    gid = request["group_id"]
    tc = getattr(ctx.broker, "transaction_coordinator", None)
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
        err, g = gc.validate_commit(gid, generation, request["member_id"] or "", request["group_instance_id"])
        if err == E.ILLEGAL_GENERATION and g is None and v >= 6:
            # a generation for a group that does not exist: KIP-1319 names it for v6 clients
            err = E.GROUP_ID_NOT_FOUND
    if err:
        return [(t, p, err) for t, _, p in accepted]
    now = int(time.time() * 1000)
    entries = {}
    out = []
    for t, name, p in accepted:
        idx = p["partition_index"]
        meta = p["committed_metadata"]
        if meta is not None and len(meta.encode("utf-8")) > OFFSET_METADATA_MAX_BYTES:
            code = E.OFFSET_METADATA_TOO_LARGE
        else:
            code = E.NONE
            entries[(name, idx)] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                     meta or "", now, None)
        out.append([t, p, code, (name, idx)])
    if entries:
        code = await gc.txn_commit(gid, request["producer_id"], request["producer_epoch"], entries).get()
        if code:
            for r in out:
                if r[3] in entries:
                    r[2] = code
    return [(t, p, code) for t, p, code, _ in out]


async def handle(ctx, request):
    v = ctx.api_version
    md = ctx.broker.metadata_cache
    # 1. Topic checks come first (Kafka does them before handing the request to the group
    #    coordinator): their errors lead the response.
    early: dict = {}   # topic key -> (topic, [partition results])
    accepted = []      # (topic, name, partition)
    for t in request["topics"]:
        if v >= 6:
            # v6 names topics by id only (KIP-1319): an unknown or zero id is UNKNOWN_TOPIC_ID.
            name = md.name_of(t["topic_id"])
            info = md.get(name) if name is not None else None
            missing = E.UNKNOWN_TOPIC_ID
        else:
            name = t["name"]
            info = md.get(name)
            missing = E.UNKNOWN_TOPIC_OR_PARTITION
        for p in t["partitions"]:
            idx = p["partition_index"]
            if info is None or not (0 <= idx < info.num_partitions):
                code = missing if info is None else E.UNKNOWN_TOPIC_OR_PARTITION
                early.setdefault(_tkey(t, v), (t, []))[1].append({"partition_index": idx, "error_code": int(code)})
            else:
                accepted.append((t, name, p))
    # 2. The transaction and group checks and the write, for the partitions left (none left:
    #    answered without them, as Kafka does).
    late: dict = {}
    if accepted:
        for t, p, code in await _coordinate(ctx, request, accepted):
            late.setdefault(_tkey(t, v), (t, []))[1].append(
                {"partition_index": p["partition_index"], "error_code": _downgrade(ctx, code)})
    # 3. Merged as Kafka's response builder does: one entry per topic (by id at v6), the topics
    #    with early errors first, the coordinator's partitions appended to their topic's entry.
    out = {k: _topic(t, v, list(parts)) for k, (t, parts) in early.items()}
    for k, (t, parts) in late.items():
        if k in out:
            out[k]["partitions"].extend(parts)
        else:
            out[k] = _topic(t, v, list(parts))
    return {"throttle_time_ms": 0, "topics": list(out.values())}
