"""OffsetForLeaderEpoch (key 23), versions 2-4.

Behaviour (Apache Kafka 4.x, Partition.lastOffsetForLeaderEpoch and
LeaderEpochFileCache.endOffsetFor), answered from the partition's leader-epoch cache:
- requested epoch == the latest epoch -> (that epoch, log end offset);
- an older epoch -> (greatest known epoch <= requested, start offset of the next epoch);
- an epoch newer than every known one -> leader_epoch -1, end_offset -1, error NONE.
- ``current_leader_epoch`` lower than ours -> FENCED_LEADER_EPOCH, higher ->
  UNKNOWN_LEADER_EPOCH, -1 skips the check; unknown topic/partition ->
  UNKNOWN_TOPIC_OR_PARTITION.
- ``replica_id`` (v3+): consumers send -1, followers their id; pykbroker is the leader of every
  partition, so both are answered the same way.
Version notes: v2 adds current_leader_epoch (and is the floor Kafka 4 keeps); v3 adds
replica_id; v4 is flexible.
- A partition whose log dir failed (I/O error; see cluster/replica_manager.py) answers
  KAFKA_STORAGE_ERROR (56), as Kafka's offline partitions do; the other dirs keep serving.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4


def _err(index: int, code) -> dict:
    return {"partition": index, "error_code": int(code), "leader_epoch": -1, "end_offset": -1}


def error_response(ctx, request, code) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"topic": t["topic"], "partitions": [_err(p["partition"], code) for p in t["partitions"]]}
        for t in request["topics"]]}


async def handle(ctx, request):
    rm = ctx.broker.replica_manager
    topics = []
    for t in request["topics"]:
        parts = []
        topics.append({"topic": t["topic"], "partitions": parts})
        for p in t["partitions"]:
            idx = p["partition"]
            partition = rm.get_partition(t["topic"], idx)
            if partition is None:
                parts.append(_err(idx, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if partition.offline:
                # Kafka: a partition on a failed log dir is Offline -> KAFKA_STORAGE_ERROR.
                parts.append(_err(idx, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            code = partition.check_leader_epoch(p["current_leader_epoch"])
            if code:
                parts.append(_err(idx, code))
                continue
            epoch, end = partition.end_offset_for_epoch(p["leader_epoch"])
            parts.append({"partition": idx, "error_code": 0, "leader_epoch": epoch, "end_offset": end})
    return {"throttle_time_ms": 0, "topics": topics}
