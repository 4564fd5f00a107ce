"""Heartbeat (key 12), versions 0-4: keep a classic group member's session alive.

Behaviour (as Apache Kafka): unknown group or member: UNKNOWN_MEMBER_ID; group.instance.id bound
to another member id: FENCED_INSTANCE_ID; wrong generation: ILLEGAL_GENERATION; group
rebalancing (PreparingRebalance): REBALANCE_IN_PROGRESS, which is how members learn they must
rejoin; CompletingRebalance and Stable: NONE.  Every accepted heartbeat restarts the member's
session timeout.
Version notes: v1 throttle_time_ms; v3 group_instance_id; v4 flexible.
"""
from __future__ import annotations

from ..acl.requirements import need
from ..server.dispatch import RequestContext
from .support.common import classic_group
from .support.versions import VERSIONS

API_KEY = 12
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")


async def handle(ctx: RequestContext, request: dict) -> dict:
    g, err = await classic_group(ctx, _GROUP, request["group_id"])
    if not err:
        err = g.heartbeat(request["member_id"], request["group_instance_id"], request["generation_id"])
    return {"throttle_time_ms": 0, "error_code": int(err)}
