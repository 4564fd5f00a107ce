"""DescribeGroups (key 15), versions 0-6: state and members of classic groups.

Behaviour (as Apache Kafka 4.4, checked against a real broker):
- a Stable group reports its protocol name and, per member, the member's metadata for that
  protocol and its assignment; in other states protocol_data is "" and metadata/assignment are
  empty.  A group that only holds offsets (assign() + commit) is Empty with protocol type "".
- a group that does not exist (never existed, deleted, expired; the empty group id included),
  and a KIP-848 consumer group (admin clients describe those with ConsumerGroupDescribe):
  v0-5 state "Dead", empty fields, no error; v6 (KIP-1043) GROUP_ID_NOT_FOUND with
  error_message "Group <id> not found." / "Group <id> is not a classic group.", state "Dead".
- authorization (with an authorizer): DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED
  for that group.
- authorized_operations (v3+) is INT32_MIN unless requested; when requested, the group
  operations the authorizer allows (without one, every operation Kafka lists for a group: READ,
  DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS = 3400), except on a v6 error entry (Kafka
  leaves INT32_MIN).
- client hosts are shown as Kafka shows them ("/127.0.0.1").
Version notes: v1 throttle_time_ms; v3 authorized operations; v4 group_instance_id; v5 flexible;
v6 GROUP_ID_NOT_FOUND and error_message.
"""
from __future__ import annotations

from ..acl.bindings import GROUP
from ..acl.check import authorized_operations, session
from ..acl.requirements import need
from ..coordinator.group.api import group_precheck
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.common import error_per_item
from .support.versions import VERSIONS

API_KEY = 15
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_GROUP = need(API_KEY, "group")

_NO_OPS = -2147483648


def _dead(gid: str, code: int = 0, message: str | None = None) -> dict:
    return {"error_code": int(code), "error_message": message, "group_id": gid, "group_state": "Dead",
            "protocol_type": "", "protocol_data": "", "members": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    out = []
    v = ctx.api_version
    want_ops = request["include_authorized_operations"]
    az = session(ctx)
    denied = []   # Kafka answers the groups the client may not describe first
    for gid in request["groups"]:
        if az is not None and not az.permits(_GROUP, gid):
            d = _dead(gid, _GROUP.denial)
            d["group_state"] = ""   # Kafka's error entry has no state (checked: tests/differential)
            d["authorized_operations"] = _NO_OPS
            denied.append(d)
            continue
        ops = authorized_operations(ctx, GROUP, gid) if want_ops else _NO_OPS
        gc, err = await group_precheck(ctx, gid, create_topic=False)
        if err:
            d = _dead(gid, err)
            d["authorized_operations"] = _NO_OPS
            out.append(d)
            continue
        g = gc.get_group(gid)
        if g is None or g.kind != "classic":   # KIP-848 consumer, KIP-932 share or KIP-1071 streams group
            if v >= 6:
                # KIP-1043: say so instead of describing a "Dead" group.
                msg = ("Group %s not found." if g is None else "Group %s is not a classic group.") % gid
                d = _dead(gid, E.GROUP_ID_NOT_FOUND, msg)
                d["authorized_operations"] = _NO_OPS
                out.append(d)
                continue
            d = _dead(gid)
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
    return {"throttle_time_ms": 0, "groups": denied + out}


error_response = error_per_item("groups", "groups", _dead)
