"""AlterShareGroupOffsets (key 91), version 0 (KIP-932; the Admin's alterShareGroupOffsets).

Behaviour: the group checks of the group APIs (empty id: INVALID_GROUP_ID; NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS; a group of another type: GROUP_ID_NOT_FOUND); a share group with
members: NON_EMPTY_GROUP (its consumers must stop first); a group that does not exist is created
(empty) so that its start offsets can be set before its consumers start.  Per partition: an
unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; otherwise the share partition restarts at
the given offset: the share coordinator initializes it with a new state epoch and no in-flight
records, and the broker's delivery state of it is dropped (reloaded on the next ShareFetch).
Unknown topics are answered first, then the others in request order (Kafka's order).
With an authorizer: READ on the group (else GROUP_AUTHORIZATION_FAILED for the whole request) and
READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, answered with the unknown
ones, nothing changed).
"""
from __future__ import annotations

from typing import Any

from ..acl.requirements import needs
from ..protocol.errors import DEFAULT_MESSAGES, ErrorCode as E
from ..server.dispatch import RequestContext
from .support import share_group_offsets
from .support.share_group_offsets import NO_TOPIC_ID, change_start_offsets, ACL_ROLES as _offsets_acl
from .support.versions import VERSIONS

API_KEY = 91
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the rows change_start_offsets checks with (acl/requirements.py): the group's, and the topic's
# this module also answers denials with
_GROUP, _TOPIC = needs(API_KEY, *_offsets_acl)

# the dispatcher's answer when handle fails: a top-level code with no topics (k92's too)
error_response = share_group_offsets.error_response


async def _restart_topic(ctx: RequestContext, gid: str, t: dict, info: Any) -> dict:
    """One topic's entry: each partition restarts at its requested start offset."""
    sc = ctx.services.share_coordinator
    spm = ctx.services.share_partition_manager
    parts = []
    for p in t["partitions"]:
        idx = p["partition_index"]
        if info is None or not 0 <= idx < info.num_partitions:
            parts.append({"partition_index": idx, "error_code": int(E.UNKNOWN_TOPIC_OR_PARTITION),
                          "error_message": DEFAULT_MESSAGES[E.UNKNOWN_TOPIC_OR_PARTITION]})
            continue
        code = sc.coordinator_error(gid, info.topic_id, idx)
        if not code:
            st = sc.summary(gid, info.topic_id, idx)
            code = await sc.initialize(gid, info.topic_id, idx, (st.state_epoch + 1) if st else 0,
                                       p["start_offset"]).get()
            if spm is not None:
                spm.delete_group_partition(gid, info.topic_id, idx)
        parts.append({"partition_index": idx, "error_code": int(code), "error_message": None})
    return {"topic_name": t["topic_name"], "topic_id": info.topic_id if info else NO_TOPIC_ID, "partitions": parts}


def _denied(t: dict) -> dict:
    code = _TOPIC.denial
    return {"topic_name": t["topic_name"], "topic_id": NO_TOPIC_ID,
            "partitions": [{"partition_index": p["partition_index"], "error_code": int(code),
                            "error_message": DEFAULT_MESSAGES[code]} for p in t["partitions"]]}


async def handle(ctx: RequestContext, request: dict) -> dict:
    # a group that does not exist is created, so that its start offsets can be set first
    res = await change_start_offsets(ctx, request, _restart_topic, create=True, denied_topic=_denied)
    # Kafka answers the topics it does not know first, then the others in request order
    res["responses"].sort(key=lambda r: 0 if r["topic_id"] == NO_TOPIC_ID else 1)
    return res
