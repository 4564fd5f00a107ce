"""CreatePartitions (key 37), versions 0-3.

Behaviour (Apache Kafka KRaft: ControllerApis + ReplicationControlManager.createPartitions):
- A topic named twice in one request: INVALID_REQUEST "Duplicate topic name.".
- Unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
- ``count`` equal to the current count: INVALID_PARTITIONS "Topic already has N partition(s).";
  lower: INVALID_PARTITIONS "The topic T currently has N partition(s); M would not be an
  increase.".
- Manual assignments: exactly one broker list per new partition (else INVALID_REPLICA_ASSIGNMENT
  "Attempted to add N additional partition(s), but only M assignment(s) were specified."), each
  valid (registered brokers, no duplicates, the topic's replication factor).
- ``validate_only`` checks without adding.  The new partitions' logs exist before the answer,
  unless they take longer than ``timeout_ms``, as CreateTopics (k19_create_topics.py): on a single
  node the addition is then answered NONE (committed; it goes on in the controller's task and the
  partitions appear in Metadata once their logs exist, Kafka's answer once its controller
  committed the records), and with ZooKeeper REQUEST_TIMED_OUT (the ZooKeeper-era rule; the
  partitions appear later too).  On a single node ``timeout_ms`` <= 0 fails the whole request at
  once, every topic REQUEST_TIMED_OUT (null message), nothing checked or added (Kafka's KRaft
  controller never starts a request past its deadline); with ZooKeeper the addition is made and
  answered REQUEST_TIMED_OUT.  A delete of the topic waits for an addition still going on.
Version notes: v2 is flexible; v3 is identical but for KIP-599's quota semantics:
- ``controller_mutation_rate`` (quota/manager.py MutationQuota): the partitions a valid change
  adds are counted before it is made (not for ``validate_only``); from v3 a topic is refused with
  THROTTLING_QUOTA_EXCEEDED (message null) while the client's token bucket is below zero, before
  v3 the change is made and only throttled; the answer carries the throttle time and the
  connection is muted for it (v1+) or the answer held (v0).
"""
from __future__ import annotations

import trio

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode, KafkaError
from ..quota.manager import mutation_quota
from ..cluster.metadata import MAX_PARTITIONS_PER_REQUEST
from ..server.dispatch import RequestContext
from .support.common import DUPLICATE_TOPIC, TOO_MANY_PARTITIONS, each_topic_once, error_per_item, request_wait
from .support.versions import VERSIONS

API_KEY = 37
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_TOPIC = need(API_KEY, "topic")


def _result(name: str, code: int = 0, message: str | None = None) -> dict:
    return {"name": name, "error_code": int(code), "error_message": message}


async def handle(ctx: RequestContext, request: dict) -> dict:
    md = ctx.services.metadata_cache
    topics = request["topics"]
    if ctx.services.controller.expired_at_once(request["timeout_ms"]):
        return error_response(ctx, request, ErrorCode.REQUEST_TIMED_OUT)   # nothing checked or made
    wait = request_wait(request["timeout_ms"])
    counts: dict[str, int] = {}
    for t in topics:
        counts[t["name"]] = counts.get(t["name"], 0) + 1
    added = 0
    for t in topics:
        info = md.topics.get(t["name"])
        if info is not None and counts[t["name"]] == 1:
            added += max(0, t["count"] - info.num_partitions)
    if added > MAX_PARTITIONS_PER_REQUEST:
        return {"throttle_time_ms": 0, "results": [
            _result(t["name"], ErrorCode.POLICY_VIOLATION, TOO_MANY_PARTITIONS) for t in topics]}
    results = []
    mq = mutation_quota(ctx)   # controller_mutation_rate (quota/manager.py); None: not counted
    refused = set()
    if mq is not None and not request["validate_only"]:
        # Kafka's controller counts every valid change before making any (see CreateTopics)
        for name, t in each_topic_once(topics, counts):
            if t is None or not permits(ctx, _TOPIC, name):
                continue
            assignments = None if t["assignments"] is None else [a["broker_ids"] for a in t["assignments"]]
            try:
                await ctx.services.controller.create_partitions(name, t["count"], assignments, True)
            except KafkaError:
                continue
            if not mq.record(t["count"] - md.topics[name].num_partitions, int(trio.current_time() * 1000)):
                refused.add(name)
    for name, t in each_topic_once(topics, counts):
        if t is None:
            results.append(_result(name, ErrorCode.INVALID_REQUEST, DUPLICATE_TOPIC))
            continue
        if not permits(ctx, _TOPIC, name):
            results.append(_result(name, _TOPIC.denial))   # ALTER on the topic (Kafka)
            continue
        assignments = None
        if t["assignments"] is not None:
            assignments = [a["broker_ids"] for a in t["assignments"]]
        if name in refused:
            results.append(_result(name, ErrorCode.THROTTLING_QUOTA_EXCEEDED))
            continue
        try:
            await ctx.services.controller.create_partitions(name, t["count"], assignments, request["validate_only"],
                                                            timeout_s=wait())
            results.append(_result(name))
        except KafkaError as e:
            results.append(_result(name, e.code, e.message))
    return {"throttle_time_ms": mq.throttle_ms if mq is not None else 0, "results": results}


error_response = error_per_item("topics", "results", lambda t, code: _result(t["name"], code))
