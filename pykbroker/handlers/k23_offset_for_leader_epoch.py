"""OffsetForLeaderEpoch (key 23), versions 2-4.

Behaviour (Apache Kafka 4.x, Partition.lastOffsetForLeaderEpoch and
LeaderEpochFileCache.endOffsetFor), answered from the partition's leader-epoch cache:
- requested epoch == the latest epoch -> (that epoch, log end offset);
- an older epoch -> (greatest known epoch <= requested, start offset of the next epoch);
- an epoch newer than every known one -> leader_epoch -1, end_offset -1, error NONE.
- ``current_leader_epoch`` lower than ours -> FENCED_LEADER_EPOCH, higher ->
  UNKNOWN_LEADER_EPOCH, -1 skips the check; unknown topic/partition ->
  UNKNOWN_TOPIC_OR_PARTITION.
- ``replica_id`` (v3+): consumers send -1, followers their id; both are answered by the leader
  only (NOT_LEADER_OR_FOLLOWER elsewhere, after the epoch checks, as Kafka does).
- With an authorizer (Kafka 4.4's KafkaApis, whatever the replica id): CLUSTER_ACTION on the
  cluster (a broker; checked without logging a denial) lets every topic through, anyone else
  needs DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED per partition otherwise).
Version notes: v2 adds current_leader_epoch (and is the floor Kafka 4 keeps); v3 adds
replica_id; v4 is flexible.
- A partition on a failed log dir answers KAFKA_STORAGE_ERROR, see handlers/support/common.py.
"""
from __future__ import annotations

from ..acl.check import session
from ..acl.requirements import need
from ..protocol.errors import KafkaError
from ..server.dispatch import RequestContext
from .support.common import PartitionResponses, leader_partition
from .support.versions import VERSIONS

API_KEY = 23
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_ANY_TOPIC = need(API_KEY, "cluster")
_TOPIC = need(API_KEY, "topic")

_KEYS = ("topics", "topic", "partitions", "partition")
RESPONSES = PartitionResponses(_KEYS, _KEYS, {"leader_epoch": -1, "end_offset": -1})
error_response = RESPONSES.error_response


async def handle(ctx: RequestContext, request: dict) -> dict:
    rm = ctx.services.replica_manager
    az = session(ctx)
    # Kafka checks CLUSTER_ACTION with logIfDenied = false (not an access the audit log shows);
    # it is not required of a follower's request, only a way past the per-topic check
    if az is not None and az.permits(_ANY_TOPIC, log_denied=False):
        az = None

    async def answer(name: str, p: dict) -> dict:
        if az is not None and not az.permits(_TOPIC, name):
            raise KafkaError(_TOPIC.denial)
        partition = leader_partition(rm, name, p["partition"], p["current_leader_epoch"])
        epoch, end = partition.end_offset_for_epoch(p["leader_epoch"])
        return {"partition": p["partition"], "error_code": 0, "leader_epoch": epoch, "end_offset": end}
    return RESPONSES.response(await RESPONSES.answer_each(request, answer))
