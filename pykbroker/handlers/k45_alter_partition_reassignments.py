"""AlterPartitionReassignments (key 45), versions 0-1.

Behaviour (Apache Kafka, KIP-455; ``kafka-reassign-partitions.sh`` and the admin client's
``alterPartitionReassignments``):
- Per partition a target replica list starts a reassignment; a null list cancels the ongoing
  one (NO_REASSIGNMENT_IN_PROGRESS when there is none).  The answer comes once the controller
  has started it: the replica set is the target plus the original replicas not in it, the new
  replicas catch up as followers, and when every target replica is in the ISR the set shrinks to
  the target (the leader moves if it is not in the target).  ListPartitionReassignments (46)
  shows the ongoing ones.
- Checks: unknown partition UNKNOWN_TOPIC_OR_PARTITION; an empty list, duplicates or brokers
  that are not registered INVALID_REPLICA_ASSIGNMENT; with ``allow_replication_factor_change``
  false (v1) a different replica count INVALID_REPLICATION_FACTOR.
- In a cluster the controller does the work (cluster/zookeeper/active.py); a single node can only
  be "reassigned" to itself (a no-op) and has nothing to cancel.
Version notes: v1 adds ``allow_replication_factor_change`` (echoed in the response).
"""
from __future__ import annotations

import trio

from ..acl.bindings import ALTER
from ..acl.check import cluster_allowed
from ..protocol.errors import ErrorCode, KafkaError

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1


def _single_node(cache, topic, p, target):
    st = cache.partition_state(topic, p) if cache.get(topic) is not None else None
    if st is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    if target is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No ongoing reassignment for %s-%d." % (topic, p)
    registered = {b.broker_id for b in cache.alive_brokers()}
    missing = [b for b in target if b not in registered]
    if not target or missing or len(set(target)) != len(target):
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "The proposed assignment contains non-live brokers: %s" % missing if missing
                else "Invalid replica assignment %s" % list(target))
    return 0, None


async def handle(ctx, request):
    if not cluster_allowed(ctx, ALTER):
        # ALTER on the cluster; Kafka's controller answers every partition and the top level
        # with its exception's text (which names the request object: pykbroker names the API)
        msg = "Request AlterPartitionReassignments needs ALTER permission."
        responses: dict = {}
        for t in request["topics"]:
            responses.setdefault(t["name"], []).extend(
                {"partition_index": p["partition_index"], "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                 "error_message": msg} for p in t["partitions"])
        return {"throttle_time_ms": 0, "allow_replication_factor_change": True,
                "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "error_message": msg,
                "responses": [{"name": t, "partitions": parts} for t, parts in responses.items()]}
    v = ctx.api_version
    cache = ctx.broker.metadata_cache
    allow_rf = request["allow_replication_factor_change"] if v >= 1 else True
    items = [(t["name"], p["partition_index"], p["replicas"]) for t in request["topics"] for p in t["partitions"]]
    alter = getattr(ctx.broker.controller, "alter_reassignments", None)
    if alter is None:
        results = {(t, p): _single_node(cache, t, p, r) for t, p, r in items}
    else:
        timeout_s = max(0.0, request["timeout_ms"] / 1000.0)
        results = {}
        with trio.move_on_after(timeout_s + 1.0):
            results = await alter(items, allow_rf, timeout_s)
    responses: dict[str, list] = {}
    for t, p, _ in items:
        code, msg = results.get((t, p), (ErrorCode.REQUEST_TIMED_OUT, None))
        responses.setdefault(t, []).append({"partition_index": p, "error_code": int(code),
                                            "error_message": msg if code else None})
    return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf, "error_code": 0,
            "error_message": None,
            "responses": [{"name": t, "partitions": parts} for t, parts in responses.items()]}
