"""ShareGroupDescribe (key 77), version 1 (what Kafka 4.4 serves).

Behaviour (as Apache Kafka): one entry per requested group id, in request order.  An empty id:
INVALID_GROUP_ID; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker does not
coordinate it; an unknown group: GROUP_ID_NOT_FOUND "Group X not found."; a group of another
type: GROUP_ID_NOT_FOUND "Group X is not a share group.".  A share group: its state (Empty or
Stable), group and assignment epochs, assignor "simple", and each member's subscription and
current assignment (topic ids with names).  ``authorized_operations``: Kafka's no-authorizer set
when asked for, else INT32_MIN.  Entries for empty ids come first (Kafka's order), the others
follow in request order.
"""
from __future__ import annotations

from ..coordinator.group.api import GROUP_AUTHORIZED_OPERATIONS, group_precheck
from ..protocol.errors import ErrorCode as E
from .common import error_per_item

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1


def _err(gid, code, msg=None):
    return {"error_code": int(code), "error_message": msg, "group_id": gid, "group_state": "",
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": -2147483648}


async def handle(ctx, request):
    out = []
    for gid in request["group_ids"]:
        if not gid:
            out.append(_err(gid, E.INVALID_GROUP_ID))
            continue
        gc, err = await group_precheck(ctx, gid, create_topic=False)
        if err:
            out.append(_err(gid, err))
            continue
        g = gc.get_group(gid)
        if g is None or g.kind != "share":
            out.append(_err(gid, E.GROUP_ID_NOT_FOUND, "Group %s not found." % gid if g is None
                            else "Group %s is not a share group." % gid))
            continue
        d = gc.share.describe(g)
        d["authorized_operations"] = GROUP_AUTHORIZED_OPERATIONS if request["include_authorized_operations"] else -2147483648
        out.append(d)
    # Kafka answers the invalid (empty) group ids first, then the others in request order
    out.sort(key=lambda d: 0 if not d["group_id"] else 1)
    return {"throttle_time_ms": 0, "groups": out}


error_response = error_per_item("group_ids", "groups", _err)
