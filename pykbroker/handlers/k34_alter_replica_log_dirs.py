"""AlterReplicaLogDirs (key 34), versions 1-2.

Behaviour (Apache Kafka ReplicaManager.alterReplicaLogDirs): each requested partition is moved
online to the named log dir of this broker (``LogManager.alter_log_dir``: a future log, named
``<topic>-<partition>.<uuid>-future``, is filled from the current one in the background and
swapped in when caught up; DescribeLogDirs shows it with ``is_future_key`` and its lag).  The
answer does not wait for the move.  A partition named twice keeps the last dir.  Per partition:
- 0: the move started, is under way already, or the partition is in that dir already;
- LOG_DIR_NOT_FOUND: the path (made absolute) is not one of ``log.dirs``;
- KAFKA_STORAGE_ERROR: the destination or the partition's dir is offline, or any log dir is
  offline (no future log is created then, as Kafka);
- REPLICA_NOT_AVAILABLE: the partition exists but has no replica here yet; the dir is remembered
  and its log is created there when the replica comes (Kafka's preferred log dir);
- UNKNOWN_TOPIC_OR_PARTITION: no such partition;
- INVALID_TOPIC_EXCEPTION: the future directory's name would exceed 255 bytes (KAFKA-4893).
Results are grouped by topic in request order.  With an authorizer ALTER on the CLUSTER is
required: without it every requested partition is answered CLUSTER_AUTHORIZATION_FAILED, one
topic entry per topic of each dir in request order (Kafka's error response), nothing moved.  Differences (SKIPPED.md): a move interrupted by
a restart is abandoned (Kafka resumes it); no replica.alter.log.dirs.io.max.bytes.per.second
throttle.
Version notes: v2 is flexible.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

if TYPE_CHECKING:
    from .support.services import BrokerServices

API_KEY = 34
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")

# A file name is at most 255 bytes: "<topic>-<partition>.<32 hex>-future" must fit.
_MAX_NAME = 255


async def _move(services: BrokerServices, tp: Any, path: str) -> int:
    if len(("%s-%d.%s-future" % (tp[0], tp[1], "0" * 32)).encode()) > _MAX_NAME:
        return int(ErrorCode.INVALID_TOPIC_EXCEPTION)
    try:
        await services.log_manager.alter_log_dir(tp, path)
    except KafkaError as e:
        if e.code == ErrorCode.REPLICA_NOT_AVAILABLE:
            info = services.metadata_cache.get(tp[0])
            if info is None or tp[1] not in info.partition_ids():
                return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return int(e.code)
    return 0


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    """Kafka's error answer: each dir's topics as sent, every partition with ``code``."""
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": t["name"],
                         "partitions": [{"partition_index": p, "error_code": int(code)} for p in t["partitions"]]}
                        for d in request["dirs"] for t in d["topics"]]}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _CLUSTER):
        return error_response(ctx, request, _CLUSTER.denial)
    targets: dict[tuple[str, int], str] = {}
    for d in request["dirs"]:
        for t in d["topics"]:
            for p in t["partitions"]:
                targets.pop((t["name"], p), None)
                targets[(t["name"], p)] = d["path"]
    results: dict[str, list] = {}
    for tp, path in targets.items():
        code = await _move(ctx.services, tp, path)
        results.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": code})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": t, "partitions": ps} for t, ps in results.items()]}
