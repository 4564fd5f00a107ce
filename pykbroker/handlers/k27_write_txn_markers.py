"""WriteTxnMarkers (key 27), versions 1-2 (sent by a transaction coordinator to partition leaders).

Behaviour (Apache Kafka 4.x, KafkaApis.handleWriteTxnMarkersRequest): for every marker, a
COMMIT (``transaction_result`` true) or ABORT control batch of the producer is appended to each
listed partition this broker leads; ``__consumer_offsets`` partitions go through the group
coordinator, which materializes or drops the producer's transactional offsets (as Kafka 4.4's
new group coordinator: its refusals COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and
NOT_COORDINATOR, e.g. the partition not led here or still loading, are answered
NOT_LEADER_OR_FOLLOWER, which the sender retries; the ZooKeeper-mode cluster follows the same
rule).  Per partition:
unknown -> UNKNOWN_TOPIC_OR_PARTITION, an older producer epoch than the partition has seen ->
INVALID_PRODUCER_EPOCH, an older coordinator epoch -> TRANSACTION_COORDINATOR_FENCED, offline
log dir -> KAFKA_STORAGE_ERROR.  Markers are acks=all appends (Kafka's requiredAcks -1): an ISR
below ``min.insync.replicas`` refuses them with NOT_ENOUGH_REPLICAS before anything is written,
one that shrank below it after the append answers NOT_ENOUGH_REPLICAS_AFTER_APPEND, a marker
not committed within the request timeout REQUEST_TIMED_OUT; the coordinator retries all three.  With an authorizer the sender needs CLUSTER_ACTION on the cluster
(brokers; else CLUSTER_AUTHORIZATION_FAILED for every partition).  The answer waits until the markers are committed (acks=all).
A single broker's own coordinator writes its markers in process; this API serves other
coordinators and tools.
A ``transaction_version`` 2 marker (v2, KIP-1228) must carry an epoch above the producer's
batches (its EndTxn bumped it): the same epoch is INVALID_PRODUCER_EPOCH unless the
transaction is already closed there (a retried marker).
Version notes: v0 was removed in Kafka 4.0; v1 is flexible; v2 adds transaction_version (v1
markers are version 0/1 ones).
"""
from __future__ import annotations

import trio

from ..acl.check import session
from ..acl.requirements import need
from ..coordinator.group.offsets import OFFSETS_TOPIC
from ..protocol.errors import ErrorCode as E, KafkaError
from ..server.dispatch import RequestContext
from .support.common import leader_partition
from .support.versions import VERSIONS

API_KEY = 27
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_CLUSTER = need(API_KEY, "cluster")
# The group coordinator's "not the coordinator of this partition (yet)" errors, which a
# transaction coordinator's marker channel does not expect (Kafka's throws IllegalStateException
# on them) while it retries NOT_LEADER_OR_FOLLOWER after a metadata refresh: Kafka's
# handleWriteTxnMarkersRequest answers NOT_LEADER_OR_FOLLOWER for them (4.4, and 3.9 with the
# new group coordinator).  Other errors (REQUEST_TIMED_OUT, a lost leadership's
# NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR) pass through unchanged, as in Kafka.
_COORDINATOR_NOT_HERE = frozenset((int(E.COORDINATOR_NOT_AVAILABLE), int(E.COORDINATOR_LOAD_IN_PROGRESS),
                                   int(E.NOT_COORDINATOR)))
# How long the answer waits for markers to be committed (Kafka uses the request timeout).
_COMMIT_WAIT_S = 30


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    return {"markers": [{"producer_id": m["producer_id"], "topics": [
        {"name": t["name"], "partitions": [{"partition_index": p, "error_code": int(code)}
                                           for p in t["partition_indexes"]]} for t in m["topics"]]}
        for m in request["markers"]]}


async def handle(ctx: RequestContext, request: dict) -> dict:
    # brokers only: CLUSTER_ACTION on the cluster, else every partition answered
    # CLUSTER_AUTHORIZATION_FAILED (Kafka's authorizeClusterOperation before anything is written)
    az = session(ctx)
    if az is not None and not az.permits(_CLUSTER):
        return error_response(ctx, request, _CLUSTER.denial)
    services = ctx.services
    rm = services.replica_manager
    out = []
    waits = []
    for m in request["markers"]:
        pid, epoch, commit, cepoch = m["producer_id"], m["producer_epoch"], m["transaction_result"], m["coordinator_epoch"]
        tv = m.get("transaction_version") or 0
        topics = []
        for t in m["topics"]:
            parts = []
            for idx in t["partition_indexes"]:
                r = {"partition_index": idx, "error_code": 0}
                try:
                    if t["name"] == OFFSETS_TOPIC:
                        gc = services.group_coordinator
                        if gc is None:
                            raise KafkaError(E.UNKNOWN_TOPIC_OR_PARTITION)
                        code = int(await gc.complete_transaction(idx, pid, epoch, commit).get())
                        r["error_code"] = int(E.NOT_LEADER_OR_FOLLOWER) if code in _COORDINATOR_NOT_HERE else code
                    else:
                        partition = leader_partition(rm, t["name"], idx)
                        # Kafka appends markers with requiredAcks -1: refused below min.insync.replicas
                        partition.check_min_isr_for_acks_all()
                        offset = partition.append_end_txn_marker(pid, epoch, commit, cepoch, tv)
                        waits.append((partition, offset + 1, r))
                except KafkaError as e:
                    r["error_code"] = int(e.code)
                parts.append(r)
            topics.append({"name": t["name"], "partitions": parts})
        out.append({"producer_id": pid, "topics": topics})
    with trio.move_on_after(_COMMIT_WAIT_S):
        for partition, hw, r in waits:
            if partition.needs_flush():
                await partition.flush()
            # acks=all's answer: NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
            # min.insync.replicas, NOT_LEADER_OR_FOLLOWER when leadership was lost meanwhile
            r["error_code"] = int(await partition.wait_for_high_watermark(hw))
            r["done"] = True
    for partition, hw, r in waits:
        if not r.pop("done", False) and not r["error_code"]:
            r["error_code"] = int(E.REQUEST_TIMED_OUT)   # the coordinator retries it
    return {"markers": out}
