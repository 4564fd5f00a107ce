"""ConsumerGroupDescribe (key 69), versions 0-1: describe KIP-848 consumer groups.

Behaviour (as Apache Kafka): per group: empty id: INVALID_GROUP_ID; unknown group or a classic
group: GROUP_ID_NOT_FOUND; otherwise state (Empty, Assigning, Reconciling, Stable), group and
assignment epochs, assignor, and per member its epoch, subscription, current and target
assignment (topic id and name).  authorized_operations: INT32_MIN unless requested (then every
operation Kafka lists for a group, 3400: no authorizer).
Version notes: v1 adds member_type (1 = consumer protocol member, KIP-1099).
"""
from __future__ import annotations

from ..coordinator.group.api import GROUP_AUTHORIZED_OPERATIONS, group_precheck
from ..protocol.errors import ErrorCode as E
from .common import error_per_item

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1

def _err(gid, code, msg=None):
    # Kafka's error entries leave the epochs at the schema default, 0
    return {"error_code": int(code), "error_message": msg, "group_id": gid, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}


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
        if g is None or g.kind != "consumer":
            out.append(_err(gid, E.GROUP_ID_NOT_FOUND, "Group %s not found." % gid if g is None
                            else "Group %s is not a consumer group." % gid))
            continue
        d = gc.consumer.describe(g)
        d["authorized_operations"] = GROUP_AUTHORIZED_OPERATIONS if request["include_authorized_operations"] else -2147483648
        out.append(d)
    return {"throttle_time_ms": 0, "groups": out}


error_response = error_per_item("group_ids", "groups", _err)
