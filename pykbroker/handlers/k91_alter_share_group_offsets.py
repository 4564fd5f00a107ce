"""AlterShareGroupOffsets (key 91), version 0 (KIP-932; the Admin's alterShareGroupOffsets).

Behaviour: the group checks of the group APIs (empty id: INVALID_GROUP_ID; NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS; a group of another type: GROUP_ID_NOT_FOUND); a share group with
members: NON_EMPTY_GROUP (its consumers must stop first); a group that does not exist is created
(empty) so that its start offsets can be set before its consumers start.  Per partition: an
unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; otherwise the share partition restarts at
the given offset: the share coordinator initializes it with a new state epoch and no in-flight
records, and the broker's delivery state of it is dropped (reloaded on the next ShareFetch).
Unknown topics are answered first, then the others in request order (Kafka's order).
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode as E, KafkaError
from .modern_group import offsets_alterable_share_group

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0


def _top(code, msg=None):
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": msg, "responses": []}


async def handle(ctx, request):
    gid = request["group_id"]
    try:
        await offsets_alterable_share_group(ctx, gid, create=True)
    except KafkaError as e:
        return _top(e.code, e.message)
    md = ctx.broker.metadata_cache
    sc = ctx.broker.share_coordinator
    spm = ctx.broker.share_partition_manager
    responses = []
    for t in request["topics"]:
        name = t["topic_name"]
        info = md.get(name)
        parts = []
        for p in t["partitions"]:
            idx = p["partition_index"]
            if info is None or not 0 <= idx < info.num_partitions:
                parts.append({"partition_index": idx, "error_code": int(E.UNKNOWN_TOPIC_OR_PARTITION),
                              "error_message": "This server does not host this topic-partition."})
                continue
            code = sc.coordinator_error(gid, info.topic_id, idx)
            if not code:
                st = sc.summary(gid, info.topic_id, idx)
                code = await sc.initialize(gid, info.topic_id, idx, (st.state_epoch + 1) if st else 0,
                                           p["start_offset"]).get()
                if spm is not None:
                    spm.delete_group_partition(gid, info.topic_id, idx)
            parts.append({"partition_index": idx, "error_code": int(code), "error_message": None})
        responses.append({"topic_name": name, "topic_id": info.topic_id if info else b"\x00" * 16,
                          "partitions": parts})
    # Kafka answers the topics it does not know first, then the others in request order
    responses.sort(key=lambda r: 0 if r["topic_id"] == b"\x00" * 16 else 1)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}


def error_response(ctx, request, code):
    return _top(code)
