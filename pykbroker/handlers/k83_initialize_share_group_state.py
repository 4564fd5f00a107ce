"""InitializeShareGroupState (key 83), version 0: the share coordinator's API (KIP-932).

Behaviour (coordinator/share/coordinator.py): per partition, a new state epoch and start offset
with no in-flight batches, written to ``__share_group_state``; a state epoch below the stored
one: FENCED_STATE_EPOCH.  Common checks in handlers/support/share_state.py (empty group id:
INVALID_REQUEST; NOT_COORDINATOR for a shard led elsewhere).
"""
from __future__ import annotations

from typing import Any

from ..acl.requirements import needs
from ..server.dispatch import RequestContext
from .support.share_state import each_partition, error_response_for, ACL_ROLES as _state_acl
from .support.versions import VERSIONS

API_KEY = 83
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the row each_partition checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_state_acl)


async def _op(sc: Any, gid: str, tid: bytes, p: dict) -> dict:
    code = await sc.initialize(gid, tid, p["partition"], p["state_epoch"], p["start_offset"]).get()
    return {"error_code": code}


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await each_partition(ctx, request, _op, {})


error_response = error_response_for({})
