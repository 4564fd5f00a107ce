"""JoinGroup (key 11), versions 0-9: classic group membership (see coordinator/group/classic.py).

Behaviour (as Apache Kafka's classic group coordinator):
- empty group id: INVALID_GROUP_ID; session timeout outside
  [group.min.session.timeout.ms, group.max.session.timeout.ms]: INVALID_SESSION_TIMEOUT.
- v4+: a member joining without an id (and without group.instance.id) gets MEMBER_ID_REQUIRED
  with a generated id ("<client.id>-<uuid>") and must rejoin with it (KIP-394).
- an unknown non-empty member id: UNKNOWN_MEMBER_ID; a group.instance.id bound to another member
  id: FENCED_INSTANCE_ID; a protocol type different from the group's or no protocol in common
  with every member: INCONSISTENT_GROUP_PROTOCOL; group full (group.max.size):
  GROUP_MAX_SIZE_REACHED.
- the response waits until every member has rejoined or the rebalance timeout expires (first
  generation of an empty group: after group.initial.rebalance.delay.ms, extended while members
  keep arriving).  The protocol is chosen by vote across members; the leader receives every
  member's metadata for it, followers an empty list.
- static members (v5+ group.instance.id) rejoining with unchanged metadata in a Stable group
  get their old assignment back without a rebalance; v9 leaders are told skip_assignment.
Version notes: v1 adds rebalance_timeout_ms (v0: the session timeout); v2 throttle_time_ms;
v5 group.instance.id; v6 flexible; v7 protocol_type in the response and nullable protocol_name;
v8 reason; v9 skip_assignment.
"""
from __future__ import annotations

from ..acl.check import permits
from ..acl.requirements import need
from ..coordinator.group.api import client_host, group_precheck
from ..coordinator.group.classic import JoinRequest, join_error
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 11
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")


def _shape(ctx: RequestContext, res: dict) -> dict:
    res = dict(res)
    res["throttle_time_ms"] = 0
    if ctx.api_version < 7 and res.get("protocol_name") is None:
        res["protocol_name"] = ""  # not nullable before v7
    return res


async def handle(ctx: RequestContext, request: dict) -> dict:
    gid = request["group_id"]
    mid = request["member_id"] or ""
    if not permits(ctx, _GROUP, gid):   # before the coordinator's checks (Kafka)
        return _shape(ctx, join_error(_GROUP.denial, mid))
    if not gid:
        return _shape(ctx, join_error(E.INVALID_GROUP_ID, mid))
    gc, err = await group_precheck(ctx, gid)
    if err:
        return _shape(ctx, join_error(err, mid))
    st = request["session_timeout_ms"]
    if st < gc.min_session_timeout_ms or st > gc.max_session_timeout_ms:
        return _shape(ctx, join_error(E.INVALID_SESSION_TIMEOUT, mid))
    g = gc.get_group(gid)
    if g is not None and g.kind in ("streams", "share"):
        # a streams or share group never takes classic members (Kafka's classicGroupJoin: "Group
        # exists but it's not a consumer group")
        return _shape(ctx, join_error(E.INCONSISTENT_GROUP_PROTOCOL, mid))
    if g is not None and g.kind == "consumer":
        if g.members:
            # A live KIP-848 group only takes classic members through the upgrade path (not built).
            return _shape(ctx, join_error(E.INCONSISTENT_GROUP_PROTOCOL, mid))
        gc.consumer.drop(g)  # an empty consumer group converts to classic, as in Kafka (tombstones)
        g = None
    if g is None and mid:
        # A member id for a group that does not exist (e.g. deleted, expired): rejoin afresh.
        return _shape(ctx, join_error(E.UNKNOWN_MEMBER_ID, mid))
    g = gc.get_or_create_classic(gid)
    req = JoinRequest(member_id=mid, group_instance_id=request["group_instance_id"],
                      client_id=ctx.client_id or "", client_host=client_host(ctx),
                      session_timeout_ms=st, rebalance_timeout_ms=request["rebalance_timeout_ms"],
                      protocol_type=request["protocol_type"],
                      protocols=[(p["name"], p["metadata"]) for p in request["protocols"]],
                      version=ctx.api_version, reason=request["reason"])
    fut = g.join(req)
    res = await fut.get()
    return _shape(ctx, res)


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return _shape(ctx, join_error(code, request["member_id"] or ""))
