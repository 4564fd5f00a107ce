"""OffsetFetch (key 9), versions 1-10: read a group's committed offsets.

Behaviour (as Apache Kafka):
- a partition without a committed offset (or an unknown group): offset -1, leader epoch -1,
  metadata "" and no error.  topics null (v2+) returns every committed offset of the group.
- committed metadata and leader epoch come back exactly as committed.
- the empty group id is a valid group (as Kafka's coordinator keeps it for offsets).
- group-level errors (NOT_COORDINATOR, UNKNOWN_MEMBER_ID, ...): v1 per
  partition; v2-7 top-level error_code (partitions carry it too); v8+ per group, with no topics.
- v10 (KIP-848) names topics by id: an unknown or zero id answers UNKNOWN_TOPIC_ID per
  partition; responses carry topic_id with name ""; "all offsets" lists the group's topics by
  their current ids.
- v9 (KIP-848): when member_id/member_epoch are given for a consumer group, the member must exist
  (UNKNOWN_MEMBER_ID) with that epoch (STALE_MEMBER_EPOCH).
- require_stable (v7+, KIP-447): a partition with a transactional offset commit still pending
  (its transaction not completed) answers UNSTABLE_OFFSET_COMMIT with offset -1, as Kafka; without
  require_stable the last committed (materialized) offset is returned.
Version notes: v2 top-level error and null topics; v3 throttle_time_ms; v5 committed leader
epoch; v6 flexible; v7 require_stable; v8 several groups per request; v9 member id/epoch;
v10 topic ids instead of names.
"""
from __future__ import annotations

from typing import Any

from ..acl.check import session
from ..acl.requirements import need
from ..coordinator.group.api import group_precheck
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 9
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")
_TOPIC = need(API_KEY, "topic")


def _part(idx: int, om: Any, code: int = 0) -> dict:
    if om is None:
        return {"partition_index": idx, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": int(code)}
    return {"partition_index": idx, "committed_offset": om.offset, "committed_leader_epoch": om.leader_epoch,
            "metadata": om.metadata, "error_code": int(code)}


def _topic(v: int, name: str | None, tid: Any, parts: Any) -> dict:
    if v >= 10:
        return {"name": "", "topic_id": tid, "partitions": parts}
    return {"name": name, "partitions": parts}


def _stable_part(gc: Any, gid: str, tp: Any, om: Any, require_stable: bool) -> dict:
    if require_stable and gc.has_pending_txn_offset(gid, tp):
        return _part(tp[1], None, E.UNSTABLE_OFFSET_COMMIT)
    return _part(tp[1], om)


async def _fetch_group(ctx: RequestContext, gid: str, topics: list, member_id: str | None = None,
                       member_epoch: int = -1, require_stable: bool = False) -> tuple:
    """-> (error code, topics list)"""
    v = ctx.api_version
    # The empty group id is a group like any other (Kafka: "for backwards compatibility, we
    # support fetch commits for the empty group id"; only a null id is INVALID_GROUP_ID).
    az = session(ctx)
    if az is not None and not az.permits(_GROUP, gid):
        err: int = _GROUP.denial   # DESCRIBE on the group, before the coordinator's checks
    else:
        gc, err = await group_precheck(ctx, gid, create_topic=False)
    if not err and (member_id is not None or member_epoch >= 0):
        g = gc.get_group(gid)
        if g is not None and g.kind == "consumer":
            err = gc.consumer.validate_fetch(g, member_id, member_epoch)
        elif g is not None and g.kind == "streams":
            err = gc.streams.validate_fetch(g, member_id, member_epoch)
    if err:
        if v >= 8:
            return err, []  # a group-level error: the group's entry carries no topics (as Kafka)
        out = [_topic(v, t["name"], None, [_part(i, None, err) for i in t["partition_indexes"]])
               for t in (topics or [])]
        return err, out
    md = ctx.services.metadata_cache
    if topics is None:
        by_topic: dict = {}
        for (t, p), om in sorted(gc.fetch_offsets(gid).items()):
            by_topic.setdefault(t, []).append(_stable_part(gc, gid, (t, p), om, require_stable))
        out = []
        for t, ps in by_topic.items():
            if az is not None and not az.permits(_TOPIC, t):
                continue   # all topics: those the client may not describe are left out
            if v >= 10:
                info = md.get(t) if md is not None else None
                if info is None:
                    continue  # no id to name it by (its offsets go when the topic is deleted)
                out.append(_topic(v, t, info.topic_id, ps))
            else:
                out.append(_topic(v, t, None, ps))
        return 0, out
    out = []
    for t in topics:
        if v >= 10:
            # v10 names topics by id only (KIP-848): an unknown or zero id: UNKNOWN_TOPIC_ID.
            name = md.name_of(t["topic_id"]) if md is not None else None
            if name is None:
                out.append(_topic(v, None, t["topic_id"],
                                  [_part(i, None, E.UNKNOWN_TOPIC_ID) for i in t["partition_indexes"]]))
                continue
            tid = t["topic_id"]
        else:
            name, tid = t["name"], None
        if az is not None and not az.permits(_TOPIC, name):
            out.append(_topic(v, name, tid, [_part(i, None, _TOPIC.denial)
                                             for i in t["partition_indexes"]]))
            continue
        got = gc.fetch_offsets(gid, [(name, i) for i in t["partition_indexes"]])
        out.append(_topic(v, name, tid, [_stable_part(gc, gid, (name, i), got[(name, i)], require_stable)
                                         for i in t["partition_indexes"]]))
    return 0, out


async def handle(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    if v >= 8:
        groups = []
        for g in request["groups"]:
            err, topics = await _fetch_group(ctx, g["group_id"], g["topics"], g["member_id"], g["member_epoch"],
                                             request["require_stable"])
            groups.append({"group_id": g["group_id"], "topics": topics, "error_code": int(err)})
        return {"throttle_time_ms": 0, "groups": groups}
    topics = request["topics"]
    if v < 2 and topics is None:
        topics = []
    err, out = await _fetch_group(ctx, request["group_id"], topics,
                                  require_stable=v >= 7 and request["require_stable"])
    return {"throttle_time_ms": 0, "topics": out, "error_code": int(err)}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    if ctx.api_version >= 8:
        return {"groups": [{"group_id": g["group_id"], "topics": [], "error_code": int(code)}
                           for g in request["groups"]]}
    return {"topics": [], "error_code": int(code)}
