"""DescribeProducers (key 61), version 0.

Behaviour (Apache Kafka ReplicaManager.activeProducerState / UnifiedLog.activeProducers): per
requested partition, on its leader, the producers this partition's log keeps state for (the
idempotent and transactional producers not yet expired by ``producer.id.expiration.ms``):
producer id and epoch, last sequence (-1 when only markers were written), last timestamp,
coordinator epoch of its last transaction marker (-1 before any, and after a restart: pykbroker
keeps it in memory only), and the first offset of its open transaction (-1 when none).  Errors
per partition: a topic the metadata does not know: UNKNOWN_TOPIC_OR_PARTITION with Kafka's text
"This server does not host this topic-partition." (KafkaApis checks the topic first); then, as
``leader_partition`` gives them with a null message: UNKNOWN_TOPIC_OR_PARTITION (no such
partition), NOT_LEADER_OR_FOLLOWER (a follower or no replica here), KAFKA_STORAGE_ERROR (offline
log dir).  Producers are listed by producer id.
"""
from __future__ import annotations

from typing import Any

from ..acl.check import permits
from ..acl.requirements import need
from ..cluster.metadata_cache import MetadataCache
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .support.common import leader_partition
from .support.versions import VERSIONS

API_KEY = 61
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_TOPIC = need(API_KEY, "topic")


def _denied(index: int) -> dict:
    """READ on the topic is required (Kafka)."""
    return {"partition_index": index, "error_code": int(_TOPIC.denial),
            "error_message": "Topic authorization failed.",
            "active_producers": []}


def _partition(replica_manager: Any, metadata: MetadataCache, topic: str, index: int) -> dict:
    out: dict[str, Any] = {"partition_index": index, "error_code": 0, "error_message": None, "active_producers": []}
    if metadata.get(topic) is None:
        out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        out["error_message"] = "This server does not host this topic-partition."
        return out
    try:
        part = leader_partition(replica_manager, topic, index)
    except KafkaError as e:
        out["error_code"] = int(e.code)
        return out
    producers = part.log.producer_state.producers
    out["active_producers"] = [
        {"producer_id": pid, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
         "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
         "current_txn_start_offset": e.txn_first_offset}
        for pid, e in sorted(producers.items())]
    return out


async def handle(ctx: RequestContext, request: dict) -> dict:
    rm, md = ctx.services.replica_manager, ctx.services.metadata_cache
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [_partition(rm, md, t["name"], p) if permits(ctx, _TOPIC, t["name"])
                                           else _denied(p) for p in t["partition_indexes"]]}
        for t in request["topics"]]}
