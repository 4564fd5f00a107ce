"""OffsetDelete (key 47), version 0: delete a group's committed offsets for some partitions.

Behaviour (as Apache Kafka, KIP-496): unknown group: GROUP_ID_NOT_FOUND (top level); empty id:
INVALID_GROUP_ID.  An Empty group: every listed offset is deleted (tombstones appended to
__consumer_offsets).  An active group using the consumer protocol: partitions of topics some
member subscribes to get GROUP_SUBSCRIBED_TO_TOPIC, the others are deleted.  An active group
whose subscriptions cannot be read (not the consumer protocol): NON_EMPTY_GROUP (top level).
Deleting an offset that was never committed succeeds.
"""
from __future__ import annotations

from ..acl.check import session
from ..acl.requirements import need
from ..coordinator.group.api import group_precheck
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 47
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")
_TOPIC = need(API_KEY, "topic")


def _top(code: int) -> dict:
    return {"error_code": int(code), "throttle_time_ms": 0, "topics": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    gid = request["group_id"]
    az = session(ctx)
    if az is not None and not az.permits(_GROUP, gid):
        return _top(_GROUP.denial)   # DELETE on the group, first (Kafka)
    if not gid:
        return _top(E.INVALID_GROUP_ID)
    gc, err = await group_precheck(ctx, gid, create_topic=False)
    if err:
        return _top(err)
    g = gc.get_group(gid)
    if g is None:
        return _top(E.GROUP_ID_NOT_FOUND)
    subscribed = set()
    if g.state != "Empty":
        subscribed = g.subscribed_topics()
        if subscribed is None:
            return _top(E.NON_EMPTY_GROUP)
    doomed = []
    topics = []
    for t in request["topics"]:
        parts = []
        for p in t["partitions"]:
            if az is not None and not az.permits(_TOPIC, t["name"]):
                code = _TOPIC.denial   # READ on the topic (Kafka)
            elif t["name"] in subscribed:
                code = E.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                code = E.NONE
                doomed.append((t["name"], p["partition_index"]))
            parts.append({"partition_index": p["partition_index"], "error_code": int(code)})
        topics.append({"name": t["name"], "partitions": parts})
    if doomed:
        code = await gc.delete_offsets(gid, doomed).get()
        if code:
            return _top(code)
    return {"error_code": 0, "throttle_time_ms": 0, "topics": topics}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _top(code)
