"""OffsetCommit (key 8), versions 2-10: store a group's consumed positions in __consumer_offsets.

Behaviour (as Apache Kafka's group coordinator):
- topic checks first (as Kafka's request handler, before the coordinator): a topic or partition
  this cluster does not have: UNKNOWN_TOPIC_OR_PARTITION (v10: an unknown or zero topic id:
  UNKNOWN_TOPIC_ID); those partitions lead the response; the group checks below apply to the
  remaining partitions only.
- group checks, in Kafka's order (the empty group id is accepted, as Kafka's coordinator does
  for offsets "for backwards compatibility"): unknown group with
  generation >= 0: ILLEGAL_GENERATION (with generation -1 the commit creates a standalone Empty
  group: assign()+commit users); group.instance.id bound to another member: FENCED_INSTANCE_ID;
  generation -1 on an Empty group: accepted; CompletingRebalance: REBALANCE_IN_PROGRESS; unknown
  member: UNKNOWN_MEMBER_ID; wrong generation: ILLEGAL_GENERATION.  Commits during
  PreparingRebalance with the current generation are accepted (eager clients commit before
  rejoining).  KIP-848 groups check member id and epoch instead (STALE_MEMBER_EPOCH /
  UNKNOWN_MEMBER_ID).  A group error applies to every partition that passed the topic checks.
- per partition: metadata longer than offset.metadata.max.bytes (4096):
  OFFSET_METADATA_TOO_LARGE; null metadata is stored as "".
- the accepted partitions are appended as one batch to the group's __consumer_offsets partition
  and answered once the append is done; OffsetFetch sees them only then.
Version notes: v2-4 retention_time_ms (-1 = broker default; else an explicit expiry, stored as
OffsetCommitValue v1); v3 throttle_time_ms; v6 committed_leader_epoch; v7 group_instance_id;
v8 flexible; v9 generation field is the KIP-848 member epoch; v10 topics by id only
(response: topic_id echoed, name "").  v0/v1 (ZooKeeper-era offset storage) are not served,
as in Kafka 4.
"""
from __future__ import annotations

from ..coordinator.group.api import group_precheck
from ..coordinator.group.coordinator import OFFSET_METADATA_MAX_BYTES
from ..coordinator.group.offsets import OffsetAndMetadata
from ..protocol.errors import ErrorCode as E

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 10


def _tkey(t, v):
    return t["topic_id"] if v >= 10 else t["name"]


def _topic(t, v, parts):
    if v >= 10:
        return {"name": "", "topic_id": t["topic_id"], "partitions": parts}
    return {"name": t["name"], "partitions": parts}


def _all(request, code, v=9):
    return {"throttle_time_ms": 0, "topics": [
        _topic(t, v, [{"partition_index": p["partition_index"], "error_code": int(code)} for p in t["partitions"]])
        for t in request["topics"]]}


async def handle(ctx, request):
    v = ctx.api_version
    gid = request["group_id"]
    md = ctx.broker.metadata_cache
    # 1. Topic checks come first (Kafka does them before handing the request to the
    #    coordinator): their errors lead the response, in request order.
    early: dict = {}   # topic key -> (topic, [partition results])
    accepted = []      # (topic, name, partition)
    for t in request["topics"]:
        if v >= 10:
            # v10 names topics by id only (KIP-848); an unknown or zero id: UNKNOWN_TOPIC_ID.
            name = md.name_of(t["topic_id"]) if md is not None else None
            info = md.get(name) if name is not None else None
            missing = E.UNKNOWN_TOPIC_ID
        else:
            name = t["name"]
            info = md.get(name) if md is not None else None
            missing = E.UNKNOWN_TOPIC_OR_PARTITION
        for p in t["partitions"]:
            idx = p["partition_index"]
            if info is None or not (0 <= idx < info.num_partitions):
                code = missing if info is None else E.UNKNOWN_TOPIC_OR_PARTITION
                early.setdefault(_tkey(t, v), (t, []))[1].append({"partition_index": idx, "error_code": int(code)})
            else:
                accepted.append((t, name, p))
    # 2. The coordinator: group checks apply to every accepted partition.
    late: dict = {}
    if accepted:
        # The empty group id is a group like any other here: Kafka's coordinator keeps
        # accepting it for offsets "for backwards compatibility" (only a null id is invalid).
        gc, err = await group_precheck(ctx, gid)
        if not err:
            err, _ = gc.validate_commit(gid, request["generation_id_or_member_epoch"], request["member_id"] or "",
                                        request["group_instance_id"])
        now = ctx.broker.clock.time_ms()   # the broker's clock (pykbroker/clock.py)
        retention = request["retention_time_ms"] if v <= 4 else -1
        expire = now + retention if retention is not None and retention >= 0 else None
        entries = {}
        results = []
        for t, name, p in accepted:
            idx = p["partition_index"]
            meta = p["committed_metadata"]
            if err:
                code = err
            elif meta is not None and len(meta.encode("utf-8")) > OFFSET_METADATA_MAX_BYTES:
                code = E.OFFSET_METADATA_TOO_LARGE
            else:
                code = E.NONE
                entries[(name, idx)] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                         meta or "", now, expire)
            r = {"partition_index": idx, "error_code": int(code)}
            results.append(((name, idx), r))
            late.setdefault(_tkey(t, v), (t, []))[1].append(r)
        if entries:
            code = await gc.commit(gid, entries).get()
            if code:
                for tp, r in results:
                    if tp in entries:
                        r["error_code"] = int(code)
    # 3. Merge as Kafka's response builder does: topics with early errors first, the
    #    coordinator's partitions appended to their topic (or as new topics after them).
    out = {k: _topic(t, v, list(parts)) for k, (t, parts) in early.items()}
    for k, (t, parts) in late.items():
        if k in out:
            out[k]["partitions"].extend(parts)
        else:
            out[k] = _topic(t, v, list(parts))
    return {"throttle_time_ms": 0, "topics": list(out.values())}


def error_response(ctx, request, code):
    return _all(request, code, ctx.api_version)
