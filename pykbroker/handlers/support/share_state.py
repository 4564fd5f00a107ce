"""What the share coordinator's handlers (k83-k87: Initialize/Read/Write/Delete/ReadSummary
ShareGroupState) share: the coordinator lookup, and one answer per requested partition.

Checks (as Kafka's share coordinator): an empty group id is INVALID_REQUEST for every partition;
``__share_group_state`` is created on first use; a topic id or partition this broker's metadata
does not know: UNKNOWN_TOPIC_OR_PARTITION; a partition whose state lives in a shard this
broker does not lead answers NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...acl.check import denial, permits_role
from ...protocol.errors import DEFAULT_MESSAGES, ErrorCode as E
from ...server.dispatch import RequestContext

# the row of acl/requirements.py each_partition's check reads, for its handlers to ask for at import
ACL_ROLES = ("cluster",)


def _result(idx: int, code: int, msg: str | None = None, **extra: Any) -> dict:
    return dict({"partition": idx, "error_code": int(code), "error_message": msg}, **extra)


async def each_partition(ctx: RequestContext, request: dict, op: Any, error_extra: dict) -> dict:
    """``op(sc, group, topic id, partition fields)`` -> awaitable of the partition's result
    (without ``partition``); errors get ``error_extra`` beside the code.

    These APIs are the brokers' calls to the share coordinator: with an authorizer the caller
    needs CLUSTER_ACTION on the CLUSTER (Kafka's authorizeClusterOperation), else every partition
    is answered CLUSTER_AUTHORIZATION_FAILED with the error's default message (as Kafka 4.4, all
    five APIs)."""
    if not permits_role(ctx, "cluster"):
        code = denial(ctx, "cluster")
        msg = DEFAULT_MESSAGES[code]
        return {"results": [{"topic_id": t["topic_id"],
                             "partitions": [_result(p["partition"], code, msg, **error_extra) for p in t["partitions"]]}
                            for t in request["topics"]]}
    sc = ctx.services.share_coordinator
    md = ctx.services.metadata_cache
    gid = request["group_id"]
    out = []
    coord_err: int = 0
    if sc is None:
        coord_err = E.COORDINATOR_NOT_AVAILABLE
    elif gid:
        try:
            await sc.ensure_topic()
        except Exception:
            coord_err = E.COORDINATOR_NOT_AVAILABLE
    for t in request["topics"]:
        tid = t["topic_id"]
        parts = []
        for p in t["partitions"]:
            idx = p["partition"]
            if not gid:
                parts.append(_result(idx, E.INVALID_REQUEST, "Group id must be specified and non-empty.",
                                     **error_extra))
                continue
            name = md.name_of(tid)
            info = md.get(name) if name is not None else None
            if info is None or not 0 <= idx < info.num_partitions:
                parts.append(_result(idx, E.UNKNOWN_TOPIC_OR_PARTITION, DEFAULT_MESSAGES[E.UNKNOWN_TOPIC_OR_PARTITION],
                                     **error_extra))
                continue
            err = coord_err or sc.coordinator_error(gid, tid, idx)
            if err:
                parts.append(_result(idx, err, None, **error_extra))
                continue
            res = await op(sc, gid, tid, p)
            parts.append(dict({"partition": idx, "error_message": None}, **res))
        out.append({"topic_id": tid, "partitions": parts})
    return {"results": out}


def error_response_for(error_extra: dict) -> Callable[[RequestContext, dict, int], dict]:
    def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
        return {"results": [{"topic_id": t["topic_id"],
                             "partitions": [_result(p["partition"], code, None, **error_extra) for p in t["partitions"]]}
                            for t in request["topics"]]}
    return error_response
