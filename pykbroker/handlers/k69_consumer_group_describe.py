"""ConsumerGroupDescribe (key 69), versions 0-1: describe KIP-848 consumer groups.

Behaviour (as Apache Kafka): per group: empty id: INVALID_GROUP_ID; unknown group or a classic
group: GROUP_ID_NOT_FOUND; otherwise state (Empty, Assigning, Reconciling, Stable), group and
assignment epochs, assignor, and per member its epoch, subscription, current and target
assignment (topic id and name).  authorized_operations: INT32_MIN unless requested (then every
operation Kafka lists for a group, 3400: no authorizer).
Version notes: v1 adds member_type (1 = consumer protocol member, KIP-1099).
"""
from __future__ import annotations

from ..acl.requirements import needs
from ..server.dispatch import RequestContext
from .support.common import error_per_item
from .support.modern_group import describe_groups, DESCRIBE_ROLES as _group_acl
from .support.versions import VERSIONS

API_KEY = 69
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the row describe_groups checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_group_acl)

def _err(gid: str, code: int, msg: str | None = None) -> dict:
    # Kafka's error entries leave the epochs at the schema default, 0
    return {"error_code": int(code), "error_message": msg, "group_id": gid, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    out = await describe_groups(ctx, request, "consumer", _err, lambda gc, g: gc.consumer.describe(g))
    return {"throttle_time_ms": 0, "groups": out}


error_response = error_per_item("group_ids", "groups", _err)
