"""AddPartitionsToTxn (key 24), versions 0-5.

Behaviour (Apache Kafka 4.x, KafkaApis.handleAddPartitionsToTxnRequest, TransactionCoordinator):
- v0-3 (clients): every partition must exist: an unknown topic or partition answers
  UNKNOWN_TOPIC_OR_PARTITION for it and OPERATION_NOT_ATTEMPTED for every other partition, and
  nothing is added.  Otherwise the coordinator adds them all to the producer's transaction
  (state Ongoing) and every partition carries the same answer: NONE, or
  INVALID_PRODUCER_ID_MAPPING (unknown id / another producer id), PRODUCER_FENCED (another
  epoch; INVALID_PRODUCER_EPOCH before v2... as Kafka downgrades it for old clients),
  CONCURRENT_TRANSACTIONS (a transition in flight, or the previous transaction's markers not all
  written yet: clients retry), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS.
- v4+ (between brokers, KIP-890): a batch of transactions, each answered per partition under
  ``results_by_transaction``; ``verify_only`` only checks that the partitions are in the
  producer's Ongoing transaction with its current epoch (TRANSACTION_ABORTABLE for one that is
  not, as Kafka's coordinator answers; the asking broker downgrades it for older clients),
  adding nothing.  Without ``verify_only`` the partitions are added as for a transaction
  version 2 client (Kafka's transactionVersionForAddPartitionsToTxn: v4+ is TV2): a partition
  leader asks so on a TV2 client's first transactional Produce (v12+) to it, a group
  coordinator on its first TxnOffsetCommit v5+.  This broker's own partitions make the same
  calls in process.
Version notes: v1 same as v0; v2 adds PRODUCER_FENCED handling on the client side (older
versions get INVALID_PRODUCER_EPOCH); v3 flexible; v4 batched, broker-only; v5 the same as v4
(TRANSACTION_ABORTABLE may be answered).
"""
from __future__ import annotations

from typing import Any

from ..acl.check import session
from ..acl.requirements import need
from ..cluster.metadata_cache import MetadataCache
from ..protocol.errors import ErrorCode as E
from ..server.dispatch import RequestContext
from .support.txn_errors import client_error_code
from .support.versions import VERSIONS

API_KEY = 24
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_TOPIC = need(API_KEY, "topic")
_TRANSACTIONAL_ID = need(API_KEY, "transactional_id")
_VERIFY = need(API_KEY, "verify")


def _topics_result(topics: list, code_of: Any) -> list:
    return [{"name": t["name"], "results_by_partition": [
        {"partition_index": p, "partition_error_code": int(code_of(t["name"], p))} for p in t["partitions"]]}
        for t in topics]


def error_response(ctx: RequestContext, request: dict, code: int) -> dict:
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0, "error_code": int(code), "results_by_transaction": []}
    return {"throttle_time_ms": 0,
            "results_by_topic_v3_and_below": _topics_result(request["v3_and_below_topics"],
                                                            lambda t, p: client_error_code(ctx, code))}


def _unknown(md: MetadataCache, topics: list) -> set:
    bad = set()
    for t in topics:
        info = md.get(t["name"])
        for p in t["partitions"]:
            if info is None or not (0 <= p < info.num_partitions):
                bad.add((t["name"], p))
    return bad


async def handle(ctx: RequestContext, request: dict) -> dict:
    tc = ctx.services.transaction_coordinator
    if tc is None:
        return error_response(ctx, request, E.COORDINATOR_NOT_AVAILABLE)
    md = ctx.services.metadata_cache
    az = session(ctx)
    if ctx.api_version >= 4:
        if az is not None and not az.permits(_VERIFY):
            return error_response(ctx, request, _VERIFY.denial)   # brokers only (Kafka)
        results = []
        for txn in request["transactions"]:
            tps = [(t["name"], p) for t in txn["topics"] for p in t["partitions"]]
            if txn["verify_only"]:
                codes = tc.verify(txn["transactional_id"], txn["producer_id"], txn["producer_epoch"], tps)
            else:
                bad = _unknown(md, txn["topics"])
                if bad:
                    codes = {tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in bad else E.OPERATION_NOT_ATTEMPTED
                             for tp in tps}
                else:
                    c = await tc.add_partitions(txn["transactional_id"], txn["producer_id"],
                                                txn["producer_epoch"], tps, client_tv=2)
                    codes = {tp: c for tp in tps}
            results.append({"transactional_id": txn["transactional_id"],
                            "topic_results": _topics_result(txn["topics"], lambda t, p: codes[(t, p)])})
        return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}
    topics = request["v3_and_below_topics"]
    if az is not None:
        # Kafka: WRITE on the transactional id (every partition refused), then WRITE on each
        # topic (the denied ones TOPIC_AUTHORIZATION_FAILED, unknown ones theirs, the rest not
        # attempted)
        if not az.permits(_TRANSACTIONAL_ID, request["v3_and_below_transactional_id"]):
            return error_response(ctx, request, _TRANSACTIONAL_ID.denial)
        denied = {t["name"] for t in topics if not az.permits(_TOPIC, t["name"])}
        if denied:
            unknown = _unknown(md, topics)
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topics_result(
                topics, lambda t, p: _TOPIC.denial if t in denied
                else E.UNKNOWN_TOPIC_OR_PARTITION if (t, p) in unknown else E.OPERATION_NOT_ATTEMPTED)}
    bad = _unknown(md, topics)
    if bad:
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topics_result(
            topics, lambda t, p: E.UNKNOWN_TOPIC_OR_PARTITION if (t, p) in bad else E.OPERATION_NOT_ATTEMPTED)}
    code = await tc.add_partitions(request["v3_and_below_transactional_id"], request["v3_and_below_producer_id"],
                                   request["v3_and_below_producer_epoch"],
                                   [(t["name"], p) for t in topics for p in t["partitions"]])
    return {"throttle_time_ms": 0,
            "results_by_topic_v3_and_below": _topics_result(topics, lambda t, p: client_error_code(ctx, code))}
