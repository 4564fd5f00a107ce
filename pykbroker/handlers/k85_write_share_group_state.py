"""WriteShareGroupState (key 85), versions 0-1: the share coordinator's API (KIP-932).

Behaviour (coordinator/share/coordinator.py): per partition the leader's new state (state and
leader epochs, start offset, state batches merged over the stored ones: the new batches replace
the offsets they cover, everything below the start offset goes), written to
``__share_group_state``.  A leader epoch below the stored one: FENCED_LEADER_EPOCH; a state epoch
below it: FENCED_STATE_EPOCH.  Common checks in handlers/support/share_state.py.
Version notes: v1 adds DeliveryCompleteCount (KIP-1226), stored for ReadShareGroupStateSummary v1.
"""
from __future__ import annotations

from typing import Any

from ..acl.requirements import needs
from ..server.dispatch import RequestContext
from .support.share_state import each_partition, error_response_for, ACL_ROLES as _state_acl
from .support.versions import VERSIONS

API_KEY = 85
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the row each_partition checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_state_acl)


async def _op(sc: Any, gid: str, tid: bytes, p: dict) -> dict:
    batches = [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"]) for b in p["state_batches"]]
    code = await sc.write(gid, tid, p["partition"], p["state_epoch"], p["leader_epoch"], p["start_offset"], batches,
                          p.get("delivery_complete_count", -1)).get()
    return {"error_code": code}


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await each_partition(ctx, request, _op, {})


error_response = error_response_for({})
