"""DescribeGroups (key 15), versions 0-5: state and members of classic groups.

Behaviour (as Apache Kafka): a Stable group reports its protocol name and, per member, the
member's metadata for that protocol and its assignment; in other states protocol_data is "" and
metadata/assignment are empty.  An unknown group is reported with state "Dead", empty fields and
no error (v0-5; Kafka's GROUP_ID_NOT_FOUND is a v6 addition).  An empty group id:
INVALID_GROUP_ID.  A KIP-848 group answers GROUP_ID_NOT_FOUND ("not a classic group"): admin
clients describe those with ConsumerGroupDescribe.
authorized_operations (v3+) is INT32_MIN unless requested; pykbroker has no authorizer, so a
request for them gets every group operation (READ, DESCRIBE, DELETE).
Client hosts are shown as Kafka shows them ("/127.0.0.1").
Version notes: v1 throttle_time_ms; v3 authorized operations; v4 group_instance_id; v5 flexible.
"""
from __future__ import annotations

from ..coordinator.group.api import group_precheck
from ..protocol.errors import ErrorCode as E

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 5

# AclOperation bits: READ(3), DESCRIBE(8), DELETE(6).
_GROUP_OPS = (1 << 3) | (1 << 8) | (1 << 6)


def _dead(gid, code=0):
    return {"error_code": int(code), "group_id": gid, "group_state": "Dead", "protocol_type": "",
            "protocol_data": "", "members": []}


async def handle(ctx, request):
    out = []
    ops = _GROUP_OPS if request["include_authorized_operations"] else -2147483648
    for gid in request["groups"]:
        if not gid:
            out.append(_dead(gid, E.INVALID_GROUP_ID))
            continue
        gc, err = await group_precheck(ctx, gid, create_topic=False)
        if err:
            out.append(_dead(gid, err))
            continue
        g = gc.get_group(gid)
        if g is None:
            d = _dead(gid)
        elif g.kind == "consumer":
            # As Kafka: a KIP-848 group is described by ConsumerGroupDescribe, not here.
            d = _dead(gid, E.GROUP_ID_NOT_FOUND)
        else:
            stable = g.state == "Stable"
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id, "client_host": m.client_host,
                        "member_metadata": m.metadata(g.protocol_name) if stable else b"",
                        "member_assignment": m.assignment if stable else b""} for m in g.members.values()]
            d = {"error_code": 0, "group_id": gid, "group_state": g.state, "protocol_type": g.protocol_type or "",
                 "protocol_data": (g.protocol_name or "") if stable else "", "members": members}
        d["authorized_operations"] = ops
        out.append(d)
    return {"throttle_time_ms": 0, "groups": out}


def error_response(ctx, request, code):
    return {"groups": [_dead(g, code) for g in request["groups"]]}
