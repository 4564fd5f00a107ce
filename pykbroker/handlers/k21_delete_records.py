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

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import KafkaError
from ..server.dispatch import RequestContext
from .support.common import PartitionResponses, leader_partition
from .support.versions import VERSIONS

API_KEY = 21
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_TOPIC = need(API_KEY, "topic")

_KEYS = ("topics", "name", "partitions", "partition_index")
RESPONSES = PartitionResponses(_KEYS, _KEYS, {"low_watermark": -1})
error_response = RESPONSES.error_response


async def handle(ctx: RequestContext, request: dict) -> dict:
    rm = ctx.services.replica_manager

    async def answer(name: str, p: dict) -> dict:
        if not permits(ctx, _TOPIC, name):
            raise KafkaError(_TOPIC.denial)   # DELETE on the topic (Kafka)
        partition = leader_partition(rm, name, p["partition_index"])
        low = await partition.delete_records_before(p["offset"])  # or raises KafkaError
        return {"partition_index": p["partition_index"], "low_watermark": low, "error_code": 0}
    return RESPONSES.response(await RESPONSES.answer_each(request, answer))
