"""ElectLeaders (key 43), versions 0-2.

Behaviour (Apache Kafka's ElectLeaders, the admin client's ``electLeaders`` and
``kafka-leader-election.sh``):
- ``election_type`` (v1+; v0 means preferred): 0 PREFERRED moves leadership to the first
  replica of each partition when it is live and in the ISR; 1 UNCLEAN elects a live replica
  for a partition without a live leader (an in-sync one first; an out-of-sync one may lose
  acknowledged records, which is logged).
- ``topic_partitions`` null: every partition of the cluster; partitions whose election was not
  needed are then left out of the answer, and every topic is listed (with an empty list when
  nothing was elected), as Kafka does.
- Per partition: 0 (elected), ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
  ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION.
- The controller elects (``Controller.elect_leaders``): in a cluster the active one
  (cluster/zookeeper/active.py); a single node is the preferred leader of everything, so every
  election there is ELECTION_NOT_NEEDED (the interface's default, cluster/controller.py).
Version notes: v1 adds ``election_type`` and the top-level ``error_code``; v2 is flexible.
"""
from __future__ import annotations

import trio

from ..acl.check import permits
from ..acl.requirements import need
from ..cluster.metadata_cache import MetadataCache
from ..protocol.errors import DEFAULT_MESSAGES, ErrorCode
from ..server.dispatch import RequestContext
from .support.versions import VERSIONS

API_KEY = 43
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")

PREFERRED, UNCLEAN = 0, 1

# Kafka 4.4's texts for the per-partition outcomes clients print (the controller's for
# ELECTION_NOT_NEEDED; the error's default text for the others, tests/differential/test_cluster.py)
_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
}


def _message(cache: MetadataCache, topic: str, p: int, code: ErrorCode) -> str | None:
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        # Kafka 4.4's controller names what is missing: the topic, or the partition
        return ("No such topic as %s" % topic if cache.get(topic) is None
                else "No such partition as %s-%d" % (topic, p))
    return _MESSAGES.get(code, DEFAULT_MESSAGES.get(code))


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not permits(ctx, _CLUSTER):
        # ALTER on the cluster; Kafka's controller answers every named partition with its
        # exception's text (which names the request object: pykbroker names the API)
        msg = "Request ElectLeaders needs ALTER permission."
        return {"throttle_time_ms": 0, "error_code": int(_CLUSTER.denial),
                "replica_election_results": [
                    {"topic": t["topic"], "partition_result": [
                        {"partition_id": p, "error_code": int(_CLUSTER.denial),
                         "error_message": msg} for p in t["partitions"]]}
                    for t in request["topic_partitions"] or []]}
    v = ctx.api_version
    cache = ctx.services.metadata_cache
    etype = request["election_type"] if v >= 1 else PREFERRED
    if etype not in (PREFERRED, UNCLEAN):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_REQUEST),
                "replica_election_results": []}
    everything = request["topic_partitions"] is None
    if everything:
        wanted = [(info.name, p) for info in cache.topics.values() for p in info.partition_ids()]
    else:
        wanted = [(t["topic"], p) for t in request["topic_partitions"] for p in t["partitions"]]
    known = [tp for tp in wanted if cache.partition_state(*tp) is not None and cache.get(tp[0]) is not None]
    # elected by the controller (a single node's answers ELECTION_NOT_NEEDED: cluster/controller.py)
    elected: dict = {}
    if known:
        timeout_s = max(0.0, request["timeout_ms"] / 1000.0)
        with trio.move_on_after(timeout_s + 1.0):
            elected = await ctx.services.controller.elect_leaders(known, etype, timeout_s)
    # in the request's order (Kafka's controller answers partition by partition as asked)
    results: dict = {}
    known_set = set(known)
    for tp in wanted:
        if tp in elected:
            results[tp] = elected[tp]
        elif tp in known_set and cache.partition_state(*tp) is not None:
            results[tp] = ErrorCode.REQUEST_TIMED_OUT
        else:
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # topic_partitions null: Kafka's controller answers every topic, an empty list where no
    # election was needed
    by_topic: dict[str, list] = {info.name: [] for info in cache.topics.values()} if everything else {}
    for (t, p), code in results.items():
        if everything and code == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        code = ErrorCode(code)
        by_topic.setdefault(t, []).append({
            "partition_id": p, "error_code": int(code),
            "error_message": None if code == 0 else _message(cache, t, p, code)})
    return {"throttle_time_ms": 0, "error_code": 0,
            "replica_election_results": [{"topic": t, "partition_result": parts}
                                         for t, parts in by_topic.items()]}
