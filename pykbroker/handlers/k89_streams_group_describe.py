"""StreamsGroupDescribe (key 89), versions 0-1: describe KIP-1071 streams groups.

Behaviour (as Apache Kafka 4.4): per group: empty id: INVALID_GROUP_ID; NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS; unknown group: GROUP_ID_NOT_FOUND ("Group X not found."); a group of
another type: GROUP_ID_NOT_FOUND ("Group X is not a streams group.").  Otherwise the state (Empty,
NotReady, Assigning, Reconciling, Stable), group and assignment epochs, the topology (its epoch;
the configured subtopologies with partition counts, null while the topology is not ready), and per
member its epoch, ids, process id, endpoint, client tags, task offsets, current and target
assignment.  authorized_operations: INT32_MIN unless requested (then 3400: no authorizer).
Version notes: v1 adds TopologyDescription / TopologyDescriptionStatus (KIP-1331: 0 NOT_REQUESTED
unless asked, else 1 NOT_STORED: no description plugin, as a default Kafka broker) and
AssignorName ("sticky").
"""
from __future__ import annotations

from ..acl.requirements import needs
from ..server.dispatch import RequestContext
from .support.common import error_per_item
from .support.modern_group import AUTHORIZED_OPERATIONS_OMITTED, describe_groups, DESCRIBE_ROLES as _group_acl
from .support.versions import VERSIONS

API_KEY = 89
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the row describe_groups checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_group_acl)


def _err(gid: str, code: int, msg: str | None = None) -> dict:
    return {"error_code": int(code), "error_message": msg, "group_id": gid, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED, "topology_description": None,
            "topology_description_status": 0, "assignor_name": None}


async def handle(ctx: RequestContext, request: dict) -> dict:
    with_description = ctx.api_version >= 1 and request["include_topology_description"]
    out = await describe_groups(ctx, request, "streams", _err,
                                lambda gc, g: gc.streams.describe(g, ctx.api_version, with_description))
    return {"throttle_time_ms": 0, "groups": out}


error_response = error_per_item("group_ids", "groups", _err)
