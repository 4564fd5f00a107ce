"""ReadShareGroupStateSummary (key 87), versions 0-1: the share coordinator's API (KIP-932).

Behaviour (coordinator/share/coordinator.py): per partition its state epoch, leader epoch and
start offset, without the batches and without recording a leader epoch; a partition with no
state: start offset -1, state and leader epochs 0 (Kafka 4.4's answer).  Common checks in handlers/support/share_state.py.
Version notes: v1 adds DeliveryCompleteCount (KIP-1226; -1 when never written).
"""
from __future__ import annotations

from typing import Any

from ..acl.requirements import needs
from ..server.dispatch import RequestContext
from .support.share_state import each_partition, error_response_for, ACL_ROLES as _state_acl
from .support.versions import VERSIONS

API_KEY = 87
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the row each_partition checks with (acl/requirements.py)
_ROWS = needs(API_KEY, *_state_acl)

# an error answer's fields (Kafka 4.4: start offset 0); no state: start offset -1, no error
_ERR = {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "delivery_complete_count": -1}


async def _op(sc: Any, gid: str, tid: bytes, p: dict) -> dict:
    st = sc.summary(gid, tid, p["partition"])
    if st is None:
        return dict(_ERR, error_code=0, start_offset=-1)
    return {"error_code": 0, "state_epoch": st.state_epoch, "leader_epoch": st.leader_epoch,
            "start_offset": st.start_offset, "delivery_complete_count": st.delivery_complete_count}


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await each_partition(ctx, request, _op, _ERR)


error_response = error_response_for(_ERR)
