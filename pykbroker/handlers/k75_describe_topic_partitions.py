"""DescribeTopicPartitions (key 75), version 0 (KIP-966; what the Java AdminClient 3.8+ uses for
describeTopics when the broker offers it).

Behaviour (Apache Kafka DescribeTopicPartitionsRequestHandler + KRaftMetadataCache
.describeTopicResponse):
- ``topics`` empty = every topic (internal ones included), else the named ones; either way only
  names >= the cursor's topic, sorted by name.  With a topic list the cursor's topic must be in
  it, and a cursor's partition must be >= 0, else INVALID_REQUEST for the whole request (every
  requested topic answered with it).
- Pagination: at most ``response_partition_limit`` partitions per answer (clamped to
  [1, 2000], Kafka's max.request.partition.size.limit default); the cursor's topic starts at
  the cursor's partition, the others at 0.  When a topic's partitions do not all fit,
  ``next_cursor`` names the first one left out; when the limit is reached exactly at a topic's
  end and more topics follow, ``next_cursor`` is (next topic, 0); otherwise it is null.
- A named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
  illegal name), zero topic id, no partitions (not listed when asking for all topics).
- Partitions as Metadata describes them (handlers/support/common.py ``partition_metadata``); eligible
  leader replicas and last known ELR are empty (pykbroker has no ELR, SKIPPED.md).
- Authorization (with an authorizer): DESCRIBE on each topic; a named topic without it answers
  TOPIC_AUTHORIZATION_FAILED, an all-topics request leaves it out.
- ``topic_authorized_operations``: the TOPIC operations allowed (every one without an
  authorizer), as Kafka always fills it here.
"""
from __future__ import annotations

from typing import Any

from ..cluster.metadata import ZERO_UUID, is_internal, is_valid_topic_name
from ..acl.bindings import TOPIC
from ..acl.check import authorized_operations, session
from ..acl.requirements import need
from ..protocol.errors import ErrorCode, KafkaError
from ..server.dispatch import RequestContext
from .support.common import partition_metadata
from .support.versions import VERSIONS

API_KEY = 75
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_TOPIC = need(API_KEY, "topic")

# Kafka's max.request.partition.size.limit default (not declared: pykbroker has no such knob).
MAX_PARTITIONS_PER_RESPONSE = 2000


def _topic(ctx: RequestContext, code: int, name: str, topic_id: Any, partitions: Any) -> dict:
    return {"error_code": int(code), "name": name, "topic_id": topic_id, "is_internal": is_internal(name),
            "partitions": partitions, "topic_authorized_operations": authorized_operations(ctx, TOPIC, name)}


async def handle(ctx: RequestContext, request: dict) -> dict:
    md = ctx.services.metadata_cache
    fetch_all = not request["topics"]
    cursor = request["cursor"]
    cursor_topic = cursor["topic_name"] if cursor is not None else ""
    if fetch_all:
        names = {n for n in md.topics if n >= cursor_topic}
    else:
        names = {t["name"] for t in request["topics"] if t["name"] >= cursor_topic}
        if cursor is not None and cursor_topic not in names:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "DescribeTopicPartitionsRequest topic list should "
                             "contain the cursor topic: %s" % cursor_topic)
    if cursor is not None and cursor["partition_index"] < 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "DescribeTopicPartitionsRequest cursor partition must be valid")
    remaining = max(min(MAX_PARTITIONS_PER_RESPONSE, request["response_partition_limit"]), 1)
    topics, next_cursor = [], None
    az = session(ctx)
    for name in sorted(names):
        if remaining == 0:
            # the limit was reached at the end of the previous topic: go on from this one
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        if az is not None and not az.permits(_TOPIC, name):
            if not fetch_all:   # named: refused whether or not it exists; all topics: left out
                t = _topic(ctx, _TOPIC.denial, name, ZERO_UUID, [])
                t["topic_authorized_operations"] = -2147483648   # Kafka: INT32_MIN for a denied topic
                topics.append(t)
            continue
        info = md.get(name)
        if info is None:
            if not fetch_all:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if is_valid_topic_name(name) \
                    else ErrorCode.INVALID_TOPIC_EXCEPTION
                topics.append(_topic(ctx, code, name, ZERO_UUID, []))
            continue
        start = cursor["partition_index"] if name == cursor_topic and cursor is not None else 0
        end = min(info.num_partitions, start + remaining)
        parts = [dict(partition_metadata(md, name, p), eligible_leader_replicas=[], last_known_elr=[])
                 for p in range(start, end)]
        topics.append(_topic(ctx, 0, name, info.topic_id, parts))
        if end < info.num_partitions:
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= len(parts)
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    """Kafka's DescribeTopicPartitionsRequest.getErrorResponse: the error on every named topic."""
    return {"throttle_time_ms": 0, "next_cursor": None, "topics": [
        {"error_code": int(code), "name": t["name"], "topic_id": ZERO_UUID, "is_internal": False,
         "partitions": [], "topic_authorized_operations": -2147483648} for t in request["topics"]]}
