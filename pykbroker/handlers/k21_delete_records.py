"""DeleteRecords (key 21), versions 0-2.

Behaviour (Apache Kafka 4.x, Partition.deleteRecordsOnLeader / UnifiedLog
.maybeIncrementLogStartOffset):
- ``offset`` -1 means "up to the high watermark"; any other negative offset or one beyond the
  high watermark -> OFFSET_OUT_OF_RANGE (low_watermark -1).
- A topic whose ``cleanup.policy`` lacks ``delete`` (compact only) -> POLICY_VIOLATION.
- Otherwise the log start offset moves forward (never back) to the offset; segments entirely
  below it are removed by the log; consumers fetching below it get OFFSET_OUT_OF_RANGE.
  ``low_watermark`` answers the new log start offset (single replica: no waiting for
  followers, so ``timeout_ms`` never expires).
- Unknown topic/partition -> UNKNOWN_TOPIC_OR_PARTITION.
Version notes: v1 is identical to v0; v2 is flexible.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2


def _err(index: int, code) -> dict:
    return {"partition_index": index, "low_watermark": -1, "error_code": int(code)}


def error_response(ctx, request, code) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [_err(p["partition_index"], code) for p in t["partitions"]]}
        for t in request["topics"]]}


async def handle(ctx, request):
    rm = ctx.broker.replica_manager
    topics = []
    for t in request["topics"]:
        parts = []
        topics.append({"name": t["name"], "partitions": parts})
        for p in t["partitions"]:
            idx = p["partition_index"]
            partition = rm.get_partition(t["name"], idx)
            if partition is None:
                parts.append(_err(idx, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                low = await partition.delete_records_before(p["offset"])
            except KafkaError as e:
                parts.append(_err(idx, e.code))
                continue
            parts.append({"partition_index": idx, "low_watermark": low, "error_code": 0})
    return {"throttle_time_ms": 0, "topics": topics}
