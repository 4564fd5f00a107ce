"""ListPartitionReassignments (key 46), version 0.

Behaviour (Apache Kafka, KIP-455): the ongoing reassignments, each with its current replica set
(target first, then the replicas being removed), ``adding_replicas`` and ``removing_replicas``;
``topics`` null lists every ongoing one, otherwise only the partitions asked for (unknown or
not reassigning ones are left out, as Kafka does).  A single node never has one.
"""
from __future__ import annotations

from ..acl.check import permits
from ..acl.requirements import need
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 46
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _CLUSTER):
        # DESCRIBE on the cluster (Kafka's text names the request object: pykbroker names the API)
        return {"throttle_time_ms": 0, "error_code": int(_CLUSTER.denial),
                "error_message": "Request ListPartitionReassignments needs DESCRIBE permission.", "topics": []}
    wanted = None
    if request["topics"] is not None:
        wanted = {(t["name"], p) for t in request["topics"] for p in t["partition_indexes"]}
    ongoing = ctx.services.controller.reassignments(wanted)
    topics: dict[str, list] = {}
    for (t, p), (replicas, adding, removing) in sorted(ongoing.items()):
        topics.setdefault(t, []).append({"partition_index": p, "replicas": replicas,
                                         "adding_replicas": adding, "removing_replicas": removing})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()]}
