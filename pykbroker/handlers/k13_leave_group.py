"""LeaveGroup (key 13), versions 0-5: members leave a classic group (rebalancing the rest).

Behaviour (as Apache Kafka):
- unknown group: UNKNOWN_MEMBER_ID (top level).
- per member: unknown id: UNKNOWN_MEMBER_ID; with group.instance.id: the static member is found
  by instance id (member id may be empty), FENCED_INSTANCE_ID if bound to another member id.
  A member still pending (MEMBER_ID_REQUIRED handed out) simply disappears.  Removing a member
  of a Stable/CompletingRebalance group starts a rebalance; in PreparingRebalance the join may
  complete without it.
- v0-2 (one member): the member's error is the top-level error; v3+: per-member results and a
  top-level NONE.
Version notes: v1 throttle_time_ms; v3 batched members with group_instance_id (KIP-345);
v4 flexible; v5 reason (logged).
"""
from __future__ import annotations

from ..acl.requirements import need
from ..server.dispatch import RequestContext
from .support.common import classic_group
from .support.versions import VERSIONS

API_KEY = 13
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")


async def handle(ctx: RequestContext, request: dict) -> dict:
    v = ctx.api_version
    gid = request["group_id"]
    members = request["members"] if v >= 3 else [{"member_id": request["member_id"], "group_instance_id": None}]
    results = []
    g, top = await classic_group(ctx, _GROUP, gid)
    if not top:
        for m in members:
            code = g.leave(m["member_id"] or "", m["group_instance_id"])
            results.append({"member_id": m["member_id"], "group_instance_id": m["group_instance_id"],
                            "error_code": int(code)})
    if v < 3:
        if not top and results:
            top = results[0]["error_code"]
        return {"throttle_time_ms": 0, "error_code": int(top)}
    return {"throttle_time_ms": 0, "error_code": int(top), "members": results if not top else []}
