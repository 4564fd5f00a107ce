"""SyncGroup (key 14), versions 0-5: distribute the leader's assignment (classic groups).

Behaviour (as Apache Kafka):
- unknown group or member: UNKNOWN_MEMBER_ID; group.instance.id bound to another member:
  FENCED_INSTANCE_ID; wrong generation: ILLEGAL_GENERATION; v5 protocol_type/protocol_name
  different from the group's: INCONSISTENT_GROUP_PROTOCOL; a rebalance in progress:
  REBALANCE_IN_PROGRESS.
- in CompletingRebalance followers wait until the leader's SyncGroup arrives; the leader's
  assignment bytes are relayed verbatim (members it left out get empty bytes).  The group's
  metadata with that assignment is appended to ``__consumer_offsets`` first; only once the
  append is done does the group become Stable and every waiting member get its answer.  A
  failed append answers them with Kafka's mapping (NOT_ENOUGH_REPLICAS / REQUEST_TIMED_OUT /
  UNKNOWN_TOPIC_OR_PARTITION -> COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER /
  KAFKA_STORAGE_ERROR -> NOT_COORDINATOR, size errors -> UNKNOWN_SERVER_ERROR) and the group
  rebalances again.  In Stable the member's current assignment is returned at once.
Version notes: v1 throttle_time_ms; v3 group_instance_id; v4 flexible; v5 protocol type/name in
request and response.
"""
from __future__ import annotations

from ..acl.requirements import need
from ..server.dispatch import RequestContext
from .support.common import classic_group
from .support.versions import VERSIONS

API_KEY = 14
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")


def _err(code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "assignment": b""}


async def handle(ctx: RequestContext, request: dict) -> dict:
    g, err = await classic_group(ctx, _GROUP, request["group_id"])
    if err:
        return _err(err)
    assignments = {a["member_id"]: a["assignment"] for a in request["assignments"]}
    fut = g.sync(request["member_id"], request["group_instance_id"], request["generation_id"],
                 request["protocol_type"], request["protocol_name"], assignments)
    res = dict(await fut.get())
    res["throttle_time_ms"] = 0
    if res["error_code"]:
        res.pop("protocol_type", None)
        res.pop("protocol_name", None)
    return res


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _err(code)
