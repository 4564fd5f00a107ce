"""DeleteShareGroupOffsets (key 92), version 0 (KIP-932; the Admin's deleteShareGroupOffsets).

Behaviour: the group checks of the group APIs (empty id: INVALID_GROUP_ID; NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS); a group that does not exist or is of another type:
GROUP_ID_NOT_FOUND; a share group with members: NON_EMPTY_GROUP.  Per topic: an unknown topic:
UNKNOWN_TOPIC_OR_PARTITION; otherwise the share coordinator's state of every partition of the
topic for this group is deleted (and the broker's delivery state dropped): the group starts
afresh on it (``share.auto.offset.reset``).  With an authorizer: DELETE on the group (else
GROUP_AUTHORIZATION_FAILED for the whole request) and READ on each topic (else the topic is
answered TOPIC_AUTHORIZATION_FAILED, first, nothing deleted), as Kafka.
"""
from __future__ import annotations

from typing import Any

from ..acl.requirements import needs
from ..protocol.errors import DEFAULT_MESSAGES, ErrorCode as E
from ..server.dispatch import RequestContext
from .support import share_group_offsets
from .support.share_group_offsets import NO_TOPIC_ID, change_start_offsets, ACL_ROLES as _offsets_acl
from .support.versions import VERSIONS

API_KEY = 92
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
# the rows change_start_offsets checks with (acl/requirements.py): the group's, and the topic's
# this module also answers denials with
_GROUP, _TOPIC = needs(API_KEY, *_offsets_acl)

# the dispatcher's answer when handle fails: a top-level code with no topics (k91's too)
error_response = share_group_offsets.error_response


async def _delete_topic(ctx: RequestContext, gid: str, t: dict, info: Any) -> dict:
    """One topic's entry: the state of each of its partitions is deleted; the first error is the
    topic's."""
    name = t["topic_name"]
    if info is None:
        return {"topic_name": name, "topic_id": NO_TOPIC_ID, "error_code": int(E.UNKNOWN_TOPIC_OR_PARTITION),
                "error_message": DEFAULT_MESSAGES[E.UNKNOWN_TOPIC_OR_PARTITION]}
    sc = ctx.services.share_coordinator
    spm = ctx.services.share_partition_manager
    code = 0
    for idx in range(info.num_partitions):
        c = sc.coordinator_error(gid, info.topic_id, idx) or await sc.delete(gid, info.topic_id, idx).get()
        code = code or c
        if spm is not None:
            spm.delete_group_partition(gid, info.topic_id, idx)
    return {"topic_name": name, "topic_id": info.topic_id, "error_code": int(code), "error_message": None}


async def handle(ctx: RequestContext, request: dict) -> dict:
    # unlike AlterShareGroupOffsets, a group that does not exist is GROUP_ID_NOT_FOUND
    return await change_start_offsets(ctx, request, _delete_topic, create=False, denied_topic=_denied)


def _denied(t: dict) -> dict:
    code = _TOPIC.denial
    return {"topic_name": t["topic_name"], "topic_id": NO_TOPIC_ID, "error_code": int(code),
            "error_message": DEFAULT_MESSAGES[code]}
