"""DeleteGroups (key 42), versions 0-2: delete groups and their committed offsets.

Behaviour (as Apache Kafka): per group: empty id: INVALID_GROUP_ID; unknown (or already deleted)
group: GROUP_ID_NOT_FOUND; a group with members (not Empty): NON_EMPTY_GROUP; otherwise
tombstones for its offsets and its metadata are appended to __consumer_offsets and the group
is gone (answered once the append is done).
Version notes: v1 same as v0; v2 flexible.
"""
from __future__ import annotations

from ..coordinator.group.api import group_precheck
from ..protocol.errors import ErrorCode as E
from .common import error_per_item

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx, request):
    results = []
    for gid in request["groups_names"]:
        if not gid:
            code = E.INVALID_GROUP_ID
        else:
            gc, code = await group_precheck(ctx, gid, create_topic=False)
            if not code:
                code = await gc.delete_group(gid).get()
        results.append({"group_id": gid, "error_code": int(code)})
    return {"throttle_time_ms": 0, "results": results}


error_response = error_per_item("groups_names", "results",
                                lambda g, code: {"group_id": g, "error_code": int(code)})
