"""DeleteShareGroupState (key 86), version 0: the share coordinator's API (KIP-932).

Behaviour (coordinator/share/coordinator.py): per partition its state is removed (tombstones in
``__share_group_state``); a partition without state answers no error.  Common checks in
handlers/support/share_state.py.
"""
from __future__ import annotations

from typing import Any

from ..acl.requirements import needs
from ..server.dispatch import RequestContext
from .support.share_state import each_partition, error_response_for, ACL_ROLES as _state_acl
from .support.versions import VERSIONS

API_KEY = 86
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the row each_partition checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_state_acl)


async def _op(sc: Any, gid: str, tid: bytes, p: dict) -> dict:
    return {"error_code": await sc.delete(gid, tid, p["partition"]).get()}


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await each_partition(ctx, request, _op, {})


error_response = error_response_for({})
