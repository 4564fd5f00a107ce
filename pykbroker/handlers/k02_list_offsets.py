"""ListOffsets (key 2), versions 1-11.

Behaviour (Apache Kafka 4.x as the oracle, Partition.fetchOffsetForTimestamp):
- ``timestamp`` -2 (EARLIEST): the log start offset, timestamp -1, leader epoch of that offset.
- -1 (LATEST): the high watermark under read_uncommitted, the last stable offset under
  read_committed (equal while transactions do not exist); a follower/debug ``replica_id``
  (>= 0) gets the log end offset.  Timestamp -1, the current leader epoch.
- -3 (MAX_TIMESTAMP, v7+): offset and timestamp of the first record carrying the largest
  timestamp in the log.
- -4 (EARLIEST_LOCAL, v8+): the log start offset as for -2 (without tiered storage every
  record is local), timestamp -1 and its leader epoch.
- -5 (LATEST_TIERED, v9+) and -6 (EARLIEST_PENDING_UPLOAD, v11+): offset -1, timestamp -1,
  leader epoch -1, no error: what Kafka answers with tiered storage disabled (always, here).
- A special timestamp before the version that introduced it, or any other negative one:
  UNSUPPORTED_VERSION for that partition (as Kafka; MAX_TIMESTAMP before v7 included).
- any other timestamp: the first record whose timestamp is >= it, found through the time
  index; the answer carries that record's real timestamp.  Searches (and -3) only see records
  below the fetchable bound (HW or LSO): no match -> offset -1, timestamp -1, error NONE.
- Unknown topic/partition -> UNKNOWN_TOPIC_OR_PARTITION; v4+ ``current_leader_epoch`` checks
  (lower -> FENCED_LEADER_EPOCH, higher -> UNKNOWN_LEADER_EPOCH, -1 skips); a partition listed
  twice -> INVALID_REQUEST for it, as Kafka does.
Version notes: v1 answers a single offset + timestamp (v0's offset list is not supported);
v2 adds isolation_level and throttle_time_ms; v4 current_leader_epoch and leader_epoch in the
answer; v6 is flexible; v7 allows MAX_TIMESTAMP; v8 EARLIEST_LOCAL; v9 LATEST_TIERED; v10 adds
``timeout_ms`` (the wait for remote storage: nothing to wait for here); v11 EARLIEST_PENDING_UPLOAD.
- Authorization (with an authorizer): DESCRIBE on the topic, else TOPIC_AUTHORIZATION_FAILED
  for its partitions before any other check.
- Offline partitions (failed log dir) answer KAFKA_STORAGE_ERROR; a partition this broker
  only follows answers NOT_LEADER_OR_FOLLOWER (handlers/support/common.py).
"""
from __future__ import annotations

from ..acl.check import session
from ..acl.requirements import need
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .support.common import PartitionResponses, leader_partition
from .support.versions import VERSIONS

API_KEY = 2
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_TOPIC = need(API_KEY, "topic")

READ_COMMITTED = 1
EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -2, -3, -4, -5, -6
# The first version that may carry each special timestamp (Kafka's ListOffsetsRequest).
_SPEC_SINCE = {-1: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}

_KEYS = ("topics", "name", "partitions", "partition_index")
RESPONSES = PartitionResponses(_KEYS, _KEYS, {"timestamp": -1, "offset": -1, "leader_epoch": -1})
error_response = RESPONSES.error_response


async def handle(ctx: RequestContext, request: dict) -> dict:
    rm = ctx.services.replica_manager
    version = ctx.api_version
    isolation = request.get("isolation_level", 0) if version >= 2 else 0
    replica_id = request["replica_id"]
    seen: set[tuple[str, int]] = set()
    dups: set[tuple[str, int]] = set()
    for t in request["topics"]:
        for p in t["partitions"]:
            key = (t["name"], p["partition_index"])
            (dups if key in seen else seen).add(key)

    az = session(ctx)

    async def answer(name: str, p: dict) -> dict:
        idx = p["partition_index"]
        if az is not None and not az.permits(_TOPIC, name):
            raise KafkaError(_TOPIC.denial)   # before any other check (Kafka)
        if (name, idx) in dups:
            raise KafkaError(ErrorCode.INVALID_REQUEST)
        ts = p["timestamp"]
        partition = leader_partition(rm, name, idx, p["current_leader_epoch"])
        if ts < 0 and version < _SPEC_SINCE.get(ts, 1 << 16):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
        if ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
            found = None   # no tiered storage: nothing tiered, nothing pending upload
        else:
            # KafkaError if the disk fails during the lookup
            found = partition.fetch_offset_for_timestamp(EARLIEST if ts == EARLIEST_LOCAL else ts,
                                                         isolation == READ_COMMITTED, replica_id >= 0)
        ts, off, epoch = (-1, -1, -1) if found is None else found
        return {"partition_index": idx, "error_code": 0, "timestamp": ts, "offset": off,
                "leader_epoch": epoch}
    return RESPONSES.response(await RESPONSES.answer_each(request, answer))
