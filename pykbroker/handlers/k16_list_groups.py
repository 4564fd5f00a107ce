"""ListGroups (key 16), versions 0-5: every group this broker coordinates.

Behaviour (as Apache Kafka): classic groups report their protocol type ("" for standalone
offset-only groups) and state (Empty, PreparingRebalance, CompletingRebalance, Stable); KIP-848
groups report protocol type "consumer", type "consumer" and their own states (Empty, Assigning,
Reconciling, Stable); KIP-1071 streams groups protocol type and type "streams" (states Empty,
NotReady, Assigning, Reconciling, Stable).  Deleted (Dead) groups are not listed.  v4+ states_filter and v5
types_filter match case-insensitively; an empty filter matches everything.
Version notes: v1 throttle_time_ms; v3 flexible; v4 states filter and group_state; v5 types
filter and group_type ("classic"/"consumer"/"share"/"streams"; a share group's protocol type is "share",
a streams group's "streams").
"""
from __future__ import annotations

from ..acl.check import session
from ..acl.requirements import need
from ..coordinator.group.api import coordinator
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 16
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")
_GROUP = need(API_KEY, "group")


async def handle(ctx: RequestContext, request: dict) -> dict:
    gc = coordinator(ctx)
    states = {s.lower() for s in (request["states_filter"] or [])}
    types = {t.lower() for t in (request["types_filter"] or [])}
    out = []
    # DESCRIBE on the cluster lists every group; otherwise only those the client may describe
    az = session(ctx)
    if az is not None and az.permits(_CLUSTER, log_denied=False):   # a filter: not logged
        az = None
    for gid, g in sorted(gc.groups.items()):
        if g.state == "Dead":
            continue
        if az is not None and not az.permits(_GROUP, gid, log_denied=False):
            continue
        state = g.summary_state()
        if states and state.lower() not in states:
            continue
        if types and g.kind not in types:
            continue
        out.append({"group_id": gid, "protocol_type": g.protocol_type or "",
                    "group_state": state, "group_type": g.kind})
    return {"throttle_time_ms": 0, "error_code": 0, "groups": out}
