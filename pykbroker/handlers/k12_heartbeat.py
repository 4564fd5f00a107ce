"""Heartbeat (key 12), versions 0-4: keep a classic group member's session alive.

Behaviour (as Apache Kafka): unknown group or member: UNKNOWN_MEMBER_ID; group.instance.id bound
to another member id: FENCED_INSTANCE_ID; wrong generation: ILLEGAL_GENERATION; group
rebalancing (PreparingRebalance): REBALANCE_IN_PROGRESS, which is how members learn they must
rejoin; CompletingRebalance and Stable: NONE.  Every accepted heartbeat restarts the member's
session timeout.
Version notes: v1 throttle_time_ms; v3 group_instance_id; v4 flexible.
"""
from __future__ import annotations

from ..coordinator.group.api import group_precheck
from ..protocol.errors import ErrorCode as E

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx, request):
    gid = request["group_id"]
    if not gid:
        return {"throttle_time_ms": 0, "error_code": int(E.INVALID_GROUP_ID)}
    gc, err = await group_precheck(ctx, gid)
    if not err:
        g = gc.get_group(gid)
        if g is None or g.kind != "classic":
            err = E.UNKNOWN_MEMBER_ID
        else:
            err = g.heartbeat(request["member_id"], request["group_instance_id"], request["generation_id"])
    return {"throttle_time_ms": 0, "error_code": int(err)}
