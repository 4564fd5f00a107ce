"""DeleteGroups (key 42), versions 0-3: delete groups and their committed offsets.

Behaviour (as Apache Kafka 4.4): the request's group ids are deduplicated (the response is a map
keyed by group id, one result per distinct id, first-seen order).  Per group: this broker not
coordinating it: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS; unknown (or already deleted)
group, including the empty id: GROUP_ID_NOT_FOUND (Kafka answers INVALID_GROUP_ID only for a
null id, which the wire format cannot carry); a group with members, classic or consumer
(KIP-848): NON_EMPTY_GROUP; otherwise tombstones for its offsets and its metadata are appended
to __consumer_offsets and the group is gone (answered once the append is done).
Version notes: v1 same as v0; v2 flexible; v3 adds a per-group ``error_message``.  Kafka fills it
only from an ApiError whose text is not the error code's generic one (ApiError.fromThrowable
drops generic texts), i.e. from a streams-group topology-description plugin failing
(GROUP_DELETION_FAILED, which Kafka maps to UNKNOWN_SERVER_ERROR below v3).  pykbroker has no
such plugin, so every result carries a null message, as Kafka's do without one.
"""
from __future__ import annotations

from ..acl.check import permits
from ..acl.requirements import need
from ..coordinator.group.api import group_precheck
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 42
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")


def _result(gid: str, code: int) -> dict:
    return {"group_id": gid, "error_code": int(code), "error_message": None}


async def handle(ctx: RequestContext, request: dict) -> dict:
    results = []
    for gid in dict.fromkeys(request["groups_names"]):
        if not permits(ctx, _GROUP, gid):
            results.append(_result(gid, _GROUP.denial))   # DELETE on the group (Kafka)
            continue
        gc, code = await group_precheck(ctx, gid, create_topic=False)
        if not code:
            code = await gc.delete_group(gid).get()
        results.append(_result(gid, code))
    return {"throttle_time_ms": 0, "results": results}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return {"throttle_time_ms": 0,
            "results": [_result(g, code) for g in dict.fromkeys(request.get("groups_names") or [])]}
