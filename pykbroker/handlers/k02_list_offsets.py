"""ListOffsets (key 2), versions 1-7.

Behaviour (Apache Kafka 4.x as the oracle, Partition.fetchOffsetForTimestamp):
- ``timestamp`` -2 (EARLIEST): the log start offset, timestamp -1, leader epoch of that offset.
- -1 (LATEST): the high watermark under read_uncommitted, the last stable offset under
  read_committed (equal while transactions do not exist); a follower/debug ``replica_id``
  (>= 0) gets the log end offset.  Timestamp -1, the current leader epoch.
- -3 (MAX_TIMESTAMP, v7+): offset and timestamp of the first record carrying the largest
  timestamp in the log.
- any other timestamp: the first record whose timestamp is >= it, found through the time
  index; the answer carries that record's real timestamp.  Searches (and -3) only see records
  below the fetchable bound (HW or LSO): no match -> offset -1, timestamp -1, error NONE.
- Unknown topic/partition -> UNKNOWN_TOPIC_OR_PARTITION; v4+ ``current_leader_epoch`` checks
  (lower -> FENCED_LEADER_EPOCH, higher -> UNKNOWN_LEADER_EPOCH, -1 skips); a partition listed
  twice -> INVALID_REQUEST for it, as Kafka does.
Version notes: v1 answers a single offset + timestamp (v0's offset list is not supported);
v2 adds isolation_level and throttle_time_ms; v4 current_leader_epoch and leader_epoch in the
answer; v6 is flexible; v7 allows MAX_TIMESTAMP.
- A partition whose log dir failed (I/O error; see cluster/replica_manager.py) answers
  KAFKA_STORAGE_ERROR (56), as Kafka's offline partitions do; the other dirs keep serving.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 7

READ_COMMITTED = 1


def _err(index: int, code) -> dict:
    return {"partition_index": index, "error_code": int(code), "timestamp": -1, "offset": -1,
            "leader_epoch": -1}


def error_response(ctx, request, code) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [_err(p["partition_index"], code) for p in t["partitions"]]}
        for t in request["topics"]]}


async def handle(ctx, request):
    rm = ctx.broker.replica_manager
    version = ctx.api_version
    isolation = request.get("isolation_level", 0) if version >= 2 else 0
    replica_id = request["replica_id"]
    seen = set()
    dups = set()
    for t in request["topics"]:
        for p in t["partitions"]:
            key = (t["name"], p["partition_index"])
            (dups if key in seen else seen).add(key)
    topics = []
    for t in request["topics"]:
        parts = []
        topics.append({"name": t["name"], "partitions": parts})
        for p in t["partitions"]:
            idx = p["partition_index"]
            if (t["name"], idx) in dups:
                parts.append(_err(idx, ErrorCode.INVALID_REQUEST))
                continue
            partition = rm.get_partition(t["name"], idx)
            if partition is None:
                parts.append(_err(idx, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if partition.offline:
                # Kafka: a partition on a failed log dir is Offline -> KAFKA_STORAGE_ERROR.
                parts.append(_err(idx, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            if version >= 4:
                code = partition.check_leader_epoch(p["current_leader_epoch"])
                if code:
                    parts.append(_err(idx, code))
                    continue
            try:
                found = partition.fetch_offset_for_timestamp(
                    p["timestamp"], isolation == READ_COMMITTED, replica_id >= 0)
            except KafkaError as e:   # the disk failed during the lookup
                parts.append(_err(idx, e.code))
                continue
            if found is None:
                parts.append({"partition_index": idx, "error_code": 0, "timestamp": -1,
                              "offset": -1, "leader_epoch": -1})
            else:
                ts, off, epoch = found
                parts.append({"partition_index": idx, "error_code": 0, "timestamp": ts,
                              "offset": off, "leader_epoch": epoch})
    return {"throttle_time_ms": 0, "topics": topics}
