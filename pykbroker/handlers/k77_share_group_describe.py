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

from ..acl.requirements import needs
from ..server.dispatch import RequestContext
from .support.common import error_per_item
from .support.modern_group import AUTHORIZED_OPERATIONS_OMITTED, describe_groups, DESCRIBE_ROLES as _group_acl
from .support.versions import VERSIONS

API_KEY = 77
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the row describe_groups checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_group_acl)


def _err(gid: str, code: int, msg: str | None = None) -> dict:
    return {"error_code": int(code), "error_message": msg, "group_id": gid, "group_state": "",
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


async def handle(ctx: RequestContext, request: dict) -> dict:
    out = await describe_groups(ctx, request, "share", _err, lambda gc, g: gc.share.describe(g))
    # Kafka answers the invalid (empty) group ids first, then the others in request order
    out.sort(key=lambda d: 0 if not d["group_id"] else 1)
    return {"throttle_time_ms": 0, "groups": out}


error_response = error_per_item("group_ids", "groups", _err)
