"""Produce (key 0), versions 3-13 (ApiVersions advertises 0-13).

Behaviour (Apache Kafka 4.x as the oracle):
- ``acks`` must be 0, 1 or -1; anything else answers every partition with
  INVALID_REQUIRED_ACKS and appends nothing.
- Per partition: an unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (Kafka 4 never
  auto-creates topics on Produce, only on Metadata); an internal topic (``__consumer_offsets``)
  -> INVALID_TOPIC_EXCEPTION, as Kafka refuses client writes to internal topics.
- Records are validated per batch (``storage/log_validator.py``, Kafka's LogValidator: header, CRC-32C,
  offset delta / count, control bit, size against the topic's ``max.message.bytes``); failures
  map to Kafka's codes (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP,
  UNSUPPORTED_COMPRESSION_TYPE).  Kafka's per-record checks (keyless records on compacted
  topics, CreateTime timestamps outside ``message.timestamp.before/after.max.ms``) walk the
  records only where they can fail (compacted topics, a maxTimestamp past the "after" bound, a
  finite "before" bound) and answer like Kafka: v8+ ``record_errors`` with each bad record's
  index and text, and Kafka's ``error_message``.  On v8+ only record validation failures carry
  ``error_message`` (``RecordError.client_message``), as Kafka only fills it for
  RecordValidationException.
- A topic ``compression.type`` other than ``producer`` (uncompressed, gzip, snappy, lz4, zstd):
  batches in another codec are rewritten in the topic's one (``log_validator.recompress``: the
  records section decompressed and compressed again at the topic's
  ``compression.<codec>.level``, header kept, CRC rewritten), as Kafka does; only there.
- A first batch header that Kafka's batch iterator rejects (length below 14, magic outside
  0-2) fails the whole request before anything else, as in Kafka (it inspects every
  partition's first batch up front): every partition gets CORRUPT_MESSAGE with Kafka's text.
- The partition assigns offsets and stamps its leader epoch in place (both outside the CRC);
  ``message.timestamp.type=LogAppendTime`` topics get maxTimestamp rewritten (CRC recomputed)
  and the append time returned in ``log_append_time_ms`` (else -1).
- Idempotence (producer id >= 0): the partition's producer state (5 cached batches per
  producer) answers a duplicate with the original base offset and NONE without appending;
  a sequence gap -> OUT_OF_ORDER_SEQUENCE_NUMBER; an older producer epoch ->
  INVALID_PRODUCER_EPOCH (Kafka's code for idempotent produce since KIP-588).
- Authorization (with an authorizer): transactional records need WRITE on the transactional id
  (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), each topic WRITE (else
  TOPIC_AUTHORIZATION_FAILED, before UNKNOWN_TOPIC_OR_PARTITION).  Idempotent produce needs no
  IDEMPOTENT_WRITE since KIP-679 (InitProducerId checks it).
- Transactions: a transactional batch that would open a transaction on the partition is
  verified with the transaction coordinator first (KIP-890 part 1,
  ``transaction.partition.verification.enable``): the partition must be in the producer's
  Ongoing transaction with its epoch, else TRANSACTION_ABORTABLE (v11+; INVALID_TXN_STATE
  before) (INVALID_PRODUCER_EPOCH for a fenced epoch, NOT_ENOUGH_REPLICAS while the coordinator
  is unavailable or still completing the previous transaction), so no late write opens a
  hanging transaction.  v12+ is sent in transactions only by transaction version 2 clients
  (KIP-890 part 2), which send no AddPartitionsToTxn: such a batch *adds* the partition to the
  producer's transaction through the coordinator (Kafka's ADD_PARTITION operation), whether or
  not verification is enabled.  A non-transactional batch from a producer with an open
  transaction is INVALID_TXN_STATE (the log's producer state).
- acks=0: no response at all; if any partition failed, the connection is closed, as Kafka
  does, so the producer notices (it cannot read an error).
- acks=-1 with fewer in-sync replicas than the topic's ``min.insync.replicas`` (capped by
  the replica count, Kafka's effective min ISR) -> NOT_ENOUGH_REPLICAS before appending
  (Kafka's check); otherwise it waits until the high watermark covers the batch (immediate
  with one replica) within ``timeout_ms``, else REQUEST_TIMED_OUT.  The HW does not move while
  the ISR is below min.insync.replicas (Kafka 3.7+), so a batch whose ISR shrank below it
  before the HW got there times out (NOT_ENOUGH_REPLICAS_AFTER_APPEND only when the HW had
  covered it just before the shrink); NOT_LEADER_OR_FOLLOWER if this broker lost the
  leadership meanwhile (the records may or may not survive: Kafka's answer too).
- A partition this broker only follows (or does not host): NOT_LEADER_OR_FOLLOWER; acks=1
  answers after the leader's own append, so a failover may lose it (as in Kafka).
Version notes: v5 adds log_start_offset; v7 allows zstd; v8 adds record_errors/error_message;
v9 is flexible; v10-11 add the (tagged) current_leader / node_endpoints (KIP-951): filled, as
Kafka does, for NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH with the leader this broker's
metadata names; v11 TRANSACTION_ABORTABLE; v12 the implicit add to a transaction; v13 names
topics by id (KIP-516): an id this broker does not know answers UNKNOWN_TOPIC_ID.
- Offline partitions (log dir failed): KAFKA_STORAGE_ERROR.
The path: this handler decodes (topic ids, the first batches' headers, acks, authorization,
unknown topics), ``ReplicaManager.append_records`` (cluster/replica_manager.py) applies the
produce rules per partition and waits for acks=-1 (cluster/delayed.py), and this handler
encodes its per-partition statuses.  The common request (one topic, one partition, one
non-transactional batch, acks 0/1, nothing observing the connection) takes the fast path of
support/produce_fast.py (``FAST_PATH``, read by the dispatcher): the same checks and the same
partition append without the codec's dicts, this module's code for everything else.
"""
from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from ..acl.check import session
from ..acl.requirements import need
from ..protocol.errors import ErrorCode
from ..protocol.records import HEADER_SIZE, MAGIC_V2, TRANSACTIONAL_MASK, RecordError, first_batch_corruption
from ..server.dispatch import CloseConnection, RequestContext
from .support.common import NEW_LEADER_ERRORS, PartitionResponses, current_leader
from .support.produce_fast import FastPath
from .support.versions import VERSIONS

if TYPE_CHECKING:
    from ..cluster.replica_manager import ProducePartitionStatus

API_KEY = 0
MIN_VERSION, MAX_VERSION = VERSIONS[API_KEY].served   # handlers/support/versions.py
_TOPIC = need(API_KEY, "topic")
_TRANSACTIONAL_ID = need(API_KEY, "transactional_id")
# advertised from v0 although served from v3 (KAFKA-18659; the reason is with the row)
ADVERTISED_MIN_VERSION = VERSIONS[API_KEY].advertised_min_version

# Kafka sets error_message only for record validation failures (RecordValidationException).
_MESSAGE_ERRORS = (ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TIMESTAMP)


RESPONSES = PartitionResponses(
    ("topic_data", "name", "partition_data", "index"), ("responses", "name", "partition_responses", "index"),
    {"base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1, "record_errors": []})


def _resolve_topic_ids(ctx: RequestContext, request: dict) -> None:
    """v13 names topics by id: each entry gets the name this broker knows (None if unknown)."""
    if ctx.api_version >= 13:
        name_of = ctx.services.metadata_cache.name_of
        for t in request["topic_data"]:
            if not t.get("_resolved"):
                # (the decoder fills the v12- name field with its default "")
                t["name"] = name_of(t["topic_id"])
                t["_resolved"] = True


# The dispatcher's fault injection matches rules by topic name (server/faults.py).
resolve_request = _resolve_topic_ids


def error_response(ctx: RequestContext, request: dict, code: int, **fields: Any) -> dict:
    _resolve_topic_ids(ctx, request)
    resp = RESPONSES.error_response(ctx, request, code, **fields)
    if ctx.api_version >= 13:
        for t, r in zip(request["topic_data"], resp["responses"]):
            r["topic_id"] = t["topic_id"]
    return resp


def _has_transactional_records(request: dict) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: some partition's first batch is
    transactional (the corrupt-header check already ran).  Read straight from the header's
    bytes, once per partition of every Produce an authorizer checks: the magic (offset 16) and
    the low byte of the attributes (offset 22); a v0/v1 message set is never transactional."""
    for t in request["topic_data"]:
        for p in t["partition_data"]:
            rec = p["records"]
            if rec and len(rec) >= HEADER_SIZE and rec[16] == MAGIC_V2 and rec[22] & TRANSACTIONAL_MASK:
                return True
    return False


async def handle(ctx: RequestContext, request: dict) -> dict | None:
    acks = request["acks"]
    version = ctx.api_version
    services = ctx.services
    _resolve_topic_ids(ctx, request)
    for t in request["topic_data"]:
        for p in t["partition_data"]:
            corrupt = first_batch_corruption(p["records"])
            if corrupt is not None:
                # Kafka reads every partition's first batch before anything else (is the request
                # transactional/idempotent?): a corrupt first header fails the whole request.
                if acks == 0:
                    raise CloseConnection("a produce with acks=0 failed")
                return error_response(ctx, request, ErrorCode.CORRUPT_MESSAGE, error_message=corrupt)
    if acks not in (0, 1, -1):
        resp = error_response(ctx, request, ErrorCode.INVALID_REQUIRED_ACKS)
        return None if acks == 0 else resp
    transactional_id = request.get("transactional_id")
    denied: Collection[str] = ()
    az = session(ctx)
    if az is not None:
        # Kafka's order: transactional records need WRITE on the transactional id (the whole
        # request fails), then each topic needs WRITE (TOPIC_AUTHORIZATION_FAILED before any
        # existence check, so a denied client cannot probe which topics exist).
        if _has_transactional_records(request) and not (
                transactional_id is not None and az.permits(_TRANSACTIONAL_ID, transactional_id)):
            if acks == 0:
                raise CloseConnection("a produce with acks=0 was refused")
            return error_response(ctx, request, _TRANSACTIONAL_ID.denial)
        denied = {t["name"] for t in request["topic_data"]
                  if t["name"] is not None and not az.permits(_TOPIC, t["name"])}
    # Kafka's handler answers unknown ids, denied and unknown topics itself; the rest goes to
    # the ReplicaManager, whose statuses come back in request order.
    metadata = services.metadata_cache
    codes: list[int] = []
    entries = []    # (topic, partition, records) for the ReplicaManager
    for t in request["topic_data"]:
        name = t["name"]
        if name is None:
            codes.append(ErrorCode.UNKNOWN_TOPIC_ID)
        elif denied and name in denied:
            codes.append(_TOPIC.denial)
        elif metadata.get(name) is None:
            codes.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            codes.append(0)
            for p in t["partition_data"]:
                entries.append((name, p["index"], p["records"]))
    statuses = await services.replica_manager.append_records(
        entries, acks, request["timeout_ms"], version, transactional_id,
        services.clock.time_ms()) if entries else ()   # the broker's clock (pykbroker/clock.py)
    return answer(ctx, request, codes, statuses)


def answer(ctx: RequestContext, request: dict, codes: list[int], statuses: Sequence[ProducePartitionStatus]
           ) -> dict | None:
    """The response to ``request`` (its topic names resolved): ``codes`` per topic (0: its
    partitions went to the ReplicaManager), the ReplicaManager's ``statuses`` of those
    partitions in request order.  None for acks=0; raises ``CloseConnection`` for a failed
    acks=0 request.  The fast path (support/produce_fast.py) answers its errors here too."""
    acks = request["acks"]
    version = ctx.api_version
    i = 0
    responses = []
    failed = False
    endpoints: dict = {}  # KIP-951: node id -> endpoint of leaders named in current_leader
    for t, code in zip(request["topic_data"], codes):
        name = t["name"]
        parts_out: list = []
        tr = {"name": name, "partition_responses": parts_out}
        if version >= 13:
            tr["topic_id"] = t["topic_id"]
        responses.append(tr)
        for p in t["partition_data"]:
            idx = p["index"]
            if code:
                parts_out.append(RESPONSES.error(idx, code))
                failed = True
                continue
            st = statuses[i]
            i += 1
            e = st.error
            if e is None:
                r = {"index": idx, "error_code": st.code, "base_offset": st.base_offset,
                     "log_append_time_ms": st.log_append_time_ms,
                     "log_start_offset": st.log_start_offset, "record_errors": []}
            else:
                failed = True
                # A RecordError's message is exactly Kafka's error_message; other errors show
                # theirs only for the record validation codes.
                record_error = isinstance(e, RecordError)
                r = RESPONSES.error(idx, e.code)
                if e.message is not None and (record_error or e.code in _MESSAGE_ERRORS):
                    r["error_message"] = e.message
                if isinstance(e, RecordError) and e.record_errors:
                    r["record_errors"] = [{"batch_index": j, "batch_index_error_message": m}
                                          for j, m in e.record_errors]
                r["log_start_offset"] = st.log_start_offset
            if st.code and version >= 10 and st.code in NEW_LEADER_ERRORS:
                _add_current_leader(ctx, r, name, idx, endpoints)
            parts_out.append(r)
    if acks == 0:
        if failed:
            # Kafka closes the connection when an acks=0 produce fails: the only signal left.
            raise CloseConnection("a produce with acks=0 failed")
        return None
    resp = {"responses": responses, "throttle_time_ms": 0}
    if endpoints:
        resp["node_endpoints"] = list(endpoints.values())
    return resp


def _add_current_leader(ctx: RequestContext, r: dict, topic: str, index: int, endpoints: dict) -> None:
    """KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the current leader and its endpoint."""
    leader, reg = current_leader(ctx.services.metadata_cache, topic, index)
    if leader is None:
        return
    r["current_leader"] = leader
    e = reg.endpoint(ctx.listener_name) if reg is not None else None
    if e is not None:
        endpoints[reg.broker_id] = {"node_id": reg.broker_id, "host": e.host, "port": e.port, "rack": reg.rack}


# The common request's fast path (support/produce_fast.py); the dispatcher reads ``FAST_PATH``.
FAST_PATH = FastPath(sys.modules[__name__])
