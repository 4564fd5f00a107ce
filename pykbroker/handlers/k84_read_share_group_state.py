"""ReadShareGroupState (key 84), version 0: the share coordinator's API (KIP-932).

Behaviour (coordinator/share/coordinator.py): per partition its state epoch, start offset and
in-flight state batches (first/last offset, delivery state 0 available / 2 acknowledged /
4 archived, delivery count).  A partition with no state: INVALID_REQUEST "Read operation on
uninitialized share partition not allowed." (start offset 0, state epoch 0, as Kafka 4.4).
The request's leader epoch is recorded when higher than the stored one; a lower one is
FENCED_LEADER_EPOCH.  Common checks in handlers/support/share_state.py.
"""
from __future__ import annotations

from typing import Any

from ..acl.requirements import needs
from ..server.dispatch import RequestContext
from .support.share_state import each_partition, error_response_for, ACL_ROLES as _state_acl
from .support.versions import VERSIONS

API_KEY = 84
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the row each_partition checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_state_acl)

# an error answer's fields (Kafka leaves StartOffset at 0 then)
_ERR = {"state_epoch": 0, "start_offset": 0, "state_batches": []}
_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."


async def _op(sc: Any, gid: str, tid: bytes, p: dict) -> dict:
    code, st, fut = sc.read(gid, tid, p["partition"], p["leader_epoch"])
    if not code and fut is not None:
        code = await fut.get()
    if code or st is None:
        return dict(_ERR, error_code=code, error_message=_UNINITIALIZED if code == 42 else None)
    return {"error_code": 0, "state_epoch": st.state_epoch, "start_offset": st.start_offset,
            "state_batches": [{"first_offset": f, "last_offset": l, "delivery_state": s, "delivery_count": c}
                              for f, l, s, c in st.batches]}


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await each_partition(ctx, request, _op, _ERR)


error_response = error_response_for(_ERR)
