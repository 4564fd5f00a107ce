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
  false (v1) a different replica count INVALID_REPLICATION_FACTOR.  Kafka 4.4's order and texts
  (cluster/partition_change.py ``manual_assignment_error``); cancelling where nothing is in
  progress has no text.  A reassignment to the current replicas changes nothing.  Each request
  topic entry gets its own response entry (a topic named twice is answered twice).
- The controller checks and does the work (``Controller.alter_reassignments``): in a cluster the
  active one (cluster/zookeeper/active.py); a single node can only be "reassigned" to itself (a
  no-op) and has nothing to cancel (the interface's default, cluster/controller.py).
Version notes: v1 adds ``allow_replication_factor_change`` (echoed in the response).
"""
from __future__ import annotations

import trio

from ..acl.check import permits
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 45
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _CLUSTER):
        # ALTER on the cluster; Kafka's controller answers every partition and the top level
        # with its exception's text (which names the request object: pykbroker names the API)
        msg = "Request AlterPartitionReassignments needs ALTER permission."
        responses: dict = {}
        for t in request["topics"]:
            responses.setdefault(t["name"], []).extend(
                {"partition_index": p["partition_index"], "error_code": int(_CLUSTER.denial),
                 "error_message": msg} for p in t["partitions"])
        return {"throttle_time_ms": 0, "allow_replication_factor_change": True,
                "error_code": int(_CLUSTER.denial), "error_message": msg,
                "responses": [{"name": t, "partitions": parts} for t, parts in responses.items()]}
    v = ctx.api_version
    allow_rf = request["allow_replication_factor_change"] if v >= 1 else True
    items = [(t["name"], p["partition_index"], p["replicas"]) for t in request["topics"] for p in t["partitions"]]
    # checked and started by the controller (a single node's: cluster/controller.py)
    timeout_s = max(0.0, request["timeout_ms"] / 1000.0)
    results: dict = {}
    with trio.move_on_after(timeout_s + 1.0):
        results = await ctx.services.controller.alter_reassignments(items, allow_rf, timeout_s)
    def answer(t: dict, p: dict) -> dict:
        code, msg = results.get((t, p), (ErrorCode.REQUEST_TIMED_OUT, None))
        return {"partition_index": p, "error_code": int(code), "error_message": msg if code else None}

    # one response entry per request entry, in the request's order (a topic named twice is
    # answered twice, as Kafka does)
    return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf, "error_code": 0,
            "error_message": None,
            "responses": [{"name": t["name"], "partitions": [answer(t["name"], p["partition_index"])
                                                             for p in t["partitions"]]}
                          for t in request["topics"]]}
