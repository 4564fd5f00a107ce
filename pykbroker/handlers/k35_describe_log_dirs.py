"""DescribeLogDirs (key 35), versions 1-5.

Behaviour (Apache Kafka ReplicaManager.describeLogDirs):
- One result per configured log dir, in ``log.dirs`` order, named by its absolute path.  An
  offline dir: KAFKA_STORAGE_ERROR, no topics, total/usable bytes -1.  An online dir: error 0,
  its topics and partitions, and (v4+) the file system's total and usable bytes (``statvfs``,
  as Java's FileStore.getTotalSpace/getUsableSpace).
- ``topics`` null = every partition log on this broker (internal topics included); otherwise
  only the requested partitions that have a log here (others are left out, no error); a topic
  without a matching partition is left out.
- Per partition: ``partition_size`` = the bytes of its segments, ``offset_lag`` = 0 for the
  current log (Kafka: max(high watermark - log end, 0)), and for a future log (a move between
  log dirs under way, AlterReplicaLogDirs, ``is_future_key`` true) the current log's end minus
  the future log's end.
- With an authorizer, DESCRIBE on the CLUSTER is required: without it Kafka answers no results
  and (v3+) the top-level CLUSTER_AUTHORIZATION_FAILED; otherwise the top-level ``error_code`` is 0.
- v5 ``is_cordoned``: always false (log dir cordoning, ``cordoned.log.dirs``, is not built).
Version notes: v2 is flexible, v3 adds the top-level error code, v4 total/usable bytes, v5
``is_cordoned``.
"""
from __future__ import annotations

import os
from typing import Any

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 35
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")


def _space(d: str) -> tuple[int, int]:
    st = os.statvfs(d)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def _dir_result(lm: Any, d: str, wanted: Any) -> dict:
    if d in lm.offline_dirs:
        return {"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "log_dir": d, "topics": [],
                "total_bytes": -1, "usable_bytes": -1, "is_cordoned": False}
    try:
        total, usable = _space(d)
    except OSError:
        return {"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "log_dir": d, "topics": [],
                "total_bytes": -1, "usable_bytes": -1, "is_cordoned": False}
    by_topic: dict[str, list] = {}
    for tp, lg, future in sorted(lm.logs_in_dir(d), key=lambda x: (x[0], x[2])):
        if wanted is not None and tp not in wanted:
            continue
        if future:
            current = lm.logs.get(tp)
            lag = current.log_end_offset - lg.log_end_offset if current is not None else -1
        else:
            lag = max(lg.high_watermark - lg.log_end_offset, 0)
        by_topic.setdefault(tp[0], []).append({"partition_index": tp[1], "partition_size": lg.size_in_bytes,
                                               "offset_lag": lag, "is_future_key": future})
    topics = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
    return {"error_code": 0, "log_dir": d, "topics": topics, "total_bytes": total, "usable_bytes": usable,
            "is_cordoned": False}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _CLUSTER):
        # Kafka: no log dir at all, the error at the top (v1-2 have no field for it)
        return {"throttle_time_ms": 0, "error_code": int(_CLUSTER.denial), "results": []}
    lm = ctx.services.log_manager
    wanted = None
    if request["topics"] is not None:
        wanted = {(t["topic"], p) for t in request["topics"] for p in t["partitions"]}
    return {"throttle_time_ms": 0, "error_code": 0,
            "results": [_dir_result(lm, d, wanted) for d in lm.log_dirs]}
