"""OffsetCommit (key 8), versions 2-9: store a group's consumed positions in __consumer_offsets.

Behaviour (as Apache Kafka's group coordinator):
- group checks, in Kafka's order: empty group id: INVALID_GROUP_ID; unknown group with
  generation >= 0: ILLEGAL_GENERATION (with generation -1 the commit creates a standalone Empty
  group: assign()+commit users); group.instance.id bound to another member: FENCED_INSTANCE_ID;
  generation -1 on an Empty group: accepted; CompletingRebalance: REBALANCE_IN_PROGRESS; unknown
  member: UNKNOWN_MEMBER_ID; wrong generation: ILLEGAL_GENERATION.  Commits during
  PreparingRebalance with the current generation are accepted (eager clients commit before
  rejoining).  KIP-848 groups check member id and epoch instead (STALE_MEMBER_EPOCH /
  UNKNOWN_MEMBER_ID).  A group error applies to every partition.
- per partition: a topic or partition this cluster does not have: UNKNOWN_TOPIC_OR_PARTITION;
  metadata longer than offset.metadata.max.bytes (4096): OFFSET_METADATA_TOO_LARGE; null
  metadata is stored as "".
- the accepted partitions are appended as one batch to the group's __consumer_offsets partition
  and answered once the append is done; OffsetFetch sees them only then.
Version notes: v2-4 retention_time_ms (-1 = broker default; else an explicit expiry, stored as
OffsetCommitValue v1); v3 throttle_time_ms; v6 committed_leader_epoch; v7 group_instance_id;
v8 flexible; v9 generation field is the KIP-848 member epoch.  v0/v1 (ZooKeeper-era offset
storage) are not served, as in Kafka 4.
"""
from __future__ import annotations

import time

from ..coordinator.group.api import group_precheck
from ..coordinator.group.coordinator import OFFSET_METADATA_MAX_BYTES
from ..coordinator.group.offsets import OffsetAndMetadata
from ..protocol.errors import ErrorCode as E

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9


def _all(request, code):
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": int(code)}
                                           for p in t["partitions"]]} for t in request["topics"]]}


async def handle(ctx, request):
    gid = request["group_id"]
    if not gid:
        return _all(request, E.INVALID_GROUP_ID)
    gc, err = await group_precheck(ctx, gid)
    if err:
        return _all(request, err)
    err, group = gc.validate_commit(gid, request["generation_id_or_member_epoch"], request["member_id"] or "",
                                    request["group_instance_id"])
    if err:
        return _all(request, err)
    now = int(time.time() * 1000)
    retention = request["retention_time_ms"] if ctx.api_version <= 4 else -1
    expire = now + retention if retention is not None and retention >= 0 else None
    md = ctx.broker.metadata
    entries = {}
    results = []
    for t in request["topics"]:
        info = md.get(t["name"]) if md is not None else None
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
                entries[(t["name"], idx)] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                              meta or "", now, expire)
            parts.append({"partition_index": idx, "error_code": int(code)})
        results.append({"name": t["name"], "partitions": parts})
    if entries:
        code = await gc.commit(gid, entries).get()
        if code:
            for t in results:
                for p in t["partitions"]:
                    if (t["name"], p["partition_index"]) in entries:
                        p["error_code"] = int(code)
    return {"throttle_time_ms": 0, "topics": results}


def error_response(ctx, request, code):
    return _all(request, code)
