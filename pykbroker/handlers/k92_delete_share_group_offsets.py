"""DeleteShareGroupOffsets (key 92), version 0 (KIP-932; the Admin's deleteShareGroupOffsets).

Behaviour: the group checks of the group APIs (empty id: INVALID_GROUP_ID; NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS); a group that does not exist or is of another type:
GROUP_ID_NOT_FOUND; a share group with members: NON_EMPTY_GROUP.  Per topic: an unknown topic:
UNKNOWN_TOPIC_OR_PARTITION; otherwise the share coordinator's state of every partition of the
topic for this group is deleted (and the broker's delivery state dropped): the group starts
afresh on it (``share.auto.offset.reset``).
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode as E, KafkaError
from .modern_group import offsets_alterable_share_group

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0


def _top(code, msg=None):
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": msg, "responses": []}


async def handle(ctx, request):
    gid = request["group_id"]
    try:
        await offsets_alterable_share_group(ctx, gid, create=False)
    except KafkaError as e:
        return _top(e.code, e.message)
    md = ctx.broker.metadata_cache
    sc = ctx.broker.share_coordinator
    spm = ctx.broker.share_partition_manager
    responses = []
    for t in request["topics"]:
        name = t["topic_name"]
        info = md.get(name)
        if info is None:
            responses.append({"topic_name": name, "topic_id": b"\x00" * 16,
                              "error_code": int(E.UNKNOWN_TOPIC_OR_PARTITION),
                              "error_message": "This server does not host this topic-partition."})
            continue
        code = 0
        for idx in range(info.num_partitions):
            c = sc.coordinator_error(gid, info.topic_id, idx) or await sc.delete(gid, info.topic_id, idx).get()
            code = code or c
            if spm is not None:
                spm.delete_group_partition(gid, info.topic_id, idx)
        responses.append({"topic_name": name, "topic_id": info.topic_id, "error_code": int(code),
                          "error_message": None})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}


def error_response(ctx, request, code):
    return _top(code)
